"""What is wrong with bytes a record decoder refused, found in the bytes themselves.

msgspec's messages are for people and change between versions (0.23 reports text that is
not UTF-8 as a DecodeError worded its own way where older versions raised
UnicodeDecodeError). holon decides nothing by them: what is wrong with bytes a decoder
refused (text that is not UTF-8, half a surrogate pair, a value cut off) is found in the
bytes themselves, and only once a decode failed, so the happy path pays nothing.

Stdlib only. :mod:`holon.records.wire` builds its refusals with :func:`bytes_problem`; the
importers read other tools' transcripts with the same :func:`utf8_error`,
:func:`lone_surrogate` and :func:`json_cut_off` (exported from :mod:`holon.records`).
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any, Final

from holon.errors import InvalidRecord

__all__ = ["JSON_LINE", "MSGPACK_PAYLOAD", "bytes_problem", "json_cut_off", "lone_surrogate", "utf8_error"]

#: The two forms a record is decoded from, as an error names them ("the JSON line holds ...").
JSON_LINE: Final = "JSON line"
MSGPACK_PAYLOAD: Final = "msgpack payload"

_UTF8_PIECE: Final = 1 << 20


def utf8_error(data: bytes | bytearray | memoryview, *, final: bool = True) -> tuple[int, str] | None:
    """The offset of the first byte of ``data`` that is not UTF-8 text, and why; None if all of it is.

    With ``final=False``, a character cut short by the end of ``data`` is no error: more bytes
    may follow (a line cut off mid-character is cut off, not in another encoding). Decoded a
    piece at a time, so checking a large file holds no second copy of it as text.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data).cast("B")
    size = len(view)
    for start in range(0, size, _UTF8_PIECE):
        held = len(decoder.getstate()[0])  # bytes of a character the last piece cut short
        try:
            decoder.decode(view[start : start + _UTF8_PIECE], final=final and start + _UTF8_PIECE >= size)
        except UnicodeDecodeError as exc:
            return start - held + exc.start, exc.reason
    return None


_HIGH_SURROGATE: Final = rb"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW_SURROGATE: Final = rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
# Each starts with its escape, so a search runs at the speed of a plain one; both may also
# find text after an escaped backslash (`\\ud800`), which _escape_starts_at tells apart.
_MAYBE_LONE_HIGH: Final = re.compile(_HIGH_SURROGATE + rb"(?!" + _LOW_SURROGATE + rb")")
_MAYBE_LONE_LOW: Final = re.compile(
    _LOW_SURROGATE
    + rb"(?:(?<!"
    + _HIGH_SURROGATE
    + _LOW_SURROGATE
    + rb")|(?<=\\"
    + _HIGH_SURROGATE
    + _LOW_SURROGATE
    + rb"))"
)
_HIGH_SURROGATE_ESCAPE: Final = re.compile(_HIGH_SURROGATE)


def _escape_starts_at(data: bytes, at: int) -> bool:
    """Whether the backslash at ``at`` starts an escape: an even number of backslashes precede it."""
    before = at
    while before and data[before - 1] == 0x5C:
        before -= 1
    return (at - before) % 2 == 0


def lone_surrogate(data: bytes, start: int = 0) -> tuple[int, bytes] | None:
    """The first escape in JSON text, from ``start``, of half a UTF-16 surrogate pair, and its offset.

    ``\\ud800`` not followed by the escape of a low surrogate, or ``\\udc00`` not preceded by
    that of a high one: valid JSON grammar, but no Unicode text (JavaScript and Python's
    json.dumps write one for a string cut mid-emoji). None when ``data`` holds none.
    """
    found: int | None = None
    pos = start
    while (match := _MAYBE_LONE_HIGH.search(data, pos)) is not None:
        if _escape_starts_at(data, match.start()):
            found = match.start()
            break
        pos = match.start() + 1
    pos = start
    end = len(data) if found is None else found
    while (match := _MAYBE_LONE_LOW.search(data, pos, end)) is not None:
        at = match.start()
        paired = at >= 6 and _HIGH_SURROGATE_ESCAPE.match(data, at - 6) and _escape_starts_at(data, at - 6)
        if _escape_starts_at(data, at) and not paired:
            found = at
            break
        pos = at + 1
    return None if found is None else (found, data[found : found + 6])


