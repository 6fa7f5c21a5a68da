"""A run to simulate: its evidence records and the positions of its model calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import holon.records as r
from holon.simulate.calls import call_positions

__all__ = ["ModelCalls", "RecordedRun", "recorded_run"]


class ModelCalls(Protocol):
    """Evidence records in ledger order and the model calls made over them.

    ``calls`` holds indices ``p`` into ``records``: a model call is made with
    ``records[:p]`` in the ledger (:func:`~holon.simulate.call_positions`). The
    evaluation's scenarios are such runs, and so is a ledger's evidence
    (:func:`recorded_run`).
    """

    @property
    def records(self) -> Sequence[r.Record]: ...

    @property
    def calls(self) -> Sequence[int]: ...


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """The evidence of a recorded run and where its agent called the model."""

    records: tuple[r.Record, ...]
    calls: tuple[int, ...]


def recorded_run(records: Sequence[r.Record]) -> RecordedRun:
    """The evidence of a ledger's records and its model calls.

    Derived records (the post-turn refresh's deltas and episodes) and recorded prompts
    are the runtime's to write, not evidence: a simulation derives and renders its own.
    """
    evidence = tuple(
        record
        for record in records
        if record.kind not in r.DERIVED_KINDS and record.kind != r.PromptRendered.KIND
    )
    return RecordedRun(records=evidence, calls=call_positions(evidence))
