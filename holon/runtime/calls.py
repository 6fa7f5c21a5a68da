"""The tool write-ahead log: a :class:`ToolCall` is recorded as its intent, then its result.

:meth:`holon.runtime.Turn.tool` appends the intent and makes it durable before it returns the
call, so the side effect that follows is always preceded by its intent on disk; the call then
records the result (:meth:`ToolCall.finish`, :meth:`ToolCall.run`, or the ``with`` block).
:func:`abandon` records ``unknown`` for a call still open when its turn ends.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

import holon.records as r
from holon.errors import InvalidRecord, UsageError
from holon.runtime.core import AgentCore, ToolStatus, error_text, strings

__all__ = ["ToolCall", "abandon"]


class ToolCall:
    """One tool call through the write-ahead log (built by :meth:`Turn.tool <holon.runtime.Turn.tool>`).

    Either the intent is durable and the call must be executed and finished
    (``replayed`` false), or an earlier call with the same idempotency key already has
    a result, which ``result`` holds (``replayed`` true) — do not execute it again.
    Use it as a context manager (an exception records an ``error`` result) or through
    :meth:`run`.
    """

    def __init__(
        self,
        core: AgentCore,
        turn: int,
        *,
        check_live: Callable[[], None],
        on_result: Callable[[ToolCall], None],
        call_id: str,
        tool: str,
        args: dict[str, Any],
        idempotency_key: str | None,
        result: r.ToolResult | None,
        intent_seq: int | None,
    ) -> None:
        """Use :meth:`Turn.tool <holon.runtime.Turn.tool>`; ``turn`` is the index of the turn."""
        self._core = core
        self._turn = turn
        # The turn's: refuse once it ended; count the result as a round after its prompt.
        self._check_live = check_live
        self._on_result = on_result
        self.call_id = call_id
        self.tool = tool
        self.args = args
        self.idempotency_key = idempotency_key
        self.intent_seq = intent_seq
        self.result: r.ToolResult | None = result
        self.result_seq: int | None = None
        self.replayed = result is not None
        # The output text of ``result`` (the result it belongs to, and the text): a
        # blob-stored output is read back, hashed and decoded once, not on every access
        # (finishing a call read a 12 MB output twice, for the round and its count).
        self._output: tuple[r.ToolResult, str] | None = None

    @property
    def done(self) -> bool:
        """True once the call has a result (recorded now, or replayed from the ledger)."""
        return self.result is not None

    @property
    def output(self) -> str:
        """The result's output text (read back from the blob store when it was moved there)."""
        if self.result is None:
            raise UsageError(f"tool call {self.call_id} has no result yet")
        kept = self._output
        if kept is None or kept[0] is not self.result:
            kept = self._output = (self.result, self._core.output_of(self.result))
        return kept[1]

    def finish(
        self,
        output: str = "",
        *,
        status: ToolStatus = "ok",
        exit_code: int | None = None,
        touched_files: tuple[str, ...] = (),
        duration_ms: int | None = None,
    ) -> r.ToolResult:
        """Record the result (after the side effect). Large outputs go to the blob store."""
        if self.replayed:
            raise UsageError(
                f"tool call under idempotency key {self.idempotency_key!r} was replayed from the ledger; "
                "it was not executed, so there is no new result to record"
            )
        if self.result is not None:
            raise UsageError(f"tool call {self.call_id} already has a result")
        self._check_live()
        stored = self._core.append(
            r.ToolResult(
                call_id=self.call_id,
                tool=self.tool,
                status=status,
                output=output,
                exit_code=exit_code,
                touched_files=strings(touched_files, "body.touched_files"),
                duration_ms=duration_ms,
            ),
            self._turn,
        )
        body = stored.body
        assert isinstance(body, r.ToolResult)
        self.result = body
        self.result_seq = stored.seq
        # What was stored is this text (inline, or as its UTF-8 bytes in a blob).
        self._output = (body, output)
        self._on_result(self)
        return body

    def run(self, execute: Callable[[], str | tuple[str, int]]) -> r.ToolResult:
        """Execute unless replayed, and record the result.

        ``execute()`` returns the output, or ``(output, exit_code)`` (a non-zero exit
        code records status ``error``). An exception records an ``error`` result and
        propagates. A returned value that cannot be recorded (bytes, not a string, text
        that is not UTF-8) raises InvalidRecord and leaves the call open: the effect ran,
        so it is not recorded as an error.
        """
        if self.result is not None:
            return self.result
        try:
            value = execute()
        except BaseException as exc:
            self.finish(error_text(exc), status="error" if isinstance(exc, Exception) else "interrupted")
            raise
        # Past this point the effect has happened. A value that cannot be recorded (bytes,
        # text that is not UTF-8) was recorded as an ``error`` result, which reads as "it did
        # not happen": a daemon retrying under a new key ran the effect twice. The call stays
        # open instead; unless finished, the turn's end records it ``unknown``.
        try:
            if isinstance(value, tuple) and len(value) == 2:
                output, code = value
                self.finish(output, status="ok" if code == 0 else "error", exit_code=code)
            else:
                self.finish(value)
        except InvalidRecord as exc:
            raise InvalidRecord(
                f"tool call {self.call_id} ({self.tool}) ran, but what it returned cannot be recorded "
                f"({exc}); the call is still open: finish it with call.finish(<str output>) (decode bytes "
                "with errors='replace'), or the turn's end records its outcome as unknown",
                where="the record to append",
            ) from None
        assert self.result is not None
        return self.result

    def __enter__(self) -> ToolCall:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.result is not None:
            return
        if exc is not None:
            status: ToolStatus = "error" if isinstance(exc, Exception) else "interrupted"
            self.finish(error_text(exc), status=status)
            return
        abandon(self)
        raise UsageError(
            f"tool call {self.call_id} ({self.tool}) left its `with` block without finish(); "
            "its outcome was recorded as unknown"
        )

    def __repr__(self) -> str:
        state = "replayed" if self.replayed else ("done" if self.result is not None else "in flight")
        return f"<ToolCall {self.call_id} {self.tool} {state}>"


def abandon(call: ToolCall) -> None:
    """Record the outcome of ``call``, still open as its turn ends, as ``unknown``."""
    # The turn ends with this intent still open: the caller never said what happened,
    # so the honest record is "unknown" — the same as after a crash.
    stored = call._core.append(
        r.ToolResult(
            call_id=call.call_id,
            tool=call.tool,
            status="unknown",
            output="outcome unknown: the turn ended before this call's result was recorded",
        ),
        call._turn,
    )
    assert isinstance(stored.body, r.ToolResult)
    call.result = stored.body
    call.result_seq = stored.seq