# A string the text ends in, an escape it cuts short included (str patterns: the stdlib's
# positions count characters).
_JSON_STRING_START: Final = re.compile(
    r'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+(?:\\(?:u[0-9a-fA-F]{0,3})?)?\Z'
)
# A number the text ends in, perhaps cut short (`-`, `1.`, `2e+`).
_JSON_NUMBER_START: Final = re.compile(
    r"-?(?:(?:0|[1-9][0-9]*)(?:\.(?:[0-9]+(?:[eE][+-]?[0-9]*)?)?|[eE][+-]?[0-9]*)?)?\Z"
)
_JSON_NUMBER_CHARS: Final = frozenset("0123456789.eE+-")
_JSON_WORDS: Final = ("true", "false", "null")


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


_STRICT_JSON: Final = json.JSONDecoder(parse_constant=_no_constant)


def json_cut_off(data: bytes) -> bool:
    """Whether ``data`` is JSON text cut off in the middle of its value.

    True when all of ``data`` is the start of one JSON value and the value has not ended:
    bytes added after it could make it JSON, and none of it needs to change (the whole of a
    copy taken while its writer was still writing); so is text with no value yet (empty, or
    only whitespace). Text is not checked for UTF-8 here (:func:`utf8_error` does that).

    The stdlib's parser reads it (in C): where it stops (its ``pos``, never its words) and
    what the text holds from there say whether the text was cut off there.
    """
    text = data.decode("utf-8", "replace")
    pos = _stops_at(text)
    if pos is None:
        return False  # a whole value; NaN or an infinity (no JSON); or nested too deeply to tell
    if pos >= len(text):
        return True  # a value, a key, a colon or a closing bracket was still to come
    if text[pos - 1 : pos] == "\\":  # at an escape, so in a string: one it cuts short?
        quote = _opening_quote(text, pos)
        return quote >= 0 and _JSON_STRING_START.match(text, quote) is not None
    start = pos
    while start and text[start - 1] in _JSON_NUMBER_CHARS:
        start -= 1
    if start < pos and text[start] in "-0123456789":
        # The parser read the start of a number (`1` of `1.`): is the rest the rest of one?
        return _JSON_NUMBER_START.match(text, start) is not None
    # What came before `pos`: a string may follow "[", "{", ":", "," or nothing; a value may
    # follow "[", ":", nothing, or a "," in an array (the parser is asked which).
    before = pos
    while before and text[before - 1] in " \t\n\r":
        before -= 1
    after = text[before - 1] if before else ""
    if text[pos] == '"':
        return after in ("", "[", "{", ":", ",") and _JSON_STRING_START.match(text, pos) is not None
    rest = text[pos:] if len(text) - pos < len("false") else ""  # the start of a word, or `-`?
    if rest == "-" or any(rest and len(rest) < len(word) and word.startswith(rest) for word in _JSON_WORDS):
        return after in ("", "[", ":") or (after == "," and _accepts(text, pos, "0"))
    return False


def _stops_at(text: str) -> int | None:
    """Where the stdlib's strict JSON parser stops reading ``text``; None if it reads all of it."""
    try:
        _STRICT_JSON.decode(text)
    except json.JSONDecodeError as exc:
        return exc.pos
    except (ValueError, RecursionError):
        return None
    return None


def _accepts(text: str, pos: int, value: str) -> bool:
    """Whether the parser takes ``value`` at ``pos`` of ``text`` (a value or key was due there)."""
    stop = _stops_at(text[:pos] + value)
    return stop is None or stop > pos


def _opening_quote(text: str, pos: int) -> int:
    """The quote opening the string ``pos`` is in: the last one before it no backslash escapes."""
    quote = text.rfind('"', 0, pos)
    while quote >= 0:
        before = quote
        while before and text[before - 1] == "\\":
            before -= 1
        if (quote - before) % 2 == 0:
            return quote
        quote = text.rfind('"', 0, before)
    return -1


