"""The wire form of records: the msgpack and JSON codecs, their decoder tables and errors.

Wire form (msgpack in ledger frames, JSON in the canonical JSONL form)::

    {"seq": 12, "ts": 1700000000000, "turn": 3, "kind": "tool_result", "v": 1,
     "body": {"call_id": "c7", "tool": "bash", "status": "ok", ...}}

Decoding validates once, at the edge: an unknown kind, a schema version this holon does not
read or a wrongly typed field raises :class:`~holon.errors.InvalidRecord` naming the seq (or
JSONL line) and the field. Inner code trusts the types. Writers check a payload the same
way before they commit it (:func:`check_payload`).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from typing import Any, Final, Union

import msgspec
import msgspec.inspect

from holon.errors import InvalidRecord
from holon.records.kinds import (
    BODY_TYPES,
    MAX_TS,
    MIN_TS,
    SCHEMA_VERSION,
    Body,
    PromptRendered,
    Record,
    SystemPolicy,
    ToolIntent,
)
from holon.records.malformed import JSON_LINE, MSGPACK_PAYLOAD, bytes_problem

__all__ = [
    "DECODE_ERRORS",
    "check_json_fields",
    "check_payload",
    "decode_json_record",
    "decode_msgpack_record",
    "encode_json_record",
    "encode_msgpack_record",
    "encode_msgpack_record_into",
    "non_json_value",
    "ts_out_of_range",
]

#: What a msgspec decoder raises for bytes it cannot decode: before 0.23, msgspec raised
#: UnicodeDecodeError for a string that is not UTF-8; from 0.23 on, a DecodeError.
DECODE_ERRORS: Final = (msgspec.DecodeError, UnicodeDecodeError)


# --------------------------------------------------------------------------- codec
#
# The msgpack wire form is the map {"seq", "ts", "turn", "kind", "v", "body"}, in that key
# order (the bytes are hashed into the ledger chain, so the encoding must never drift).
#
# Encoding builds the map without an intermediate struct: a 10-element tuple whose odd
# elements are pre-encoded msgpack keys (msgspec.Raw is copied verbatim) encodes as the
# fixarray marker 0x9a followed by exactly the bytes of the 6-entry map, so patching that
# one byte to the fixmap marker 0x86 gives the map. This is byte-identical to encoding a
# struct with those six fields (tests check it) and about 1.5x faster.
#
# Decoding is one msgspec pass over a tagged union of per-kind envelopes (``kind`` is the
# tag), so the body is validated against its class in the same pass as the envelope. When
# that fails, the two-stage decoder (envelope, then body by kind) runs to produce the
# precise error: a newer schema version or an unknown kind is named before a body error.


class _WireOut(msgspec.Struct, frozen=True, array_like=False):
    seq: int
    ts: int
    turn: int | None
    kind: str
    v: int
    body: Any


class _WireIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    seq: int
    ts: int
    turn: int | None
    kind: str
    v: int
    body: msgspec.Raw


_MSGPACK_ENCODER = msgspec.msgpack.Encoder()
_JSON_ENCODER = msgspec.json.Encoder()
_MSGPACK_ENVELOPE = msgspec.msgpack.Decoder(_WireIn)
_JSON_ENVELOPE = msgspec.json.Decoder(_WireIn)
_MSGPACK_BODIES = {kind: msgspec.msgpack.Decoder(cls) for kind, cls in BODY_TYPES.items()}
_JSON_BODIES = {kind: msgspec.json.Decoder(cls) for kind, cls in BODY_TYPES.items()}

_FIXARRAY_10: Final = 0x9A
_FIXMAP_6: Final = 0x86
_KEY_SEQ: Final = msgspec.Raw(_MSGPACK_ENCODER.encode("seq"))
_KEY_TS: Final = msgspec.Raw(_MSGPACK_ENCODER.encode("ts"))
_KEY_TURN: Final = msgspec.Raw(_MSGPACK_ENCODER.encode("turn"))
_KEY_BODY: Final = msgspec.Raw(_MSGPACK_ENCODER.encode("body"))
# "kind" key, the kind string and the "v" key, per body class: one Raw for three items.
_KIND_AND_V_KEY: Final[dict[type, msgspec.Raw]] = {
    cls: msgspec.Raw(
        _MSGPACK_ENCODER.encode("kind") + _MSGPACK_ENCODER.encode(kind) + _MSGPACK_ENCODER.encode("v")
    )
    for kind, cls in BODY_TYPES.items()
}
_encode_into = _MSGPACK_ENCODER.encode_into


def _envelope_struct(kind: str, cls: type[msgspec.Struct]) -> type[msgspec.Struct]:
    """The single-pass decode target for one kind: the envelope with a typed body."""
    return msgspec.defstruct(
        f"_Wire_{kind}",
        [("seq", int), ("ts", int), ("turn", int | None), ("v", int), ("body", cls)],
        tag_field="kind",
        tag=kind,
        frozen=True,
        forbid_unknown_fields=True,
        gc=False,
    )


_ENVELOPES: Final = tuple(_envelope_struct(kind, cls) for kind, cls in BODY_TYPES.items())
_MSGPACK_FAST: Final = msgspec.msgpack.Decoder(Union[_ENVELOPES])  # noqa: UP007
_JSON_FAST: Final = msgspec.json.Decoder(Union[_ENVELOPES])  # noqa: UP007

_PATH_RE = re.compile(r"at `\$(?P<path>[^`]*)`")


def _split_error(exc: msgspec.DecodeError, prefix: str) -> tuple[str, str | None]:
    """Turn msgspec's "... - at `$.a.b`" into (message, "prefix.a.b").

    The path is found only in msgspec's words; worded otherwise, the whole text is the
    message and no field is named (the record is refused all the same).
    """
    text = str(exc)
    match = _PATH_RE.search(text)
    if match is None:
        return text, None
    message = text[: match.start()].rstrip(" -")
    path = match.group("path").lstrip(".")
    return message, f"{prefix}.{path}".strip(".") if prefix or path else None


_ENVELOPE_FIELDS: Final = ("seq", "ts", "turn", "kind", "v", "body")
_STEP_RE = re.compile(r"\.?([^.\[]+)|\[(\d+)\]")


def _single(t: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """``X | None`` as ``X`` (the type a present value must have); other types unchanged."""
    if isinstance(t, msgspec.inspect.UnionType):
        members = [m for m in t.types if not isinstance(m, msgspec.inspect.NoneType)]
        if len(members) == 1:
            return members[0]
    return t


def _type_at(kind: str | None, field: str | None) -> msgspec.inspect.Type | None:
    """The declared type at ``field`` (``body.steps[0].status``) of a record of ``kind``.

    None when the path leaves the body or cannot be followed (an ambiguous union).
    """
    body = BODY_TYPES.get(kind) if kind is not None else None
    if body is None or field is None or not (field == "body" or field.startswith(("body.", "body["))):
        return None
    current: msgspec.inspect.Type = msgspec.inspect.type_info(body)
    for name, _index in _STEP_RE.findall(field[len("body") :]):
        current = _single(current)
        if name:
            if not isinstance(current, msgspec.inspect.StructType):
                return None
            found = [f.type for f in current.fields if f.encode_name == name]
            if not found:
                return None
            current = found[0]
        elif isinstance(current, msgspec.inspect.ListType | msgspec.inspect.VarTupleType):
            current = current.item_type
        else:
            return None
    return _single(current)


#: What :func:`_value_at` returns for a value it cannot find.
_ABSENT: Final = object()


def _value_at(value: Any, field: str | None) -> Any:
    """The value at ``field`` (``body.steps[0]``) inside a plainly decoded record, or _ABSENT."""
    for name, index in _STEP_RE.findall(field or ""):
        if name and isinstance(value, dict):
            value = value.get(name, _ABSENT)
        elif not name and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return _ABSENT
    return value


def _explain(message: str, kind: str | None, field: str | None, plain: Callable[[], Any]) -> str:
    """msgspec's message with what to do: the accepted values, the nearest field name.

    Which hint is decided by the type declared at ``field`` and by what the record holds
    there (``plain()``: the record decoded without a schema), never by msgspec's words,
    which are shown as they are.
    """
    target = _type_at(kind, field)
    if isinstance(target, msgspec.inspect.LiteralType):
        return f"{message}; expected one of {', '.join(map(repr, target.values))}"
    if field is None:
        names: tuple[str, ...] = _ENVELOPE_FIELDS
    elif isinstance(target, msgspec.inspect.StructType):
        names = tuple(f.encode_name for f in target.fields)
    else:
        return message
    value = _value_at(plain(), field)
    if value is _ABSENT:
        return message
    if isinstance(value, dict):
        unknown = next((key for key in value if isinstance(key, str) and key not in names), None)
        if unknown is not None:
            close = difflib.get_close_matches(unknown, names, n=1, cutoff=0.7)
            if close:
                return f"{message}; did you mean `{close[0]}`?"
            return f"{message}; the fields are: {', '.join(names)}"
    if field is None and not (isinstance(value, dict) and all(name in value for name in names)):
        return f"{message}; a record is an object with the fields {', '.join(_ENVELOPE_FIELDS)}"
    return message


def _to_wire(record: Record) -> _WireOut:
    return _WireOut(record.seq, record.ts, record.turn, type(record.body).KIND, record.v, record.body)


def encode_msgpack_record_into(
    record: Record, buf: bytearray, seq: int | None = None, *, offset: int | None = None
) -> int:
    """Write a record's msgpack wire form into ``buf``; return its length in bytes.

    The bytes go at ``offset`` (default: the end of ``buf``) and ``buf`` ends right after
    them. ``seq`` overrides ``record.seq`` (the ledger assigns seqs without copying the
    record).
    Raises TypeError for a body that is not a record kind, and msgspec.EncodeError /
    TypeError / OverflowError for values msgpack cannot hold.
    """
    start = len(buf) if offset is None else offset
    body = record.body
    try:
        kind_and_v_key = _KIND_AND_V_KEY[type(body)]
    except KeyError:
        raise TypeError(f"{type(body).__name__} is not a record body class") from None
    _encode_into(
        (
            _KEY_SEQ,
            record.seq if seq is None else seq,
            _KEY_TS,
            record.ts,
            _KEY_TURN,
            record.turn,
            kind_and_v_key,
            record.v,
            _KEY_BODY,
            body,
        ),
        buf,
        start,
    )
    buf[start] = _FIXMAP_6
    return len(buf) - start


def encode_msgpack_record(record: Record) -> bytes:
    """Encode a record to its msgpack wire form (the ledger frame payload)."""
    buf = bytearray()
    encode_msgpack_record_into(record, buf)
    return bytes(buf)


def encode_json_record(record: Record) -> bytes:
    """Encode a record to one canonical JSONL line (without the trailing newline)."""
    return _JSON_ENCODER.encode(_to_wire(record))


def _plain(data: bytes, form: str) -> Callable[[], Any]:
    """A function decoding ``data`` without a schema (what a record holds), or giving _ABSENT."""

    def decode() -> Any:
        try:
            return msgspec.json.decode(data) if form == JSON_LINE else msgspec.msgpack.decode(data)
        except (*DECODE_ERRORS, RecursionError):
            return _ABSENT

    return decode


def _refusal(
    exc: msgspec.DecodeError | UnicodeDecodeError,
    data: bytes,
    form: str,
    *,
    kind: str | None,
    prefix: str,
    where: str | None,
) -> InvalidRecord:
    """The error for a record msgspec refused: what its bytes hold, or its words, the field and a hint.

    Which it is follows the exception's class, never its words: a ValidationError is a value
    the schema does not accept; any other error is about the bytes themselves.
    """
    if not isinstance(exc, msgspec.ValidationError):
        problem = bytes_problem(data, form, where)
        if problem is not None:
            return problem
        if isinstance(exc, UnicodeDecodeError):  # pragma: no cover - _bytes_problem found such text
            return InvalidRecord(
                f"the {form} holds text that is not UTF-8 ({exc.reason}); re-encode it as UTF-8", where=where
            )
    message, field = _split_error(exc, prefix)
    field = field or prefix or None
    return InvalidRecord(_explain(message, kind, field, _plain(data, form)), where=where, field=field)


def _decode_slow(
    data: bytes | bytearray | memoryview,
    envelope: msgspec.msgpack.Decoder[_WireIn] | msgspec.json.Decoder[_WireIn],
    bodies: dict[str, Any],
    where: str | None,
    form: str,
) -> Record:
    """Two-stage decode (envelope, then body by kind): precise errors, in a useful order."""
    raw = bytes(data)
    try:
        wire = envelope.decode(raw)
    except DECODE_ERRORS as exc:
        raise _refusal(exc, raw, form, kind=None, prefix="", where=where) from None
    where = where or f"seq {wire.seq}"
    _check_version(wire.v, where)
    decoder = bodies.get(wire.kind)
    if decoder is None:
        raise InvalidRecord(
            f"unknown kind {wire.kind!r}; expected one of {', '.join(sorted(BODY_TYPES))}",
            where=where,
            field="kind",
        )
    try:
        body = decoder.decode(wire.body)
    except DECODE_ERRORS as exc:
        raise _refusal(exc, raw, form, kind=wire.kind, prefix="body", where=where) from None
    return Record(body=body, ts=wire.ts, turn=wire.turn, seq=wire.seq, v=wire.v)


def _check_version(v: int, where: str) -> None:
    if v > SCHEMA_VERSION:
        raise InvalidRecord(
            f"schema version {v} is not supported (this holon reads up to {SCHEMA_VERSION}); "
            "upgrade holon to read this ledger",
            where=where,
            field="v",
        )
    if v < 1:
        # No holon ever wrote it: a newer holon would not help, the record is damaged.
        raise InvalidRecord(
            f"schema version {v} does not exist (versions start at 1); the record was damaged or "
            "written by another program",
            where=where,
            field="v",
        )


def _decode(
    data: bytes | bytearray | memoryview,
    *,
    fast: msgspec.msgpack.Decoder[Any] | msgspec.json.Decoder[Any],
    envelope: msgspec.msgpack.Decoder[_WireIn] | msgspec.json.Decoder[_WireIn],
    bodies: dict[str, Any],
    where: str | None,
    form: str,
) -> Record:
    try:
        try:
            wire = fast.decode(data)
        except DECODE_ERRORS:
            # Re-decode to say precisely what is wrong (always raises for bad input).
            return _decode_slow(data, envelope, bodies, where, form)
    except RecursionError:
        raise InvalidRecord(
            f"the {form} is nested too deeply to decode; flatten the offending value", where=where
        ) from None
    v = wire.v
    if v != SCHEMA_VERSION:
        _check_version(v, where or f"seq {wire.seq}")
    return Record(body=wire.body, ts=wire.ts, turn=wire.turn, seq=wire.seq, v=v)


_decode_msgpack_fast = _MSGPACK_FAST.decode


def decode_msgpack_record(data: bytes | bytearray | memoryview, *, where: str | None = None) -> Record:
    """Decode a msgpack frame payload; raises :class:`InvalidRecord` naming seq and field."""
    # The happy path is spelled out here rather than through _decode: a ledger scan calls
    # this once per record, and a function layer is a measurable share of its cost.
    try:
        wire = _decode_msgpack_fast(data)
    except (*DECODE_ERRORS, RecursionError):
        return _decode(
            data,
            fast=_MSGPACK_FAST,
            envelope=_MSGPACK_ENVELOPE,
            bodies=_MSGPACK_BODIES,
            where=where,
            form=MSGPACK_PAYLOAD,
        )
    v = wire.v
    if v != SCHEMA_VERSION:
        _check_version(v, where or f"seq {wire.seq}")
    return Record(body=wire.body, ts=wire.ts, turn=wire.turn, seq=wire.seq, v=v)


def decode_json_record(data: bytes | str, *, where: str | None = None) -> Record:
    """Decode one JSONL line; raises :class:`InvalidRecord` naming ``where`` and the field."""
    if isinstance(data, str):
        try:
            data = data.encode()
        except UnicodeEncodeError as exc:
            raise InvalidRecord(
                f"the JSON line holds text that cannot be UTF-8 encoded ({exc}); "
                "replace lone surrogate characters",
                where=where,
            ) from None
    return _decode(
        data, fast=_JSON_FAST, envelope=_JSON_ENVELOPE, bodies=_JSON_BODIES, where=where, form=JSON_LINE
    )


# --------------------------------------------------------------------------- JSON fields
#
# ``args``, tool ``parameters`` and ``render_config`` are free-form (typed ``Any``), so no
# decoder checks what they hold. msgpack can carry values JSON cannot: bytes, NaN and the
# infinities, non-string object keys, timestamps. The canonical JSONL form would turn
# them into base64 text, ``null`` or string keys without a word, so an export would no
# longer round-trip. The ledger refuses them on append instead (ledgers written before
# this check still read: the check is not part of decoding).


def _free_json(body: Body) -> list[tuple[str, Any]]:
    """The free-form JSON values of a body, with their field paths."""
    if isinstance(body, ToolIntent):
        return [("body.args", body.args)]
    if isinstance(body, SystemPolicy):
        return [(f"body.tools[{i}].parameters", tool.parameters) for i, tool in enumerate(body.tools)]
    if isinstance(body, PromptRendered):
        return [("body.render_config", body.render_config)]
    return []


_FREE_JSON_KINDS: Final = frozenset({ToolIntent, SystemPolicy, PromptRendered})


def _plain_json(value: Any) -> bool:
    """Whether ``value`` holds only JSON values: the fast test, without paths, of every append."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key, element in item.items():
                if type(key) is not str:
                    return False
                if type(element) is not str:  # most arguments are strings: no stack round trip
                    stack.append(element)
        elif kind is list:
            stack.extend(item)
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif not (kind is str or kind is int or kind is bool or item is None):
            return False
    return True


