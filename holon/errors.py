"""Errors raised by holon.

Every error holon raises on purpose derives from :class:`HolonError`, so a caller
can catch one type at its edge. The tree is deliberately flat::

    HolonError
    ├── InvalidRecord        (also ValueError)   a record or JSONL line does not decode
    ├── InvalidRef           (also ValueError)   a ref string is malformed or escapes the store
    ├── RefNotFound          (also LookupError)  a well-formed ref names nothing in this ledger
    ├── NotALedger                               a path is not a holon ledger directory
    ├── LedgerLocked                             another process holds the writer lock
    ├── LedgerCorrupt                            a frame, chain link, segment or blob is damaged
    ├── BudgetExceeded                           the pinned sections do not fit the budget
    ├── InvalidToolArguments (also ValueError)   a model's tool-call arguments cannot be recorded
    ├── ProjectionConfigMismatch (also ValueError) a fold continued under another projection config
    └── UsageError                               the API was called out of order (e.g. nested turns)

Messages say what went wrong, where (file, byte offset, seq, JSONL line, field), and
what to do about it.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "BudgetExceeded",
    "HolonError",
    "InvalidRecord",
    "InvalidRef",
    "InvalidToolArguments",
    "LedgerCorrupt",
    "LedgerLocked",
    "NotALedger",
    "ProjectionConfigMismatch",
    "RefNotFound",
    "UsageError",
]


class HolonError(Exception):
    """Base class of every error holon raises deliberately."""


class InvalidRecord(HolonError, ValueError):
    """A record failed to decode or validate.

    ``where`` names the position (``seq 12`` or ``line 7 of x.jsonl``) and ``field`` the
    offending field path (``body.exit_code``), when known; ``detail`` is what is wrong,
    without them.
    """

    def __init__(self, message: str, *, where: str | None = None, field: str | None = None) -> None:
        self.where = where
        self.field = field
        self.detail = message
        parts = []
        if where:
            parts.append(where)
        if field:
            parts.append(f"field `{field}`")
        prefix = ", ".join(parts)
        super().__init__(f"invalid record at {prefix}: {message}" if prefix else f"invalid record: {message}")


class InvalidRef(HolonError, ValueError):
    """A reference string (``ledger:12``, ``blob:<hash>``, ``episode:3``) is malformed."""


class RefNotFound(HolonError, LookupError):
    """A well-formed reference does not name anything in this ledger."""


class NotALedger(HolonError):
    """The path is not a holon ledger directory (no header, or a foreign one)."""


class LedgerLocked(HolonError):
    """Another process holds the ledger's writer lock."""

    #: What a library caller can do; a command that must write says its own (``advice``).
    ADVICE = "open it read-only, or stop the other writer first"

    def __init__(self, path: str, pid: int | None, *, advice: str = ADVICE) -> None:
        self.path = path
        self.pid = pid
        self.advice = advice
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"ledger {path} is locked for writing by {holder}; {advice}")

    def with_advice(self, advice: str) -> LedgerLocked:
        """The same error with another ``advice`` (what the caller's user can do)."""
        return LedgerLocked(self.path, self.pid, advice=advice)


def byte_location(file: str, offset: int | None, *, decompressed: bool = False) -> str:
    """Where in ``file`` something is: ``file``, ``file at byte N``, or for an offset into
    the decompressed bytes of a sealed segment ``file at byte N of the decompressed segment``.

    A sealed segment is zstd on disk but its frames are found in the decompressed bytes;
    without the note, an offset past the file's size reads as a wrong number.
    """
    if offset is None:
        return file
    if decompressed:
        return f"{file} at byte {offset} of the decompressed segment"
    return f"{file} at byte {offset}"


class LedgerCorrupt(HolonError):
    """Stored bytes are damaged: bad checksum, broken hash chain, bad zstd, missing segment.

    ``file`` and ``offset`` locate the damage; ``offset`` is a byte offset into the file
    as stored on disk, unless ``decompressed`` is true: then it is an offset into the
    decompressed bytes of a sealed segment (frame and segment-header damage; zstd and
    seek-table damage name the compressed bytes, i.e. the file as stored).
    ``detail`` is what is wrong, without the location and the advice around it.
    """

    def __init__(
        self, message: str, *, file: str, offset: int | None = None, decompressed: bool = False
    ) -> None:
        self.file = file
        self.offset = offset
        self.decompressed = decompressed
        self.detail = message
        where = byte_location(file, offset, decompressed=decompressed)
        super().__init__(f"ledger corrupt: {message} ({where}); run `holon verify` for a full report")


class BudgetExceeded(HolonError):
    """The pinned minimum of a prompt does not fit the token budget."""

    def __init__(self, message: str, *, available: int, required: int, fix: str | None = None) -> None:
        self.available = available
        self.required = required
        super().__init__(
            f"{message}: pinned sections need {required} tokens but only {available} are available; "
            "raise the context window, lower the output reserve, or shorten the current input"
            if fix is None
            else f"{message}; {fix}"
        )


class UsageError(HolonError):
    """The API was used out of order (nested turns, recording outside a turn, ...)."""


class ProjectionConfigMismatch(HolonError, ValueError):
    """A fold or verification was asked to continue a state under another ProjectionConfig.

    Derived records depend on the config (a turn cap finalizes other episodes), so one
    state folded under two configs would mix two projections. ``differences`` names the
    config fields that differ, in the config's field order; the message gives both values
    of each and what to do. (A ValueError too, as this was before it had a class.)
    """

    def __init__(self, caller: str, differences: tuple[str, ...], detail: str) -> None:
        self.caller = caller
        self.differences = differences
        super().__init__(
            f"{caller}: the given projection config differs from the one the state was folded "
            f"with ({detail}); continue with the state's config (pass no config), or fold the "
            "ledger from seq 0 under the new one"
        )


#: How much of the model's arguments an :class:`InvalidToolArguments` quotes back.
_ARGS_PREVIEW: Final = 300


class InvalidToolArguments(HolonError, ValueError):
    """A model's tool-call arguments are not a JSON object the ledger can record: nothing may run.

    The model made the mistake, so the model is told: ``str(exc)`` says what was wrong and
    what to send instead — send it back as the call's result. Record the call before
    answering, so the ledger holds what the model was told: ``turn.tool(exc.tool,
    exc.recorded_args)``, then ``finish(str(exc), status="error")``. ``arguments`` is the
    text as the model sent it.
    """

    def __init__(self, tool: str, arguments: object, problem: str) -> None:
        self.tool = tool
        self.arguments = arguments
        self.problem = problem
        shown = arguments if isinstance(arguments, str) else repr(arguments)
        if len(shown) > _ARGS_PREVIEW:
            shown = shown[:_ARGS_PREVIEW] + f"… ({len(shown):,} characters)"
        super().__init__(
            f"{tool}: the arguments {problem}; nothing was run. Call {tool} again with its "
            f"arguments as one JSON object. You sent: {shown}"
        )

    @property
    def recorded_args(self) -> dict[str, Any]:
        """The arguments to record the call with: the model's text, as a string the ledger stores.

        The same form ``Turn.recall`` records arguments in that cannot be stored as given.
        """
        text = self.arguments if isinstance(self.arguments, str) else repr(self.arguments)
        return {"unrecordable_arguments": text.encode("utf-8", "backslashreplace").decode("utf-8")}
