"""The write core an :class:`~holon.runtime.Agent` and its turns share: one writer of one ledger.

:class:`AgentCore` holds the ledger, the live projection state folded from it, the tool log
and the evidence the prompts' history is read from. Every record the agent or a turn records
goes through :meth:`AgentCore.append`: checked in its wire form, appended, folded into all of
them; the derived records a record brings (:mod:`holon.projections.derive`) are appended the
same way. It also keeps the clock (timestamps never go backwards), the flushes, the lock that
refuses a second thread, and why the agent stopped when its live state may no longer match
its ledger. The agent and its turns hold the core; neither reaches into the other's state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Final, Literal

import msgspec

import holon.records as r
from holon.context import EpisodeIndex, EvidenceBuffer
from holon.errors import InvalidRecord, UsageError
from holon.ledger import Ledger
from holon.projections import ProjectionState, apply, derived_after
from holon.runtime.checkpoints import ToolIndex

__all__ = [
    "PREVIEW_CHARS",
    "SEARCH_PENDING",
    "AgentCore",
    "Outcome",
    "ToolStatus",
    "checked",
    "error_text",
    "not_utf8",
    "strings",
    "wall_clock_ms",
]

Outcome = Literal["completed", "waiting", "failed", "interrupted"]
# "unknown" too: a daemon that cannot tell whether the effect happened (a remote call
# that timed out) says so, as the runtime does for a call a crash interrupted.
ToolStatus = Literal["ok", "error", "interrupted", "unknown"]

PREVIEW_CHARS: Final = 200
# Records appended since the last search that the agent keeps for the next one. Past this
# many, it drops them and the next search reads them back from the ledger instead.
SEARCH_PENDING: Final = 10_000


def checked(record: r.Record) -> r.Record:
    """The record as it will be stored, validated by a round trip through the wire form.

    Struct constructors do not check ``Literal`` fields, so this runs *before* anything
    is appended; the decoded form is what gets folded, not the caller's object (a list
    where the schema says tuple would make the live state differ from a cold replay's).
    """
    try:
        stored = r.decode_msgpack_record(r.encode_msgpack_record(record), where="the record to append")
    except UnicodeEncodeError as exc:
        raise not_utf8(exc) from None
    except (msgspec.EncodeError, TypeError, OverflowError) as exc:
        raise InvalidRecord(f"record does not encode ({exc})", where="the record to append") from None
    r.check_json_fields(stored, where="the record to append")  # as the ledger will (bytes, NaN)
    return stored


def not_utf8(exc: UnicodeEncodeError) -> InvalidRecord:
    """The refusal of text that does not encode as UTF-8."""
    # Lone surrogates are what errors="surrogateescape" makes of non-UTF-8 bytes (file
    # names, subprocess output); the ledger stores UTF-8 only.
    return InvalidRecord(
        f"text is not valid UTF-8 ({exc}): decode bytes with errors='replace' or 'backslashreplace' "
        "before recording them",
        where="the record to append",
    )


def error_text(exc: BaseException) -> str:
    """An exception as the runtime records it (``Type: message``), always storable.

    Its message may carry lone surrogates (a non-UTF-8 file name or command output decoded
    with surrogateescape); recorded verbatim, the turn_ended or error result would not
    encode, leaving the turn or call open and hiding the caller's exception.
    """
    return f"{type(exc).__name__}: {exc}".encode("utf-8", "backslashreplace").decode("utf-8")


def strings(value: tuple[str, ...], field: str) -> tuple[str, ...]:
    """A tuple-of-strings argument as a tuple, refusing a bare string.

    ``tuple("src/app.py")`` is ten one-character strings, which would validate and be
    recorded as such.
    """
    if isinstance(value, str):
        raise InvalidRecord(
            f"expected a tuple of strings, got the string {value!r}: pass ({value!r},)",
            where="the record to append",
            field=field,
        )
    return tuple(value)


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default clock of an agent."""
    return time.time_ns() // 1_000_000


