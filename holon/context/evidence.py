"""The evidence a prompt's history is built from: a bounded view of the ledger's records.

The recent history is filled by tokens, newest first, down to the oldest evidence that
fits the budget, so it may reach far beyond what the projections keep in memory (their
windows are bounds on a fold's size, not on what the model sees). The renderer stays
pure by reading that evidence through an :class:`EvidenceView` its caller hands in: the
runtime serves it from the records it appended (and the ledger behind them), the CLI and
replay from the records they fold. A view answers only ranges of seqs, and the renderer
asks for the range its history can fill, so a render costs what the budget holds, not
what the ledger holds.

:class:`RecordsView` is the view over records in memory; :class:`EvidenceBuffer` the
bounded view a writer or a replay keeps as it goes (the records it appended or folded,
and, for older ones, a reader it is given); :func:`window_view` the view over a
projection state's own windows, for inputs built without a ledger.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, Protocol

import holon.records as r
from holon.context.inputs import ContextInputs

__all__ = ["EVIDENCE_KINDS", "EvidenceBuffer", "EvidenceView", "PendingView", "RecordsView", "window_view"]

#: The record kinds a history is built from: messages and briefs, tool calls and their
#: results, and the plans a call declares (its unit then shows a stub, not the steps).
EVIDENCE_KINDS: Final = (r.Message, r.Brief, r.ToolIntent, r.ToolResult, r.WorkPlan)

#: What an :class:`EvidenceBuffer` holds by default: characters of text (an output moved to
#: the blob store counts its preview and tail), and records — about the text of a
#: 500,000-token history. Older records are read back through ``older``.
BUFFER_CHARS: Final = 1 << 21
BUFFER_RECORDS: Final = 1 << 16


class EvidenceView(Protocol):
    """The ledger's records in a range of seqs, for the recent history.

    ``first_seq`` is the first seq the view can serve: ``0`` for a whole ledger, more
    for a view that only holds recent records (the history then names where it starts).
    ``records(from_seq, to_seq)`` returns the records with ``from_seq <= seq < to_seq``
    that it holds, in seq order; ``blob_text(hash)`` the text of a tool output the ledger
    moved to its blob store (``None``: not available, and the history shows its preview).
    The answers must depend only on the ledger's bytes.
    """

    @property
    def first_seq(self) -> int:
        """The first seq :meth:`records` can return."""
        ...

    def records(self, from_seq: int, to_seq: int) -> Sequence[r.Record]:
        """The records with ``from_seq <= seq < to_seq``, in seq order."""
        ...

    def blob_text(self, blob_hash: str) -> str | None:
        """The UTF-8 text a blob holds, or ``None`` when the view cannot read it."""
        ...


class RecordsView:
    """An :class:`EvidenceView` over records held in memory, in seq order.

    ``first_seq`` (default 0: the records are all there is) is the first seq it serves; ``blobs``
    maps a blob's hash to its bytes (the outputs the records moved there).
    """

    def __init__(
        self,
        records: Sequence[r.Record],
        *,
        first_seq: int = 0,
        blobs: Mapping[str, bytes] | None = None,
    ) -> None:
        self._records = records
        self._seqs = [rec.seq for rec in records]
        self._first = first_seq
        self._blobs = blobs if blobs is not None else {}

    def blob_text(self, blob_hash: str) -> str | None:
        data = self._blobs.get(blob_hash)
        return _text(data) if data is not None else None

    @property
    def first_seq(self) -> int:
        return self._first

    def records(self, from_seq: int, to_seq: int) -> Sequence[r.Record]:
        lo = bisect.bisect_left(self._seqs, from_seq)
        hi = bisect.bisect_left(self._seqs, to_seq)
        return self._records[lo:hi]


def window_view(inputs: ContextInputs) -> RecordsView:
    """The evidence a :class:`ContextInputs` holds itself: its recent windows.

    For inputs built without a ledger (by hand, or from a state alone). The windows hold
    every message, brief and tool call from ``history_floor`` on, which is where the view
    starts.
    """
    records: list[r.Record] = [
        r.Record(body=m.message, ts=m.ts, turn=m.turn, seq=m.seq) for m in inputs.messages
    ]
    records.extend(r.Record(body=b.brief, ts=b.ts, turn=b.turn, seq=b.seq) for b in inputs.briefs)
    for ex in inputs.tools:
        if ex.intent is not None and ex.intent_seq is not None:
            records.append(r.Record(body=ex.intent, ts=ex.ts, turn=ex.turn, seq=ex.intent_seq))
        if ex.result is not None and ex.result_seq is not None:
            records.append(r.Record(body=ex.result, ts=ex.ts, turn=ex.turn, seq=ex.result_seq))
    records.sort(key=lambda rec: rec.seq)
    return RecordsView(records, first_seq=inputs.history_floor)


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None  # not an output holon stored (those are UTF-8): shown as its preview


#: Ranges read back through ``older`` an :class:`EvidenceBuffer` keeps (the newest read kept).
_OLDER_RANGES: Final = 4
#: Characters of blob texts an :class:`EvidenceBuffer` keeps read (the newest read kept).
BLOB_TEXT_CHARS: Final = 1 << 23


def _chars(record: r.Record) -> int:
    body = record.body
    if isinstance(body, r.Message | r.Brief):
        return len(body.text)
    if isinstance(body, r.ToolResult):
        return len(body.output) + (len(body.blob.preview) + len(body.blob.tail) if body.blob else 0)
    if isinstance(body, r.ToolIntent):
        return 64 + sum(len(k) + len(str(v)) for k, v in body.args.items())
    if isinstance(body, r.WorkPlan):
        return sum(len(step.text) for step in body.steps)
    return 0


class EvidenceBuffer:
    """A bounded :class:`EvidenceView` fed record by record (:meth:`add`), newest kept.

    It holds the evidence records (:data:`EVIDENCE_KINDS`) it was given, up to
    ``max_chars`` characters of their text and ``max_records`` records, dropping the
    oldest. ``older(from_seq, to_seq)``, when given, reads records before what it holds
    (the runtime passes a ledger read); without it the view starts at its oldest record
    once it has dropped one. ``start`` is the seq of the first record it will be given
    (an agent resuming a ledger starts at its head: what came before is read back).
    Records are added once each, in seq order; records of other kinds are skipped.
    ``blob(hash)`` reads a blob's bytes (the ledger's ``get_blob``); the texts read are
    kept, up to :data:`BLOB_TEXT_CHARS`, since consecutive prompts show the same outputs.
    """

    def __init__(
        self,
        *,
        start: int = 0,
        older: Callable[[int, int], Iterable[r.Record]] | None = None,
        blob: Callable[[str], bytes] | None = None,
        max_chars: int = BUFFER_CHARS,
        max_records: int = BUFFER_RECORDS,
    ) -> None:
        self._blob = blob
        self._blob_texts: OrderedDict[str, str | None] = OrderedDict()
        self._blob_chars = 0
        self._records: list[r.Record] = []
        self._seqs: list[int] = []
        self._sizes: list[int] = []
        self._lo = 0  # index of the oldest record still held
        self._chars = 0
        self._dropped_to = start  # no evidence before this seq is held
        self._older = older
        self._older_read: OrderedDict[tuple[int, int], list[r.Record]] = OrderedDict()
        self._max_chars = max_chars
        self._max_records = max_records

    @property
    def first_seq(self) -> int:
        return 0 if self._older is not None else self._dropped_to

    def add(self, record: r.Record) -> None:
        """Hold ``record`` if it is evidence (its seq must follow every record added before)."""
        if not isinstance(record.body, EVIDENCE_KINDS):
            return
        size = _chars(record)
        self._records.append(record)
        self._seqs.append(record.seq)
        self._sizes.append(size)
        self._chars += size
        while len(self._seqs) - self._lo > 1 and (
            self._chars > self._max_chars or len(self._seqs) - self._lo > self._max_records
        ):
            self._chars -= self._sizes[self._lo]
            self._dropped_to = self._seqs[self._lo] + 1
            self._lo += 1
        if self._lo > len(self._seqs) // 2 and self._lo > 1024:
            # Drop the dead half at once: amortized O(1) a record.
            del self._records[: self._lo], self._seqs[: self._lo], self._sizes[: self._lo]
            self._lo = 0

    def extend(self, records: Iterable[r.Record]) -> None:
        """:meth:`add` each record, in order."""
        for record in records:
            self.add(record)

    def records(self, from_seq: int, to_seq: int) -> Sequence[r.Record]:
        out: list[r.Record] = []
        if self._older is not None and from_seq < self._dropped_to:
            # Before what the buffer holds: read back from the source, evidence only. The
            # ranges read last are kept: consecutive renders ask for the same ones (the
            # history's start and the recall window before it hold while the history does),
            # and the ledger's records never change.
            upto = min(to_seq, self._dropped_to)
            key = (from_seq, upto)
            read = self._older_read.get(key)
            if read is None:
                read = [rec for rec in self._older(from_seq, upto) if isinstance(rec.body, EVIDENCE_KINDS)]
                self._older_read[key] = read
                if len(self._older_read) > _OLDER_RANGES:
                    self._older_read.popitem(last=False)
            else:
                self._older_read.move_to_end(key)
            out.extend(read)
        lo = bisect.bisect_left(self._seqs, max(from_seq, self._dropped_to), self._lo)
        hi = bisect.bisect_left(self._seqs, to_seq, lo)
        out.extend(self._records[lo:hi])
        return out

    def blob_text(self, blob_hash: str) -> str | None:
        if self._blob is None:
            return None
        texts = self._blob_texts
        if blob_hash in texts:
            texts.move_to_end(blob_hash)
            return texts[blob_hash]
        text = _text(self._blob(blob_hash))
        texts[blob_hash] = text
        self._blob_chars += len(text or "")
        while len(texts) > 1 and self._blob_chars > BLOB_TEXT_CHARS:
            _, dropped = texts.popitem(last=False)
            self._blob_chars -= len(dropped or "")
        return text


class PendingView:
    """An :class:`EvidenceView` and records after it that were not appended, as one view.

    For a preview (:meth:`holon.Agent.preview`, ``holon render --input``): the prompt a
    turn would get for an input is rendered from the ledger's evidence plus that turn's
    opening records, folded but never written. ``pending`` follow every record of
    ``base``, in seq order.
    """

    def __init__(self, base: EvidenceView, pending: Sequence[r.Record]) -> None:
        self._base = base
        self._pending = [record for record in pending if isinstance(record.body, EVIDENCE_KINDS)]
        self._from = pending[0].seq if pending else None

    @property
    def first_seq(self) -> int:
        return self._base.first_seq

    def records(self, from_seq: int, to_seq: int) -> Sequence[r.Record]:
        start = self._from
        if start is None:
            return self._base.records(from_seq, to_seq)
        found = list(self._base.records(from_seq, min(to_seq, start)))
        found.extend(record for record in self._pending if from_seq <= record.seq < to_seq)
        return found

    def blob_text(self, blob_hash: str) -> str | None:
        return self._base.blob_text(blob_hash)
