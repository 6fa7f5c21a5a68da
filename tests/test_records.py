"""Record vocabulary: every kind round-trips through msgpack and JSON; bad input is named."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon import records as r
from holon.errors import InvalidRecord
from tests.strategies import records


@given(records())
def test_msgpack_round_trip(record: r.Record) -> None:
    assert r.decode_msgpack_record(r.encode_msgpack_record(record)) == record


@given(records())
def test_json_round_trip(record: r.Record) -> None:
    line = r.encode_json_record(record)
    assert b"\n" not in line
    assert r.decode_json_record(line) == record


@given(records())
def test_json_and_msgpack_agree(record: r.Record) -> None:
    via_json = r.decode_json_record(r.encode_json_record(record))
    assert r.encode_msgpack_record(via_json) == r.encode_msgpack_record(record)


@pytest.mark.parametrize("kind", sorted(r.BODY_TYPES))
def test_every_kind_has_its_tag_in_the_envelope(kind: str) -> None:
    cls = r.BODY_TYPES[kind]
    assert kind == cls.KIND
    assert r.kind_of  # exported helper exists for callers routing on kind


def _line(body: dict[str, object], kind: str = "tool_result") -> bytes:
    return msgspec.json.encode({"seq": 7, "ts": 1, "turn": 0, "kind": kind, "v": 1, "body": body})


def test_wrong_field_type_names_seq_and_field() -> None:
    with pytest.raises(InvalidRecord) as info:
        r.decode_json_record(_line({"call_id": "c1", "tool": "bash", "status": "ok", "exit_code": "0"}))
    assert info.value.where == "seq 7"
    assert info.value.field == "body.exit_code"
    assert "seq 7" in str(info.value) and "body.exit_code" in str(info.value)


def test_unknown_kind_names_line_and_kind() -> None:
    with pytest.raises(InvalidRecord) as info:
        r.decode_json_record(_line({}, kind="telepathy"), where="line 3 of in.jsonl")
    assert info.value.where == "line 3 of in.jsonl"
    assert info.value.field == "kind"
    assert "telepathy" in str(info.value)


def test_unknown_body_field_is_rejected() -> None:
    with pytest.raises(InvalidRecord) as info:
        r.decode_json_record(_line({"role": "user", "text": "x", "colour": 1}, kind="message"))
    assert info.value.field == "body"
    assert "colour" in str(info.value)


def test_newer_schema_version_is_refused() -> None:
    data = msgspec.json.encode(
        {"seq": 0, "ts": 1, "turn": None, "kind": "message", "v": 99, "body": {"role": "user", "text": "x"}}
    )
    with pytest.raises(InvalidRecord) as info:
        r.decode_json_record(data)
    assert info.value.field == "v"


def test_malformed_bytes_raise_invalid_record() -> None:
    with pytest.raises(InvalidRecord):
        r.decode_json_record(b"{not json")
    with pytest.raises(InvalidRecord):
        r.decode_msgpack_record(b"\xc1")


def test_invalid_record_is_a_value_error() -> None:
    assert issubclass(InvalidRecord, ValueError)


# --------------------------------------------------------------------------- wire bytes


def _reference_msgpack(record: r.Record) -> bytes:
    """The wire form spelled out as a plain map, key order as documented: the bytes the
    ledger chain hashes must not depend on how the codec builds them."""
    return msgspec.msgpack.encode(
        {
            "seq": record.seq,
            "ts": record.ts,
            "turn": record.turn,
            "kind": record.kind,
            "v": record.v,
            "body": record.body,
        }
    )


@given(records())
def test_msgpack_bytes_are_the_documented_map(record: r.Record) -> None:
    assert r.encode_msgpack_record(record) == _reference_msgpack(record)


@given(records(), st.integers(0, 2**63 - 1), st.binary(max_size=40))
def test_encode_into_appends_with_the_given_seq(record: r.Record, seq: int, prefix: bytes) -> None:
    buf = bytearray(prefix)
    n = r.encode_msgpack_record_into(record, buf, seq)
    assert bytes(buf[: len(prefix)]) == prefix
    assert len(buf) == len(prefix) + n
    assert bytes(buf[len(prefix) :]) == _reference_msgpack(msgspec.structs.replace(record, seq=seq))


def test_newer_schema_version_is_named_before_an_unknown_body_field() -> None:
    # A newer writer may add body fields: the reader must say "upgrade", not "unknown field".
    for decode, encode in (
        (r.decode_json_record, msgspec.json.encode),
        (r.decode_msgpack_record, msgspec.msgpack.encode),
    ):
        data = encode(
            {
                "seq": 3,
                "ts": 1,
                "turn": None,
                "kind": "message",
                "v": r.SCHEMA_VERSION + 1,
                "body": {"role": "user", "text": "hi", "mood": "new field"},
            }
        )
        with pytest.raises(InvalidRecord, match=f"schema version {r.SCHEMA_VERSION + 1}") as info:
            decode(data)
        assert (info.value.where, info.value.field) == ("seq 3", "v")


# --------------------------------------------------------------------------- hostile input

_ENVELOPE_START = b'{"seq": 0, "ts": 1, "turn": null, "kind": "tool_intent", "v": 1, "body": '
_CALL_ID_AT = len(_ENVELOPE_START + b'{"call_id": "')  # where a call id's text starts in the line


@pytest.mark.parametrize(
    ("line", "message", "field"),
    [
        (
            _ENVELOPE_START + b'{"call_id": "\xff\xfe", "tool": "t"}}',
            # The offset in the line, not in the JSON string holding the byte.
            rf"not UTF-8 \(byte 0xff at byte {_CALL_ID_AT}:",
            None,
        ),
        (
            _ENVELOPE_START + b'{"call_id": "c", "tool": "t", "args": {"x": ' + b"[" * 50_000,
            "nested too deeply",
            None,
        ),
        (b"[" * 50_000 + b"]" * 50_000, "Expected `object`", None),
    ],
)
def test_undecodable_json_lines_raise_invalid_record_naming_the_line(
    line: bytes, message: str, field: str | None
) -> None:
    with pytest.raises(InvalidRecord, match=message) as info:
        r.decode_json_record(line, where="line 7 of x.jsonl")
    assert info.value.where == "line 7 of x.jsonl"
    assert "line 7 of x.jsonl" in str(info.value)
    assert info.value.field == field


def test_json_text_with_a_lone_surrogate_is_invalid_record() -> None:
    line = _ENVELOPE_START.decode() + '{"call_id": "\ud800", "tool": "t"}}'
    with pytest.raises(InvalidRecord, match="surrogate") as info:
        r.decode_json_record(line, where="line 2")
    assert info.value.where == "line 2"


def test_undecodable_msgpack_payloads_raise_invalid_record() -> None:
    good = r.encode_msgpack_record(
        r.Record(body=r.ToolIntent(call_id="c", tool="t", args={"x": 1}), ts=1, seq=4)
    )
    # Invalid UTF-8 inside a msgpack string (the call id).
    bad_utf8 = good.replace(b"\xa1c", b"\xa1\xff")
    assert bad_utf8 != good
    with pytest.raises(InvalidRecord, match="not UTF-8"):
        r.decode_msgpack_record(bad_utf8, where="seq 4 (seg at byte 64)")
    # Nesting deeper than the decoder's recursion limit, inside the tool arguments.
    deep = good.replace(b"\xa1x\x01", b"\xa1x" + b"\x91" * 50_000 + b"\x01")
    assert deep != good
    with pytest.raises(InvalidRecord, match="nested too deeply") as info:
        r.decode_msgpack_record(deep, where="seq 4 (seg at byte 64)")
    assert info.value.where == "seq 4 (seg at byte 64)"


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_invalid_record(data: bytes) -> None:
    for decode in (r.decode_json_record, r.decode_msgpack_record):
        try:
            record = decode(data)
        except InvalidRecord:
            continue
        assert isinstance(record, r.Record)


@settings(max_examples=300)
@given(records(), st.data())
def test_mutated_encodings_raise_only_invalid_record(record: r.Record, data: st.DataObject) -> None:
    # Random bytes rarely get past the first byte; damaged real encodings reach every branch.
    for encoded, decode in (
        (r.encode_msgpack_record(record), r.decode_msgpack_record),
        (r.encode_json_record(record), r.decode_json_record),
    ):
        mutated = bytearray(encoded)
        for _ in range(data.draw(st.integers(1, 4))):
            pos = data.draw(st.integers(0, len(mutated) - 1))
            mutated[pos] = data.draw(st.integers(0, 255))
        cut = data.draw(st.integers(0, len(mutated)))
        for candidate in (bytes(mutated), bytes(mutated[:cut])):
            try:
                decoded = decode(candidate)
            except InvalidRecord:
                continue
            assert isinstance(decoded, r.Record)


def _envelope(kind: str, body: str, extra: str = "") -> bytes:
    return f'{{"seq": 0, "ts": 1, "turn": null, "kind": "{kind}", "v": 1, "body": {body}{extra}}}'.encode()


@pytest.mark.parametrize(
    ("line", "field", "says"),
    [
        (_envelope("message", '{"role": "usr", "text": "x"}'), "body.role",
         "Invalid enum value 'usr'; expected one of 'assistant', 'channel', 'operator', 'system', 'user'"),
        (_envelope("work_plan", '{"work_item_id": "w", "steps": [{"id": "a", "text": "t", "status": "X"}]}'),
         "body.steps[0].status", "expected one of 'blocked', 'done', 'in_progress', 'pending', 'skipped'"),
        (_envelope("message", '{"role": "user", "txt": "x"}'), "body",
         "Object contains unknown field `txt`; did you mean `text`?"),
        (_envelope("message", '{"role": "user", "text": "x", "extra": 1}'), "body",
         "unknown field `extra`; the fields are: role, text, channel, name"),
        (_envelope("message", '{"role": "user", "text": "x"}', ', "tunr": 3'), None,
         "unknown field `tunr`; did you mean `turn`?"),
        (b'{"kind": "message"}', None,
         "missing required field `seq`; a record is an object with the fields seq, ts, turn, kind, v, body"),
        (b"[1, 2]", None,
         "got `array`; a record is an object with the fields seq, ts, turn, kind, v, body"),
        (b'{"seq": 0, "ts": 1,', None, "the record was cut off (a partly copied file?)"),
        # A message msgspec words well already passes through unchanged.
        (_envelope("message", '{"role": "user", "text": 5}'), "body.text", "Expected `str`, got `int`"),
    ],
)  # fmt: skip
def test_invalid_records_say_what_to_write_instead(line: bytes, field: str | None, says: str) -> None:
    with pytest.raises(InvalidRecord) as info:
        r.decode_json_record(line, where="line 3 of x.jsonl")
    assert info.value.field == field
    assert str(info.value).endswith(says)
    payload = msgspec.msgpack.encode(msgspec.json.decode(line)) if line.endswith(b"}") else None
    if payload is not None:  # the frame payload form says the same
        with pytest.raises(InvalidRecord) as packed:
            r.decode_msgpack_record(payload, where="seq 0")
        assert str(packed.value).split(": ", 1)[1] == str(info.value).split(": ", 1)[1]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        # msgspec reports a lone high surrogate escape as truncation: the line is whole.
        (
            b'{"seq":0,"ts":1,"turn":null,"kind":"message","v":1,"body":{"role":"user","text":"\\ud800"}}',
            "half of a UTF-16 surrogate pair",
        ),
        (b'{"seq":0,"ts":1,"turn":null,"kind":"message","v":1,"body":{"role":"user","te', "was cut off"),
        # No holon wrote a version below 1: upgrading would not help.
        (
            b'{"seq":0,"ts":1,"turn":null,"kind":"message","v":0,"body":{"role":"user","text":"x"}}',
            "version 0 does not exist",
        ),
    ],
)
def test_a_bad_json_line_is_named_for_what_is_wrong_with_it(line: bytes, says: str) -> None:
    with pytest.raises(InvalidRecord, match=says) as caught:
        r.decode_json_record(line, where="line 3 of x.jsonl")
    assert caught.value.where == "line 3 of x.jsonl"
    assert "upgrade holon" not in str(caught.value)
