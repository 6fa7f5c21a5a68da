"""A run to simulate: its evidence records and the positions of its model calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

import holon.records as r
from holon.simulate.calls import call_positions

__all__ = ["ModelCalls", "RecordedRun", "inline_outputs", "recorded_run"]


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

    Derived records (the post-turn refresh's deltas and episodes), recorded prompts and the
    usage of the model calls made on them are the runtime's to write, not evidence: a
    simulation derives and renders its own, and its calls were never made.
    """
    evidence = tuple(
        record
        for record in records
        if record.kind not in r.DERIVED_KINDS and record.kind not in (r.PromptRendered.KIND, r.ModelCall.KIND)
    )
    return RecordedRun(records=evidence, calls=call_positions(evidence))


def inline_outputs(run: RecordedRun, blob: Callable[[str], bytes]) -> RecordedRun:
    """``run`` with every output a ledger moved to its blob store put back inline.

    A ledger keeps a large tool or task output as a blob ref (a preview in the record);
    the tool a transcript came from sent the whole output, so its transcript
    (:class:`~holon.simulate.FullHistory`) must read it whole. ``blob`` reads a blob's bytes.
    """
    records = []
    for record in run.records:
        body = record.body
        if isinstance(body, r.ToolResult | r.TaskResult) and body.blob is not None:
            output = blob(body.blob.hash).decode("utf-8")
            inline = msgspec.structs.replace(body, output=output, blob=None)
            records.append(msgspec.structs.replace(record, body=inline))
        else:
            records.append(record)
    return RecordedRun(records=tuple(records), calls=run.calls)
