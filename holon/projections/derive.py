"""What a record brings with it: the derived records a writer appends around the records it writes.

A ledger is written the way the runtime writes it, so that replay re-derives every derived
record it holds (DESIGN.md, invariant 7). Whoever appends — :class:`holon.Agent`, `holon
append` and `holon import` (:func:`holon.replay.append_evidence`), the simulation, a test's
fake ledger, a benchmark — follows one rule, stated here once:

- before anything else, the refresh the ledger still owes (:func:`owed_refresh`: its writer
  died after a ``turn_ended``, or between the delta and the episode of its refresh);
- before a ``prompt_rendered``, the refresh before a prompt (:func:`refresh_before_prompt`:
  working memory states something the open turn made untrue);
- after a ``turn_ended``, the post-turn refresh (:func:`post_turn_refresh`).

A writer asks :func:`derived_before` before it writes a record and :func:`derived_after` once
it has folded it, and appends (and folds) what they return, in order, each with the next seq.
:func:`holon.projections.verify_derivations` checks a ledger against the same rule.
"""

from __future__ import annotations

import holon.records as r
from holon.projections.projection import ProjectionState
from holon.projections.refresh import owed_refresh, post_turn_refresh, refresh_before_prompt

__all__ = ["derived_after", "derived_before"]


def derived_before(state: ProjectionState, kind: str | None = None, *, tail_ts: int) -> tuple[r.Record, ...]:
    """The derived records to append before a record of ``kind``, onto the ledger folded into ``state``.

    ``kind`` is the next record's (``None``: no particular record, as when a writer opens a
    ledger and completes what it owes). It takes the kind, not the record: a writer renders a
    prompt from the state these records make, so it asks before it has the prompt's record.
    ``tail_ts`` is the ts of the ledger's newest record (the record at ``state.seq``; any ts
    when the ledger is empty): the refresh before a prompt is stamped with it. The records
    returned have ``seq`` ``-1``: the writer numbers them as it appends them.
    """
    owed = owed_refresh(state)
    if owed or kind != r.PromptRendered.KIND:
        # A state that owes a refresh stands right after a turn_ended (or the delta of its
        # refresh): no turn is open, and outside an open turn no refresh comes before a prompt.
        return owed
    return refresh_before_prompt(state, ts=tail_ts)


def derived_after(state: ProjectionState, record: r.Record) -> tuple[r.Record, ...]:
    """The derived records to append right after ``record``, once it is folded into ``state``.

    After a ``turn_ended``, the post-turn refresh (a working-memory delta, an episode, both or
    neither, stamped with the ``turn_ended``'s ts and turn); after any other record, nothing.
    ``state`` must be the ledger folded up to and including ``record``.
    """
    if record.kind != r.TurnEnded.KIND:
        return ()
    return post_turn_refresh(state)