def non_json_value(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first value under ``value`` that JSON cannot hold, as (its path, why), or None.

    JSON holds str, int, finite float, bool, None, list and str-keyed dict; ``path``
    names ``value`` itself (``body.args``) and the result extends it (``body.args.x[2]``).
    """
    # Iterative: a value nested deeper than the recursion limit must be refused, not crash.
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return where, f"the number {item!r} has no JSON form; record it as a string or null"
        elif kind is list:
            stack.extend((element, f"{where}[{i}]") for i, element in reversed(list(enumerate(item))))
        elif kind is dict:
            for key in item:
                if type(key) is not str:
                    return where, f"object key {key!r} is not a string; JSON object keys are strings"
            stack.extend(
                (element, f"{where}.{key}" if where else key) for key, element in reversed(list(item.items()))
            )
        else:
            return where, (
                f"a {kind.__name__} value has no JSON form; convert it to a string, number, "
                "boolean, null, list or string-keyed object first"
            )
    return None


def check_json_fields(record: Record, *, where: str | None = None) -> None:
    """Raise :class:`InvalidRecord` if a free-form field holds a value JSON cannot hold.

    Run on a record *as decoded from its wire form* (which has only msgpack's types).
    """
    _check_free_json(record.body, where, record.seq)


def _check_free_json(body: Body, where: str | None, seq: int) -> None:
    # ``where`` defaults to the seq, built only on error (this runs for every append).
    if isinstance(body, ToolIntent) and _plain_json(body.args):
        return  # the common case, spelled out: a third of a busy ledger's records
    if type(body) in _FREE_JSON_KINDS:
        for field, value in _free_json(body):
            if not _plain_json(value):
                problem = non_json_value(value, field)
                if problem is not None:
                    raise InvalidRecord(problem[1], where=where or f"seq {seq}", field=problem[0])


def ts_out_of_range(ts: int, *, where: str) -> InvalidRecord:
    """The error for a ``ts`` outside :data:`MIN_TS` .. :data:`MAX_TS`, naming ``where`` and ``ts``.

    Built only once a check failed (``if not MIN_TS <= ts <= MAX_TS``), so the check costs
    a comparison on the append path.
    """
    if ts < MIN_TS:
        why = "a time before 1970, or a difference or counter taken for a time"
    else:
        why = "a micro- or nanosecond clock? time.time_ns() // 1_000_000 gives milliseconds"
    return InvalidRecord(
        f"ts {ts} is out of range: ts is milliseconds since the Unix epoch, "
        f"{MIN_TS} to {MAX_TS:,} (the year 5138) ({why}); nothing was appended",
        where=where,
        field="ts",
    )


def check_payload(data: bytes | bytearray | memoryview, *, seq: int) -> None:
    """Raise :class:`InvalidRecord` (naming ``seq``) unless a reader would accept this payload.

    For writers, before a payload is committed: struct constructors check no types, so
    ``Message(text=123)`` encodes, and once appended every read would fail at its seq.
    Free-form fields must also hold only JSON (see :func:`check_json_fields`). The
    ledger calls this for every record it appends, so the message is built only on error.
    """
    try:
        wire = _decode_msgpack_fast(data)
    except (*DECODE_ERRORS, RecursionError):
        # A reader's own path, which raises the precise error (field, accepted values).
        _check_free_json(decode_msgpack_record(data, where=f"seq {seq}").body, None, seq)
        return
    if not 1 <= wire.v <= SCHEMA_VERSION:
        raise InvalidRecord(
            f"schema version {wire.v} is not one this holon writes (1 to {SCHEMA_VERSION}); "
            "leave `v` at its default",
            where=f"seq {seq}",
            field="v",
        )
    _check_free_json(wire.body, None, seq)
