"""Located access to foreign JSON: every shape check fails as an InvalidRecord naming where.

Importers read other tools' transcripts, whose shapes holon does not control. Instead of
letting a ``KeyError`` or ``TypeError`` escape from deep inside a mapping function, each
value is wrapped in a :class:`Node` that knows its position (file and line, and the JSON
path inside that document) and the format it was expected to be in; accessing it with
the wrong expectation raises :class:`~holon.errors.InvalidRecord` with all of that.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Final

import msgspec

from holon.errors import InvalidRecord
from holon.records import DECODE_ERRORS, MAX_TS, MIN_TS, json_cut_off, lone_surrogate, utf8_error

__all__ = [
    "Node",
    "decode_json_document",
    "is_json_lines",
    "iter_jsonl",
    "not_utf8",
    "parse_iso_ms",
    "try_json_document",
]

_JSON_DECODER: Final = msgspec.json.Decoder()
_BOM: Final = b"\xef\xbb\xbf"
_LONE_SURROGATE_LENGTH: Final = len(rb"\ud800")
_PYTHON_CONSTANTS: Final = (b"NaN", b"Infinity")  # "-Infinity" holds "Infinity"
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ONE_MS: Final = dt.timedelta(milliseconds=1)
_NON_BLANK: Final = re.compile(rb"\S")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class _MalformedJSON(ValueError):
    """The bytes are not JSON holon reads (or not UTF-8: see :func:`_classified`); msgspec's words say why."""


class _NotUTF8(ValueError):
    """The bytes are not UTF-8 text: the message names the byte and says what to do."""


def not_utf8(data: bytes) -> str | None:
    """Why ``data`` is not UTF-8 text, naming the first bad byte and its offset, or None if it is."""
    bad = utf8_error(data)
    return None if bad is None else _not_utf8_message(data, bad)


def _not_utf8_message(data: bytes, bad: tuple[int, str]) -> str:
    # msgspec's own error counts from the start of the JSON string holding the byte, not of
    # the file or line (and from 0.23 on names no byte at all), so the offset is found here.
    at, why = bad
    return (
        f"not UTF-8 text (byte 0x{data[at]:02x} at byte {at}: {why}); "
        "holon reads transcripts as UTF-8: save it as UTF-8 and import it again"
    )


def _classified(data: bytes, exc: ValueError) -> ValueError:
    """``exc`` for JSON ``data`` that did not decode, as :class:`_NotUTF8` when its text is not UTF-8.

    Found in the bytes, not from msgspec: before 0.23 it raised UnicodeDecodeError for such text,
    from 0.23 on a DecodeError like any other. A character cut short by the end of ``data`` is
    left to :func:`_cut_off`: the file or line was cut there, not written in another encoding.
    Only a caller that reports the error asks, so a decode that is tried and dropped does not
    read a large file again.
    """
    if not isinstance(exc, _MalformedJSON):
        return exc
    bad = utf8_error(data, final=False)
    return exc if bad is None else _NotUTF8(_not_utf8_message(data, bad))


def _decode_once(data: bytes) -> Any:
    try:
        return _JSON_DECODER.decode(data)
    except DECODE_ERRORS as exc:
        raise _MalformedJSON(str(exc)) from None
    except RecursionError:
        # msgspec recurses per nesting level; absurdly deep input is not a transcript.
        raise ValueError("JSON nested too deeply") from None


def _without_lone_surrogates(data: bytes) -> bytes:
    """``data`` with each lone surrogate escape replaced by that of U+FFFD (``data`` itself if none)."""
    found = lone_surrogate(data)
    if found is None:
        return data
    parts = []
    start = 0
    while found is not None:
        parts += [data[start : found[0]], rb"\ufffd"]
        start = found[0] + _LONE_SURROGATE_LENGTH
        found = lone_surrogate(data, start)
    parts.append(data[start:])
    return b"".join(parts)


