"""Projection configuration and version: the knobs every derived record depends on.

The configuration is part of what a derived record means: the same ledger folded with a
different turn cap finalizes different episodes. So the config is stored in every
:class:`~holon.projections.ProjectionState`, compared by replay verification and
checkpoints, and a mismatch is reported rather than silently mixed.
"""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = ["DEFAULT_CONFIG", "PROJECTION_VERSION", "ProjectionConfig", "config_differences"]

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
PROJECTION_VERSION: Final = 8


class ProjectionConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Caps and thresholds of the memory projections (see docs/memory-model.md).

    ``turn_cap`` is the hard episode length in turns; the ``*_cap`` values bound the
    lists of a :class:`~holon.projections.WorkingMemorySnapshot`, the ``*_window``
    values bound what :class:`~holon.projections.RuntimeState` keeps, and the
    ``episode_*`` values bound what one :class:`~holon.records.ContextEpisodeRecord`
    lists. Every list being bounded is what keeps the post-turn refresh flat in the
    length of the ledger.
    """

    turn_cap: int = 12
    # snapshot caps
    scope_cap: int = 12
    plan_cap: int = 24
    files_cap: int = 16
    decisions_cap: int = 8
    follow_ups_cap: int = 8
    waiting_cap: int = 6
    delta_lines_cap: int = 12
    # runtime windows
    messages_window: int = 24
    briefs_window: int = 12
    tools_window: int = 24
    files_window: int = 64
    finished_window: int = 16
    carried_window: int = 16
    # per-episode list caps
    episode_summary_cap: int = 8
    episode_list_cap: int = 16

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            if getattr(self, name) < 1:
                raise ValueError(f"ProjectionConfig.{name} must be at least 1, got {getattr(self, name)}")


#: The configuration used when none is given.
DEFAULT_CONFIG: Final = ProjectionConfig()


def config_differences(
    have: ProjectionConfig, given: ProjectionConfig, *, have_name: str = "the state's"
) -> tuple[tuple[str, ...], str]:
    """The fields in which two configs differ, and ``"turn_cap: the state's 3, given 5; …"``."""
    names = tuple(n for n in ProjectionConfig.__struct_fields__ if getattr(have, n) != getattr(given, n))
    detail = "; ".join(f"{n}: {have_name} {getattr(have, n)}, given {getattr(given, n)}" for n in names)
    return names, detail
