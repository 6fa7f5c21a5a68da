"""Where an agent made its model calls in a record stream, and how each record reads in a chat transcript.

:func:`call_positions` says where an agent makes its model calls: a call precedes each
run of model output (an assistant message, a tool call, a plan or decision the agent
declares), after the input it answers. Generated runs and imported real transcripts go
through the same rule. A sub-agent's own records (a message, tool call or result
carrying ``task_id``, holon.records schema 4) are its work, not the run's agent's: no
call of the run comes before them.

:func:`transcript_text` is how a record reads in a plain chat transcript — what a
chat-style tool that keeps its whole history sends (:class:`~holon.simulate.FullHistory`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import holon.records as r
from holon.context.rounds import is_model_output, round_text

__all__ = ["call_positions", "is_model_output", "transcript_text"]

# Records that neither answer nor ask: they never start or end a run of output.
_NEUTRAL_KINDS: Final = frozenset({r.ExecutionEnvironment.KIND, r.TurnEnded.KIND})


def call_positions(records: Sequence[r.Record]) -> tuple[int, ...]:
    """Indices ``p`` such that a model call is made with ``records[:p]`` in the ledger.

    A call happens right before a model output whose previous (non-neutral) record was
    not itself output of the same response — e.g. an assistant message followed by two
    tool calls is one call, and each tool result is answered by the next call.
    """
    positions: list[int] = []
    previous_output = False
    for i, record in enumerate(records):
        kind = record.kind
        if kind in _NEUTRAL_KINDS or _subagent_work(record.body):
            if kind == r.TurnEnded.KIND:
                previous_output = False
            continue
        output = is_model_output(record.body)
        if output and not previous_output:
            positions.append(i)
        previous_output = output
    return tuple(positions)


def _subagent_work(body: r.Body) -> bool:
    """A sub-agent's own record: one carrying ``task_id`` (a brief's names the task it reports on)."""
    return not isinstance(body, r.Brief) and getattr(body, "task_id", None) is not None


def transcript_text(body: r.Body) -> str | None:
    """How an evidence record reads in a plain conversation transcript (``None``: not shown).

    This is what the baseline policies put in their prompts: every record as the line(s)
    a chat-style agent would have had in its message list — the user's input, tool calls
    with their arguments, tool results with their full output, plans and decisions as the
    agent's tool calls declared them (``assistant → ``). The lines are those holon uses
    for the same record (``holon.context.rounds.round_text``), without its ``[ledger:N]``
    citations, so every policy pays the same tokens for the same evidence.
    """
    if isinstance(body, r.TurnStarted):
        return f"user ({body.trigger}): {body.input}" if body.input is not None else None
    text = round_text(r.Record(body=body, ts=0, seq=0), cite=False)
    if text is None or isinstance(body, r.Message) or not is_model_output(body):
        return text
    return f"assistant → {text}"