def _decode(data: bytes) -> Any:
    """Decode JSON bytes; return the value or raise ValueError with a readable reason.

    The repairs below are tried when the bytes hold what they repair, whatever msgspec said.
    """
    try:
        return _decode_once(data)
    except _MalformedJSON as exc:
        if _several_values(data):
            # JSON Lines read as one document: no repair makes them one value, and looking for
            # what to repair would read the whole file again (every OpenHands JSONL import).
            raise
        repaired = _without_lone_surrogates(data)
        if repaired is data:
            return _with_python_constants(data, exc)
    # JavaScript and Python's json.dumps write half a character (an output cut mid-emoji) as a
    # lone `\udXXX` escape: valid JSON grammar but not Unicode text, so msgspec refuses it.
    # It becomes U+FFFD, as a UTF-8 decoder does with a broken sequence. Both escapes are six
    # bytes long, so an error that remains still names the right byte.
    try:
        return _decode_once(repaired)
    except _MalformedJSON as exc:
        return _with_python_constants(repaired, exc)


def _several_values(data: bytes) -> bool:
    """Whether ``data`` starts with a line that is a JSON value of its own, and more follows it."""
    first = _NON_BLANK.search(data)
    end = -1 if first is None else data.find(b"\n", first.start())
    if end < 0 or _NON_BLANK.search(data, end) is None:
        return False
    try:
        _decode(data[:end])
    except ValueError:
        return False
    return True


def _with_python_constants(data: bytes, exc: _MalformedJSON) -> Any:
    """Decode JSON holding Python's bare NaN / Infinity words, or raise ``exc``.

    Python's json.dump writes a float NaN or infinity that way by default, so trajectories
    written by Python tools (SWE-agent, tau-bench) may hold one in a cost or reward field.
    It is not JSON, but refusing the whole transcript over a field holon may never read
    would help no one; where such a value is stored, the importer keeps it as text.
    """
    if not any(word in data for word in _PYTHON_CONSTANTS):
        raise exc
    try:
        # The stdlib parser reads the bare words as floats. Given bytes, it would read some
        # that are not UTF-8 (encoded surrogates) and guess UTF-16: it is given text.
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        raise exc from None


