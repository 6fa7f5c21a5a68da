"""Record vocabulary: every kind round-trips through msgpack and JSON; bad input is named."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given

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