class AgentCore:
    """The single writer of an agent's ledger, and the live state folded from what it wrote.

    Not thread-safe, as the agent is not: :meth:`exclusive` refuses a second thread that
    appends while one does, rather than letting it break the hash chain.
    """

    def __init__(
        self, ledger: Ledger, state: ProjectionState, tools: ToolIndex, *, clock: Callable[[], int]
    ) -> None:
        self.ledger = ledger
        self.state = state
        self.tools = tools
        # The evidence the prompts' history is read from: what this agent appends, and the
        # ledger for what came before it (a history reaching back past a reopen).
        self.evidence = EvidenceBuffer(start=state.seq + 1, older=ledger.read, blob=ledger.get_blob)
        self.clock = clock
        self.last_ts = 0  # the newest timestamp handed out (the floor of the next)
        self.tail_ts = 0  # the ts of the newest record (set on open from the ledger)
        # The newest seq this agent flushed (set on open: what the ledger holds is on disk).
        self.flushed_seq = state.seq
        # The archived episodes, indexed (None until first used, or restored on open).
        self.index: EpisodeIndex | None = None
        # Once the agent has searched: the records appended since, for the next search to
        # index (None: more than SEARCH_PENDING were appended, it reads them back instead).
        self.unsearched: list[r.Record] | None = None
        self.closed = False
        # Why this agent's live state can no longer be trusted to match its ledger (an
        # append folded only in part, a post-turn refresh cut short): it refuses more use.
        self.stale: str | None = None
        # Held while the agent appends (and through a turn's end, a render, an intent's
        # flush): a second thread appending at the same time broke the hash chain.
        self._busy = threading.RLock()

    def check_open(self) -> None:
        """Refuse (UsageError) use of a closed or stopped agent."""
        if self.closed:
            raise UsageError(f"agent on ledger {self.ledger.path} is closed; open it again")
        if self.stale is not None:
            raise UsageError(
                f"agent on ledger {self.ledger.path} stopped: {self.stale}; its live state may no longer "
                "match the ledger, so it records nothing more: close it and open the ledger again, which "
                "folds what was recorded and completes what was cut short"
            )

    # ------------------------------------------------------------------ the clock

    def now(self) -> int:
        """The next record's timestamp, kept as the floor of the ones after it."""
        # Timestamps never go backwards in one ledger, even when the wall clock steps back.
        ts = self.clock_reading()
        self.last_ts = ts
        return ts

    def clock_reading(self) -> int:
        """The timestamp the next record would get (the clock, checked, never before the last)."""
        now = self.clock()
        # Checked before it is kept: a float (time.time() * 1000) or an overflowing reading
        # became the floor of every later timestamp, so each record after it failed to
        # validate, with a message about a field, not the clock.
        if isinstance(now, bool) or not isinstance(now, int) or now >= 1 << 63:
            raise UsageError(
                f"the agent's clock returned {now!r}: it must return integer milliseconds since the "
                "epoch below 2**63, e.g. time.time_ns() // 1_000_000; nothing was recorded"
            )
        if not r.MIN_TS <= now <= r.MAX_TS:
            # time.time_ns or a microsecond clock passed as the clock: every timestamp of an
            # append-only ledger would be wrong for good, and the floor of all later ones.
            raise UsageError(
                f"the agent's clock returned {now:,}, which is not milliseconds since the epoch "
                "(negative, or past the year 5000: micro- or nanoseconds?); return "
                "time.time_ns() // 1_000_000; nothing was recorded"
            )
        return max(now, self.last_ts)

    # ------------------------------------------------------------------ appending

    def append(self, body: r.Body, turn: int | None, *, ts: int | None = None) -> r.Record:
        """Append one record, fold it, and return it exactly as stored (and as replay reads it).

        ``ts`` defaults to the clock; derived records carry their turn_ended's ``ts``.
        """
        with self.exclusive():
            record = r.Record(body=body, ts=self.now() if ts is None else ts, turn=turn)
            if isinstance(body, r.ToolResult | r.TaskResult) and body.blob is None:
                record = self._place_output(record, body)
            return self.append_checked(checked(record))

    def append_checked(self, record: r.Record) -> r.Record:
        """Append a record already validated by :func:`checked`, fold it, return it as stored."""
        seq = self.ledger.append(record)
        try:
            return self._fold_stored(msgspec.structs.replace(record, seq=seq))
        except BaseException as exc:
            self.stop(f"seq {seq} was appended but not folded ({error_text(exc)})")
            raise

    def append_all_checked(self, records: list[r.Record]) -> list[r.Record]:
        """Append validated records all or none (:meth:`Ledger.append_many`), fold them, return them."""
        # The fold too: another thread's append between these records and their fold would
        # be folded before them, out of the ledger's order.
        with self.exclusive():
            seqs = self.ledger.append_many(records)
            try:
                return [
                    self._fold_stored(msgspec.structs.replace(record, seq=seq))
                    for record, seq in zip(records, seqs, strict=True)
                ]
            except BaseException as exc:
                self.stop(f"seqs {seqs[0]}..{seqs[-1]} were appended but not all folded ({error_text(exc)})")
                raise

    def append_derived(self, records: Iterable[r.Record]) -> tuple[r.Record, ...]:
        """Append derived records (as :mod:`holon.projections.derive` gives them), in order.

        Each keeps the ts and turn it was derived with; an episode is added to the episode
        index too (:meth:`_index_episode`).
        """
        stored: list[r.Record] = []
        for record in records:
            stored.append(self.append(record.body, record.turn, ts=record.ts))
            self._index_episode(stored[-1])
        return tuple(stored)

    def refresh(self, ended: r.Record) -> tuple[r.Record, ...]:
        """Run the post-turn refresh after ``ended`` (its turn_ended) and append what it derives."""
        return self.append_derived(derived_after(self.state, ended))

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Refuse (UsageError) a second thread using the agent while this one appends."""
        if not self._busy.acquire(blocking=False):
            raise UsageError(
                f"agent on ledger {self.ledger.path} is in use by another thread; nothing was recorded: "
                "an agent is driven by one thread at a time (hand it to another thread only between calls)"
            )
        try:
            yield
        finally:
            self._busy.release()

    def flush(self) -> None:
        """Flush the ledger (fsynced under ``batch`` and ``always``), noting the seq now durable."""
        self.ledger.flush()
        self.flushed_seq = self.state.seq

    def stop(self, why: str) -> None:
        """Refuse further use: the live state may differ from the ledger (KeyboardInterrupt mid-append).

        Going on would derive the post-turn refresh from a state the ledger does not
        reproduce, and `holon verify` would report the ledger divergent from then on.
        """
        if self.stale is None:
            self.stale = why

    def output_of(self, result: r.ToolResult) -> str:
        """A tool result's output text, read back from the blob store when it was moved there."""
        if result.blob is None:
            return result.output
        return self.ledger.get_blob(result.blob.hash).decode("utf-8", errors="replace")

    def _fold_stored(self, stored: r.Record) -> r.Record:
        """Fold a record the ledger has just stored into the agent's state and tool log."""
        self.tail_ts = stored.ts
        self.state = apply(self.state, stored)
        self.evidence.add(stored)
        self.tools.apply(stored)
        unsearched = self.unsearched
        if unsearched is not None:  # the agent has searched: the next search indexes this
            if len(unsearched) < SEARCH_PENDING:
                unsearched.append(stored)
            else:
                self.unsearched = None
        return stored

    def _place_output(self, record: r.Record, body: r.ToolResult | r.TaskResult) -> r.Record:
        """Move an output over the blob threshold to the blob store, keeping a preview."""
        threshold = self.ledger.header.blob_threshold
        output = body.output
        if not isinstance(output, str) or len(output) * 4 <= threshold:
            return record  # a wrong type is named by checked()
        try:
            data = output.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise not_utf8(exc) from None
        if len(data) <= threshold:
            return record
        ref = self.ledger.put_blob(data, preview=output[:PREVIEW_CHARS], tail=output[-PREVIEW_CHARS:])
        return msgspec.structs.replace(record, body=msgspec.structs.replace(body, output="", blob=ref))

    def _index_episode(self, record: r.Record) -> None:
        """Add a derived episode just appended to the episode index, when one is held.

        Every path that appends a ``context_episode`` calls it: an index restored from a
        checkpoint (or built) must keep covering the archive, or the episode cannot be
        restored by ref or selected, and the next checkpoint refuses the index.
        """
        if self.index is not None and isinstance(record.body, r.ContextEpisodeRecord):
            self.index.add(record.body)