class Node:
    """A JSON value plus where it sits, so shape errors name the file, line and path."""

    __slots__ = ("format_hint", "path", "value", "where")

    def __init__(self, value: Any, *, where: str, path: str = "", format_hint: str = "") -> None:
        self.value = value
        self.where = where
        self.path = path
        self.format_hint = format_hint

    # ------------------------------------------------------------------ errors

    def error(self, message: str, *, key: str | int | None = None, hint: bool = True) -> InvalidRecord:
        """An InvalidRecord at this node (or its child ``key``), with the format hint unless ``hint=False``.

        The hint asks whether ``--from`` is right; leave it out where the format is plainly right and
        one value in it is wrong, as the question would send the user looking in the wrong place.
        """
        field = self._child_path(key) if key is not None else self.path
        hint_text = f"; {self.format_hint}" if self.format_hint and hint else ""
        return InvalidRecord(f"{message}{hint_text}", where=self.where, field=field or None)

    def _child_path(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def _expect(self, expected: str) -> InvalidRecord:
        return self.error(f"expected {expected}, got {_type_name(self.value)}")

    # ------------------------------------------------------------------ navigation

    def child(self, key: str | int, value: Any) -> Node:
        """A node for ``value`` found at ``key`` under this one."""
        return Node(value, where=self.where, path=self._child_path(key), format_hint=self.format_hint)

    def is_object(self) -> bool:
        return isinstance(self.value, dict)

    def keys(self) -> list[str]:
        """The object's keys, in document order."""
        return list(self.as_object())

    def has(self, key: str) -> bool:
        """Whether this object holds ``key`` with a non-null value."""
        return self.as_object().get(key) is not None

    def field(self, key: str) -> Node:
        """The child at ``key``; missing or null is an error."""
        obj = self.as_object()
        if obj.get(key) is None:
            raise self.error(f"missing `{key}`", key=key)
        return self.child(key, obj[key])

    def get(self, key: str) -> Node | None:
        """The child at ``key``, or None when it is missing or null."""
        obj = self.as_object()
        value = obj.get(key)
        return None if value is None else self.child(key, value)

    def items(self) -> Iterator[Node]:
        """The array's elements as nodes, in order."""
        for index, value in enumerate(self.as_list()):
            yield self.child(index, value)

    # ------------------------------------------------------------------ typed views

    def as_object(self) -> dict[str, Any]:
        if not isinstance(self.value, dict):
            raise self._expect("an object")
        return self.value

    def as_list(self) -> list[Any]:
        if not isinstance(self.value, list):
            raise self._expect("an array")
        return self.value

    def as_str(self) -> str:
        if not isinstance(self.value, str):
            raise self._expect("a string")
        return self.value

    def as_int(self) -> int:
        if not isinstance(self.value, int) or isinstance(self.value, bool):
            raise self._expect("an integer")
        return self.value

    def as_bool(self) -> bool:
        if not isinstance(self.value, bool):
            raise self._expect("a boolean")
        return self.value

    # ------------------------------------------------------------------ optional shortcuts

    def opt_str(self, key: str) -> str | None:
        """The string at ``key``, or None when missing or null; any other type is an error."""
        node = self.get(key)
        return None if node is None else node.as_str()

    def str_of(self, key: str, default: str = "") -> str:
        """The string at ``key``, or ``default`` when missing or null."""
        value = self.opt_str(key)
        return default if value is None else value

    def tool_name(self, key: str, *, what: str) -> str:
        """The tool name at ``key`` of a tool call (``what``, e.g. "a `tool_use` block"); blank is an error.

        Every format names the tool a call runs; a call to no tool (``""``, or only whitespace) is
        nothing holon can record or a model's next request can carry, so the file is refused there.
        """
        name = self.field(key).as_str()
        if not name.strip():
            raise self.error(
                f"{what} has {_blank(name)} `{key}`: a tool call names the tool it runs, and holon records "
                "no call to no tool; fix or remove the call",
                key=key,
                hint=False,
            )
        return name

    def required_id(self, key: str, *, what: str, why: str) -> str:
        """The call id at ``key``, which the format requires to be non-blank (``why`` says so)."""
        value = self.field(key).as_str()
        if not value.strip():
            raise self.error(
                f"{what} has {_blank(value)} `{key}`: {why}; fix or remove it",
                key=key,
                hint=False,
            )
        return value


def _blank(value: str) -> str:
    return "an empty" if not value else "a blank (whitespace-only)"


def _without_bom(data: bytes) -> bytes:
    # Windows tools (PowerShell's Out-File, Notepad) start UTF-8 files with a byte order mark;
    # RFC 8259 lets a parser ignore it, and the rest of the file is still the tool's own.
    return data[len(_BOM) :] if data.startswith(_BOM) else data


def _cut_off(exc: ValueError, data: bytes, what: str, where: str) -> str | None:
    """The message for JSON ``data`` that stops mid-value, or None when ``exc`` is another error."""
    if not isinstance(exc, _MalformedJSON) or not json_cut_off(data):
        return None
    # A transcript copied while its tool was still writing it. That is no wrong --from, so
    # the format hint would mislead; say what happened and what to do instead.
    return (
        f"not a JSON {what} ({exc}): the file ends in the middle of {where}, so it was probably "
        "copied while still being written; copy it again once the session has ended"
    )


def decode_json_document(data: bytes, *, source: str, format_hint: str) -> Node:
    """Decode a whole-file JSON document into a root node, or raise a located InvalidRecord."""
    text = _without_bom(data)
    try:
        value = _decode(text)
    except ValueError as error:
        exc = _classified(text, error)
        cut = _cut_off(exc, text, "document", "it")
        if cut is not None:
            raise InvalidRecord(cut, where=source) from None
        hint = f"; {format_hint}" if format_hint else ""
        # Offsets of a byte that is not UTF-8 count from the file's start, byte order mark included.
        message = f"not a JSON document ({exc})"
        if isinstance(exc, _NotUTF8):
            message = not_utf8(data) or str(exc)
        raise InvalidRecord(f"{message}{hint}", where=source) from None
    return Node(value, where=source, format_hint=format_hint)


def try_json_document(data: bytes, *, source: str, format_hint: str) -> Node | None:
    """The root node if the whole file is one JSON value, else None (it may be JSON Lines)."""
    try:
        value = _decode(_without_bom(data))
    except ValueError:
        return None
    return Node(value, where=source, format_hint=format_hint)


def is_json_lines(data: bytes) -> bool:
    """Whether ``data`` holds several JSON values, one per line, rather than one document.

    True when its first non-blank line is a JSON value of its own and more follows it. A
    pretty-printed document's first line (``[`` or ``{``) is no value of its own, and a
    one-line file is one document either way; neither is copied or decoded whole here.
    """
    start = len(_BOM) if data.startswith(_BOM) else 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        if data[start:end].strip():
            try:
                _decode(data[start:end])
            except ValueError:
                return False
            return _NON_BLANK.search(data, end) is not None
        start = end + 1
    return False


#: What a line a crash left as nothing but zeroed space holds.
_NUL_RUN: Final = b"\x00 \t\r"


def iter_jsonl(
    data: bytes, *, source: str, format_hint: str, torn: Callable[[int], None] | None = None
) -> Iterator[tuple[int, Node]]:
    """Yield (1-based line number, node) for each non-blank line of a JSON Lines file.

    Lines are cut out one at a time, not split into a list first: that list is a second copy of
    the whole file, and a session transcript can be hundreds of megabytes.

    With ``torn``, a line between two values read that is UTF-8 but not JSON (a write a crash
    cut short, the session's later writes appended after it; a run of NUL bytes a crashed append
    left) is passed to ``torn`` by number and passed over instead of refused. The session went on
    past such a line, so it is damage, not a wrong ``--from`` or a copy taken too soon: the first
    line still decides the format, and a damaged line with no value after it is still refused,
    unless it holds only NUL bytes (the zeroed tail a power loss leaves).
    """
    text = _without_bom(data)
    start = 0
    number = 0
    read_one = False
    damaged: list[tuple[int, InvalidRecord, bool]] = []  # lines passed over, if a value follows them
    while start <= len(text):
        end = text.find(b"\n", start)
        last = end < 0
        line = text[start:] if last else text[start:end]
        start = len(text) + 1 if last else end + 1
        number += 1
        if not line.strip():
            continue
        where = f"line {number} of {source}"
        try:
            value = _decode(line)
        except ValueError as error:
            exc = _classified(line, error)
            # Only the last line, with no newline after it, can be a write still in progress.
            cut = _cut_off(exc, line, "value", "its last line") if last else None
            if cut is not None:
                raise InvalidRecord(cut, where=where) from None
            hint = f"; {format_hint}" if format_hint else ""
            message = str(exc) if isinstance(exc, _NotUTF8) else f"not a JSON value ({exc})"
            error = InvalidRecord(f"{message}{hint}", where=where)
            if torn is not None and read_one and isinstance(exc, _MalformedJSON):
                damaged.append((number, error, not line.strip(_NUL_RUN)))
                continue
            raise error from None
        if damaged and torn is not None:
            for passed_over, _, _ in damaged:
                torn(passed_over)
            damaged.clear()
        read_one = True
        yield number, Node(value, where=where, format_hint=format_hint)
    if damaged and not all(zeros for _, _, zeros in damaged):
        raise damaged[0][1]
    # Only NUL bytes after the last value: what a crash (a power loss) leaves when the file's
    # size reached the disk and its data did not. No writer still at work writes them, so
    # they are damage passed over, not a copy taken too soon.
    for passed_over, _, _ in damaged:
        assert torn is not None
        torn(passed_over)


def parse_iso_ms(node: Node) -> int:
    """An ISO-8601 timestamp string as integer epoch milliseconds.

    A timestamp without a UTC offset is read as UTC: transcripts written by servers
    (OpenHands) log naive UTC times, and reading them in the importing machine's zone
    would make the same file import differently on different machines.
    """
    text = node.as_str()
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise node.error(f"expected an ISO-8601 timestamp, got {text[:40]!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    # Integer timedelta division: exact, unlike float seconds * 1000.
    ms = (moment - _EPOCH) // _ONE_MS
    # Refused here, where the transcript's line is known, rather than by the ledger later.
    if ms < MIN_TS:
        raise node.error(
            f"timestamp {text[:40]!r} is before 1970: holon records times as milliseconds since the "
            "Unix epoch; fix the transcript's clock"
        )
    if ms > MAX_TS:
        raise node.error(
            f"timestamp {text[:40]!r} is past the year 5138, the last a ledger records "
            f"(ts {MAX_TS}, milliseconds since the Unix epoch); fix the transcript's clock"
        )
    return ms
