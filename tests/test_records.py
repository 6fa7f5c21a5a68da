"""Record vocabulary: every kind round-trips through msgpack and JSON; bad input is named."""

from __future__ import annotations

import json
import re

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon import records as r
from holon.errors import InvalidRecord
from holon.records import malformed
from tests.msgspec_styles import STYLES, use_style
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



@pytest.mark.parametrize(
    "body",
    [
        r.Message(role="assistant", text="found it", task_id="t1"),
        r.ToolIntent(call_id="c1", tool="Bash", args={"command": "ls"}, task_id="t1"),
        r.ToolResult(call_id="c1", tool="Bash", status="ok", output="a.py", task_id="t1"),
        r.WorkPlan(work_item_id=None, steps=(r.PlanStep(id="1", text="look"),), task_id="t1"),
    ],
)
def test_a_sub_agents_evidence_names_its_task_from_schema_version_4(body: r.Body) -> None:
    record = r.Record(body=body, ts=1, seq=0)
    assert record.v == r.SCHEMA_VERSION >= 4
    line = r.encode_json_record(record)
    assert b'"task_id":"t1"' in line
    assert r.decode_json_record(line) == record == r.decode_msgpack_record(r.encode_msgpack_record(record))
    # The same body of the agent itself is as it was in version 3: without the field, it
    # decodes with no task, and a version 3 record still reads, keeping its version.
    own = r.Record(body=msgspec.structs.replace(body, task_id=None), ts=1, seq=0, v=3)
    assert b"task_id" not in r.encode_json_record(own)
    assert r.decode_json_record(r.encode_json_record(own)) == own

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
         "unknown field `extra`; the fields are: role, text, channel, name, task_id"),
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


# --------------------------------------------------------------------------- whatever msgspec says
#
# What a record is refused for, and the hint, follow its bytes: msgspec 0.23 raises a
# DecodeError worded its own way for text that is not UTF-8 where 0.22 raised
# UnicodeDecodeError, and any release may reword a message (tests/msgspec_styles.py).


def _tool_intent_payload() -> tuple[bytes, int]:
    """A msgpack payload and the offset of its call id's one character."""
    good = r.encode_msgpack_record(
        r.Record(body=r.ToolIntent(call_id="c", tool="t", args={"x": 1}), ts=1, seq=4)
    )
    return good, good.index(b"\xa1c") + 1


