"""Projection configuration and version: the knobs every derived record depends on.

The configuration is part of what a derived record means: the same ledger folded with a
different turn cap finalizes different episodes. So the config is stored in every
:class:`~holon.projections.ProjectionState`, stated by every derived record it derives,
compared by replay verification and checkpoints, and a mismatch is reported rather than
silently mixed. :class:`ProjectionConfig` itself is defined in :mod:`holon.records`, the
vocabulary, so that a derived record can hold it (records import no other layer).
"""

from __future__ import annotations

from typing import Final

import msgspec

import holon.records as r
from holon.records import ProjectionConfig

__all__ = [
    "DEFAULT_CONFIG",
    "PROJECTION_VERSION",
    "ProjectionConfig",
    "config_differences",
    "describe_projection",
    "stated_config",
]

#: Version of the projection rules. Bump it whenever a change to this package would
#: derive a different record (or a different encoded state) from the same evidence:
#: derived records carry it, checkpoints are keyed by it, verification checks it.
# 4: a wait boundary needs a wait opened in the turn to be still open, and only the
# resolution of an open wait makes a turn a wake (episodes and delta reasons changed).
# 5: episodes list touched files as the working set keys them (no `./`, no blanks); a
# redeclared decision leaves the bucket of the item it moved from; a plan or decision
# for a work item that is not open is carried, not kept in a bucket nothing closes.
# 6: the snapshot counts the active item's scope constraints beyond ``scope_cap``
# (``scope_omitted``), which it dropped without a word.
# 7: the snapshot keeps the scope constraints beyond ``scope_cap`` (``scope_rest``), so
# replacing or dropping one is a delta (which says so) and a dropped one supersedes; a
# wait, follow-up or plan step that only fell out of its capped list is "not shown" in a
# delta (was ``-``) and supersedes nothing.
# 8: the runtime counts the decisions ``decisions_cap`` pushes out of each bucket, and the
# snapshot counts the decisions, open follow-ups and open waits over its caps
# (``decisions_omitted``, ``follow_ups_omitted``, ``waiting_omitted``); a delta says a decision
# only pushed out still holds (was ``-decision``), where a withdrawn one moved, that an entry
# coming into view was over the cap (was ``+``), and sums up the previous active item's scope,
# plan steps and decisions in one line each (was one ``-`` line per entry).
# 9: deltas and episodes state the config they were derived under (``projection``: ``None``
# for the default), so a ledger whose turns never rendered a prompt still says its config.
# 10: the snapshot keeps the plan steps beyond ``plan_cap`` (``plan_rest``); a delta compares
# the whole plan (a step the shown window slid onto "was over the cap, now shown", was ``+``; a
# step finished as it left the view says so), and an item switch is one line naming what became
# of the previous item, one counting what the new item brings (was a ``+`` line per rule, step,
# file and decision) and one counting what the previous item takes with it (was one per list).
# 11: a delta's reason and lines are true of what the model last read: a plan recorded again
# as it was is not "plan changed", a merged delta's reason is read off the snapshot the model
# last read, and what a merged delta would not tell (a switch and back, a wait or follow-up
# opened and ended in between) has a line; an ended wait or follow-up says how it ended, and
# a shown decision, wait or follow-up redeclared with another text is "revised" (was ``+``);
# and a file path inside the declared working directory (``cwd``, a relative one inside
# ``workspace``, else ``workspace``) is keyed relative to it in the working set and an
# episode's files, so an editor's absolute path and a command's relative one are one file
# (was two entries, both shown).
# 12: the operator's requests of a session (the mandate) are kept, and where the session
# declares no work item the active work is derived from its first request (``request:<seq>``:
# a delta, an episode, a switch at a new session); failing verification commands are working
# memory; an episode lists the requests made during it, and one a new session ended is
# finalized alone by the next refresh.
# Also in 12: a sub-agent's evidence (a record with a ``task_id``) is its running task's: folded into
# the task's entry (tool calls, errors, commands, files, plan, last error, each capped by
# ``task_list_cap``), never into the agent's recent windows, working set, plans or episode
# counts (was the agent's own); an episode's task result line counts the task's tool calls.
# Working memory shows tasks (``tasks``, ``tasks_omitted``): the running ones and the
# ``tasks_cap`` newest results of the active item and of no item, with what each sub-agent
# did; a delta tells a task started, its progress, its result (once, when it arrives, also
# when working memory cannot show it) and a result leaving; a task shown running that
# rejoined supersedes, and a result working memory does not show refreshes it before a
# prompt (a result reached no prompt). A job's results are one per job: working memory shows
# the newest run's of tasks of the same description, and an episode names the job of each task
# result it lists (``task_runs``), so a later run supersedes it there too. A result stays in
# working memory beyond ``tasks_cap`` through the turn after the one it arrived in.
PROJECTION_VERSION: Final = 12

#: The first projection version whose derived records state their config: in an older
#: record a missing ``projection`` says nothing (see :func:`stated_config`).
STATES_CONFIG: Final = 9


#: The configuration used when none is given.
DEFAULT_CONFIG: Final = ProjectionConfig()


def config_differences(
    have: ProjectionConfig, given: ProjectionConfig, *, have_name: str = "the state's"
) -> tuple[tuple[str, ...], str]:
    """The fields in which two configs differ, and ``"turn_cap: the state's 3, given 5; …"``."""
    names = tuple(n for n in ProjectionConfig.__struct_fields__ if getattr(have, n) != getattr(given, n))
    detail = "; ".join(f"{n}: {have_name} {getattr(have, n)}, given {getattr(given, n)}" for n in names)
    return names, detail


def describe_projection(config: ProjectionConfig) -> str:
    """A projection config as its non-default fields: ``ProjectionConfig(turn_cap=2)``."""
    fields = msgspec.structs.asdict(config)
    default = msgspec.structs.asdict(DEFAULT_CONFIG)
    changed = ", ".join(f"{name}={value!r}" for name, value in fields.items() if value != default[name])
    return f"ProjectionConfig({changed})"


def stated_config(body: r.WorkingMemoryDelta | r.ContextEpisodeRecord) -> ProjectionConfig | None:
    """The projection config a derived record states it was derived under; ``None``: it states none.

    A record of projection version 9 or later states its ``projection`` (``None``: the
    default of its version); an older one was written before records stated it.
    """
    if body.projection_version < STATES_CONFIG:
        return None
    return DEFAULT_CONFIG if body.projection is None else body.projection


def config_field(config: ProjectionConfig) -> ProjectionConfig | None:
    """The ``projection`` field of a record derived under ``config``: ``None`` for the default.

    ``None`` rather than the default's fields: most ledgers run the default, and their
    deltas and episodes keep the bytes they had before the field existed (a record of
    projection version 9 or later without it states the default).
    """
    if config is DEFAULT_CONFIG:  # the usual case, without comparing every field
        return None
    return None if config == DEFAULT_CONFIG else config