# msgpack markers by what follows them: a fixed number of bytes; a length of 1, 2 or 4 bytes,
# then (after the type byte of an ext) that many bytes; or a count of elements.
_MSGPACK_FIXED: Final = {
    0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8,
    0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,
}  # fmt: skip
_MSGPACK_SIZED: Final = {
    0xC4: (1, 0, False), 0xC5: (2, 0, False), 0xC6: (4, 0, False),  # bin
    0xC7: (1, 1, False), 0xC8: (2, 1, False), 0xC9: (4, 1, False),  # ext
    0xD9: (1, 0, True), 0xDA: (2, 0, True), 0xDB: (4, 0, True),  # str
}  # fmt: skip
_MSGPACK_COUNTED: Final = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}
#: What :func:`_msgpack_problem` returns for a value the data ends inside.
_CUT: Final = "cut"


def _msgpack_problem(data: bytes) -> tuple[int, str] | str | None:
    """What is wrong with the bytes of one msgpack value, read as far as they go.

    (offset, why) of the first byte of a string that is not UTF-8; :data:`_CUT` when the
    data ends inside the value; None when neither (the value may still be wrong).
    """
    size = len(data)
    pos = 0
    pending = 1  # values still to read; each takes at least a byte, so the walk ends
    while pending:
        if pos >= size:
            return _CUT
        marker = data[pos]
        pos += 1
        pending -= 1
        if marker < 0x80 or marker >= 0xE0:  # fixint
            continue
        if marker < 0x90:  # fixmap
            pending += 2 * (marker & 0x0F)
            continue
        if marker < 0xA0:  # fixarray
            pending += marker & 0x0F
            continue
        if marker < 0xC0:  # fixstr
            length, text = marker & 0x1F, True
        elif marker in _MSGPACK_FIXED:
            pos += _MSGPACK_FIXED[marker]
            continue
        elif marker in _MSGPACK_COUNTED:
            width, per = _MSGPACK_COUNTED[marker]
            if pos + width > size:
                return _CUT
            pending += per * int.from_bytes(data[pos : pos + width], "big")
            pos += width
            continue
        elif marker in _MSGPACK_SIZED:
            width, extra, text = _MSGPACK_SIZED[marker]
            if pos + width > size:
                return _CUT
            length = int.from_bytes(data[pos : pos + width], "big") + extra
            pos += width
        else:  # 0xC1 starts no value
            return None
        if text:
            bad = utf8_error(data[pos : pos + length], final=pos + length <= size)
            if bad is not None:
                return pos + bad[0], bad[1]
        pos += length
    return _CUT if pos > size else None


def bytes_problem(data: bytes, form: str, where: str | None) -> InvalidRecord | None:
    """The error for what is wrong with ``data`` below its schema, or None when its bytes are sound.

    Text that is not UTF-8 (named by its offset in ``data``: msgspec's own count starts at
    the string holding it), half a surrogate pair, a value cut off. Checked in the bytes once
    msgspec refused them for something other than their schema, so the error is the same
    whatever msgspec raises for them (UnicodeDecodeError before 0.23) and however it words it.
    """
    if form == JSON_LINE:
        bad = utf8_error(data, final=False)
        cut = False
        if bad is None:
            lone = lone_surrogate(data)
            if lone is not None:
                return InvalidRecord(
                    f"the line holds {lone[1].decode()}, half of a UTF-16 surrogate pair, which is "
                    "not text; write the character itself or its full pair",
                    where=where,
                )
            cut = json_cut_off(data)
    else:
        problem = _msgpack_problem(data)
        bad = problem if isinstance(problem, tuple) else None
        cut = problem == _CUT
    if bad is not None:
        at, why = bad
        return InvalidRecord(
            f"the {form} holds text that is not UTF-8 (byte 0x{data[at]:02x} at byte {at}: {why}); "
            "re-encode it as UTF-8",
            where=where,
        )
    if cut:
        return InvalidRecord(
            "the data ends in the middle of a value; the record was cut off (a partly copied file?)",
            where=where,
        )
    return None