@pytest.mark.parametrize("style", STYLES)
def test_text_that_is_not_utf8_is_named_by_its_byte_whatever_msgspec_raises(
    monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    use_style(monkeypatch, style)
    line = _ENVELOPE_START + b'{"call_id": "\xff\xfe", "tool": "t"}}'
    with pytest.raises(InvalidRecord) as info:
        r.decode_json_record(line, where="line 7 of x.jsonl")
    assert str(info.value) == (
        f"invalid record at line 7 of x.jsonl: the JSON line holds text that is not UTF-8 (byte 0xff at "
        f"byte {_CALL_ID_AT}: invalid start byte); re-encode it as UTF-8"
    )
    good, at = _tool_intent_payload()
    bad = good[:at] + b"\xff" + good[at + 1 :]
    says = rf"seq 4: the msgpack payload holds text that is not UTF-8 \(byte 0xff at byte {at}: "
    with pytest.raises(InvalidRecord, match=says):
        r.decode_msgpack_record(bad, where="seq 4")
    with pytest.raises(InvalidRecord, match=says):  # nor is it appended
        r.check_payload(bad, seq=4)
    # In a map key, and in a string longer than a fixstr (its length in a byte of its own).
    key = msgspec.msgpack.encode({"seq": 1}).replace(b"seq", b"s\xe9q")
    with pytest.raises(InvalidRecord, match=r"\(byte 0xe9 at byte 3: "):  # fixmap, fixstr, "s", then it
        r.decode_msgpack_record(key)
    long = r.encode_msgpack_record(r.Record(body=r.Message(role="user", text="x" * 40 + "é"), ts=1, seq=0))
    accent = long.index("é".encode())
    with pytest.raises(InvalidRecord, match=rf"\(byte 0xc3 at byte {accent}: invalid continuation"):
        r.decode_msgpack_record(long[: accent + 1] + b"x" + long[accent + 2 :])


@pytest.mark.parametrize("style", STYLES)
def test_a_record_cut_off_or_holding_half_a_surrogate_pair_is_named_whatever_msgspec_says(
    monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    use_style(monkeypatch, style)
    record = r.Record(body=r.Message(role="user", text="café 😀", name="n"), ts=1, turn=2, seq=3)
    cut = "the data ends in the middle of a value; the record was cut off (a partly copied file?)"
    line, payload = r.encode_json_record(record), r.encode_msgpack_record(record)
    for end in range(len(line)):  # mid-character too: a cut, not another encoding
        with pytest.raises(InvalidRecord) as info:
            r.decode_json_record(line[:end], where="line 3")
        assert str(info.value) == f"invalid record at line 3: {cut}", end
    for end in range(len(payload)):
        with pytest.raises(InvalidRecord) as info:
            r.decode_msgpack_record(payload[:end], where="seq 3")
        assert str(info.value) == f"invalid record at seq 3: {cut}", end
    for escape in (b"\\ud83d", b"\\ude00"):
        half = line.replace("😀".encode(), escape)
        with pytest.raises(
            InvalidRecord, match=rf"holds \{escape.decode()}, half of a UTF-16 surrogate pair"
        ):
            r.decode_json_record(half)
    # Its full pair, or an escaped backslash before the same letters, is text.
    for text in (b"\\ud83d\\ude00", b"\\\\ud83d"):
        assert r.decode_json_record(line.replace("😀".encode(), text)).body.text in (
            "café 😀",
            "café \\ud83d",
        )


# Lines the schema refuses, the field named, and the hint added to msgspec's own words.
_HINTS = [
    (_envelope("message", '{"role": "usr", "text": "x"}'), "body.role",
     "; expected one of 'assistant', 'channel', 'operator', 'system', 'user'"),
    (_envelope("work_plan", '{"work_item_id": "w", "steps": [{"id": "a", "text": "t", "status": "X"}]}'),
     "body.steps[0].status", "; expected one of 'blocked', 'done', 'in_progress', 'pending', 'skipped'"),
    (_envelope("message", '{"role": "user", "txt": "x"}'), "body", "; did you mean `text`?"),
    (_envelope("message", '{"role": "user", "text": "x", "extra": 1}'), "body",
     "; the fields are: role, text, channel, name, task_id"),
    (_envelope("message", '{"role": "user", "text": "x"}', ', "tunr": 3'), None, "; did you mean `turn`?"),
    (b'{"kind": "message"}', None, "; a record is an object with the fields seq, ts, turn, kind, v, body"),
    (b"[1, 2]", None, "; a record is an object with the fields seq, ts, turn, kind, v, body"),
    (_envelope("message", '{"role": "user", "text": 5}'), "body.text", ""),
]  # fmt: skip


@pytest.mark.parametrize("style", ["installed", "reworded"])
@pytest.mark.parametrize(("line", "field", "hint"), _HINTS)
def test_the_hint_follows_the_record_and_its_schema_not_msgspecs_words(
    monkeypatch: pytest.MonkeyPatch, style: str, line: bytes, field: str | None, hint: str
) -> None:
    use_style(monkeypatch, style)
    payload = msgspec.msgpack.encode(msgspec.json.decode(line))
    for decode, data in ((r.decode_json_record, line), (r.decode_msgpack_record, payload)):
        with pytest.raises(InvalidRecord) as info:
            decode(data, where="line 3")  # type: ignore[operator]
        assert info.value.field == field
        message = str(info.value).removeprefix(
            f"invalid record at line 3{f', field `{field}`' if field else ''}: "
        )
        assert message.endswith(hint) and message.removesuffix(hint).count(";") == 0, message
        if style == "reworded":
            assert message == f"the decoder would not have these bytes{hint}"


def test_msgspec_words_naming_no_path_still_refuse_the_record_naming_no_deeper_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The path of the refused value is found only in msgspec's words (" - at `$.body.role`"):
    # without it, the record is still refused, at the body (or the record), in msgspec's words.
    use_style(monkeypatch, "pathless")
    refused = "the decoder would not have these bytes"
    message = '{"role": "user", "text": "x"}'
    for line, field, says in [
        (_envelope("message", '{"role": "usr", "text": "x"}'), "body", refused),
        (_envelope("work_plan", '{"work_item_id": "w", "steps": [{"id": "a", "text": "t", "status": "X"}]}'),
         "body", refused),
        (_envelope("message", '{"role": "user", "text": "x"}', ', "tunr": 3'), None,
         f"{refused}; did you mean `turn`?"),
        (_envelope("message", message).replace(b'"ts": 1,', b'"ts": "",'), None, refused),
    ]:  # fmt: skip
        with pytest.raises(InvalidRecord) as info:
            r.decode_json_record(line, where="line 3")
        assert info.value.field == field
        assert str(info.value).endswith(f": {says}")


def test_utf8_error_counts_from_the_start_across_the_pieces_it_decodes() -> None:
    piece = malformed._UTF8_PIECE
    straddling = b"x" * (piece - 1) + "é".encode() + b"y"  # é's two bytes in two pieces
    assert r.utf8_error(straddling) is None
    assert r.utf8_error(straddling + b"\xff")[0] == len(straddling)  # type: ignore[index]
    ends_short = b"x" * (piece - 1) + b"\xc3"
    assert r.utf8_error(ends_short, final=False) is None  # more may follow
    assert r.utf8_error(ends_short)[0] == piece - 1  # type: ignore[index]
    assert r.utf8_error(ends_short + b"x", final=False)[0] == piece - 1  # type: ignore[index]
    assert r.utf8_error(memoryview(b"ok \xe9 no")) == (3, "invalid continuation byte")


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200)
@given(_JSON_VALUES, st.sampled_from([None, 1]), st.booleans())
def test_json_cut_off_is_true_of_every_start_of_json_text_and_of_nothing_wrong(
    value: object, indent: int | None, ascii_only: bool
) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only).encode()
    assert not r.json_cut_off(text)
    for end in range(len(text)):
        start = text[:end]
        try:
            json.loads(start)
        except ValueError:
            whole = False
        else:
            whole = True  # `12` of `123`: a value of its own
        assert r.json_cut_off(start) is not whole, start
        assert not r.json_cut_off(start + b"\x01"), start  # no JSON text goes on with a control byte
    assert not r.json_cut_off(text + b" 1")  # a second value after the first


# --------------------------------------------------------------------------- an oracle

_G_SPACE = re.compile(rb"[ \t\n\r]*+")
_G_STRING = re.compile(rb'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"')
# A string the data ends in, an escape it cuts short included.
_G_STRING_START = re.compile(
    rb'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+(?:\\(?:u[0-9a-fA-F]{0,3})?)?\Z'
)
_G_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# A number the data ends in, perhaps cut short (`-`, `1.`, `2e+`).
_G_NUMBER_START = re.compile(
    rb"-?(?:(?:0|[1-9][0-9]*)(?:\.(?:[0-9]+(?:[eE][+-]?[0-9]*)?)?|[eE][+-]?[0-9]*)?)?\Z"
)
_G_WORDS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}
# What the scan of json_cut_off expects next.
_G_VALUE, _G_VALUE_OR_CLOSE, _G_KEY, _G_KEY_OR_CLOSE, _G_COLON, _G_AFTER = range(6)


def _grammar_cut_off(data: bytes) -> bool:
    """json_cut_off, by a scan of JSON's grammar in Python: the oracle of the stdlib-based one."""
    size = len(data)
    closers = bytearray()  # what closes each open array and object, innermost last
    expect = _G_VALUE
    match = _G_SPACE.match(data)
    pos = match.end() if match else 0
    while pos < size:
        byte = data[pos]
        if expect in (_G_VALUE, _G_VALUE_OR_CLOSE):
            if byte == 0x5B:  # [
                closers.append(0x5D)
                pos, expect = pos + 1, _G_VALUE_OR_CLOSE
            elif byte == 0x7B:  # {
                closers.append(0x7D)
                pos, expect = pos + 1, _G_KEY_OR_CLOSE
            elif byte == 0x5D and expect == _G_VALUE_OR_CLOSE:  # an empty array
                closers.pop()
                pos, expect = pos + 1, _G_AFTER
            elif byte == 0x22:  # "
                string = _G_STRING.match(data, pos)
                if string is None:
                    return _G_STRING_START.match(data, pos) is not None
                pos, expect = string.end(), _G_AFTER
            elif byte == 0x2D or 0x30 <= byte <= 0x39:  # - or a digit
                if _G_NUMBER_START.match(data, pos) is not None:
                    # The number runs to the end: cut off, unless it is the whole value, complete.
                    return bool(closers) or _G_NUMBER.fullmatch(data, pos) is None
                number = _G_NUMBER.match(data, pos)
                if number is None:
                    return False
                pos, expect = number.end(), _G_AFTER
            else:
                word = _G_WORDS.get(byte)
                if word is None:
                    return False
                if not data.startswith(word, pos):
                    return size - pos < len(word) and word.startswith(data[pos:])
                pos, expect = pos + len(word), _G_AFTER
        elif expect in (_G_KEY, _G_KEY_OR_CLOSE):
            if byte == 0x7D and expect == _G_KEY_OR_CLOSE:  # an empty object
                closers.pop()
                pos, expect = pos + 1, _G_AFTER
            elif byte == 0x22:
                string = _G_STRING.match(data, pos)
                if string is None:
                    return _G_STRING_START.match(data, pos) is not None
                pos, expect = string.end(), _G_COLON
            else:
                return False
        elif expect == _G_COLON:
            if byte != 0x3A:  # :
                return False
            pos, expect = pos + 1, _G_VALUE
        else:  # a value ended
            if not closers:
                return False  # something follows a whole value
            if byte == 0x2C:  # ,
                pos, expect = pos + 1, _G_KEY if closers[-1] == 0x7D else _G_VALUE
            elif byte == closers[-1]:
                closers.pop()
                pos, expect = pos + 1, _G_AFTER
            else:
                return False
        match = _G_SPACE.match(data, pos)
        pos = match.end() if match else pos
    return expect != _G_AFTER or bool(closers)

_JSONISH = st.text(alphabet='[]{}",: 0123456789-+.eEtrufalsn\\u\x01\u00e9', max_size=10)


@settings(max_examples=3000)
@given(_JSONISH)
def test_json_cut_off_agrees_with_a_scan_of_the_grammar(text: str) -> None:
    data = text.encode()
    assert r.json_cut_off(data) is _grammar_cut_off(data), data


_SURROGATE_PIECES = st.sampled_from(["\\", "ud83d", "ude00", "\ud83d", "\ude00", "x", "😀"])


@given(st.lists(_SURROGATE_PIECES, max_size=10).map("".join))
def test_lone_surrogate_finds_exactly_the_halves_of_pairs_in_json_text(text: str) -> None:
    escaped = json.dumps(text).encode()  # each surrogate as its escape; a backslash as `\\`
    decoded = json.loads(escaped)  # the stdlib joins a high and a low escape into one character
    halves = [i for i, char in enumerate(decoded) if 0xD800 <= ord(char) <= 0xDFFF]
    found = r.lone_surrogate(escaped)
    assert (found is not None) is bool(halves), escaped
    if found is not None:
        assert escaped[found[0] : found[0] + 6] == found[1]
        assert json.loads(b'"' + found[1] + b'"') == decoded[halves[0]]
