"""Appending and reading back: every record kind, seq assignment, fsync policies, head."""

from __future__ import annotations

import datetime as dt
import errno
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import holon.ledger.index as index_mod
import holon.ledger.reader as reader_mod
import holon.ledger.writer as writer_mod
from holon import records as r
from holon.errors import InvalidRecord, NotALedger, RefNotFound, UsageError
from holon.ledger import Ledger, encode_frame, frames, import_jsonl, store
from holon.ledger.header import genesis_hash
from holon.records import (
    BODY_TYPES,
    ExecutionEnvironment,
    Message,
    Record,
    SystemPolicy,
    ToolDefinition,
    ToolIntent,
    ToolResult,
    decode_json_record,
    encode_json_record,
)
from holon.testing import with_real_blobs
from tests.cli_support import tree_bytes, write_jsonl
from tests.ledger_support import (
    AGENT,
    assert_ledger_holds,
    expected_head,
    message,
    scratch_dir,
    tool_output,
)
from tests.strategies import ledger_records, records


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledger_records(max_size=25))
def test_every_record_round_trips_through_the_ledger(recs: list[Record]) -> None:
    with scratch_dir() as root:
        path = root / "l"
        with Ledger.create(path, agent_id=AGENT, fsync="never") as ledger:
            stored = [with_real_blobs(ledger, r) for r in recs]
            assert ledger.append_many(stored) == list(range(len(stored)))
            assert list(ledger.read()) == stored
            assert ledger.head() == expected_head(AGENT, stored)
        assert_ledger_holds(path, stored)


@pytest.mark.parametrize("kind", sorted(BODY_TYPES))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_each_kind_round_trips_one_by_one(kind: str, data: st.DataObject) -> None:
    recs = data.draw(st.lists(records(kind), min_size=3, max_size=3))
    with scratch_dir() as root, Ledger.create(root / "l", agent_id=AGENT, fsync="batch") as ledger:
        stored = []
        for generated in recs:
            record = with_real_blobs(ledger, msgspec.structs.replace(generated, seq=-1))
            seq = ledger.append(record)
            stored.append(msgspec.structs.replace(record, seq=seq))
        assert [ledger.get(i) for i in range(3)] == stored
        ledger.flush()
        assert_ledger_holds(root / "l", stored)


def test_empty_ledger_head_is_the_genesis_hash(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id="a1") as ledger:
        assert ledger.head() == (-1, genesis_hash("a1").hex())
        assert list(ledger.read()) == []
    with Ledger.open(tmp_path / "l", readonly=True) as reader:
        assert reader.head() == (-1, genesis_hash("a1").hex())
    assert genesis_hash("a1") != genesis_hash("a2")


def test_seq_is_assigned_and_explicit_seq_must_be_next(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id=AGENT) as ledger:
        assert ledger.append(message(0)) == 0
        assert ledger.append(msgspec.structs.replace(message(1), seq=1)) == 1
        with pytest.raises(InvalidRecord, match=r"seq 7.*next seq of this ledger is 2") as info:
            ledger.append(msgspec.structs.replace(message(2), seq=7))
        assert info.value.field == "seq"
        assert ledger.append_many([message(2), message(3)]) == [2, 3]
        assert ledger.get(3).seq == 3


def test_append_many_appends_nothing_when_one_record_is_invalid(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id=AGENT) as ledger:
        ledger.append(message(0))
        bad = [message(1), msgspec.structs.replace(message(2), seq=99)]
        with pytest.raises(InvalidRecord):
            ledger.append_many(bad)
        assert ledger.head()[0] == 0
        assert ledger.append(message(1)) == 1


def test_get_past_the_head_is_ref_not_found(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id=AGENT) as ledger:
        ledger.append(message(0))
        with pytest.raises(RefNotFound, match="past the end"):
            ledger.get(1)
        with pytest.raises(RefNotFound):
            ledger.get(-1)


def test_read_range_is_half_open(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id=AGENT, segment_bytes=2048) as ledger:
        ledger.append_many(message(i) for i in range(60))
        assert [r.seq for r in ledger.read(10, 15)] == [10, 11, 12, 13, 14]
        assert [r.seq for r in ledger.read(55)] == [55, 56, 57, 58, 59]
        assert list(ledger.read(5, 5)) == []
        assert list(ledger.read(60)) == []


@pytest.mark.parametrize("policy", ["always", "batch", "never"])
def test_fsync_policies_keep_every_flushed_record(tmp_path: Path, policy: str) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync=policy) as ledger:  # type: ignore[arg-type]
        with ledger.batch():
            ledger.append_many(message(i) for i in range(5))
        ledger.append(message(5))
        ledger.flush()
    assert_ledger_holds(path, [msgspec.structs.replace(message(i), seq=i) for i in range(6)])


def test_batch_policy_buffers_until_flush(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="batch") as ledger:
        ledger.append(message(0))
        with Ledger.open(path, readonly=True) as reader:
            assert reader.head()[0] == -1  # buffered in the writer, not yet written
            ledger.flush()
            assert reader.head() == ledger.head()


def test_always_policy_writes_before_append_returns(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="always") as ledger:
        ledger.append(message(0))
        with Ledger.open(path, readonly=True) as reader:
            assert reader.head() == ledger.head()


def test_read_only_and_closed_ledgers_refuse_appends(tmp_path: Path) -> None:
    path = tmp_path / "l"
    ledger = Ledger.create(path, agent_id=AGENT)
    ledger.close()
    ledger.close()
    with pytest.raises(UsageError, match="closed"):
        ledger.append(message(0))
    with Ledger.open(path, readonly=True) as reader, pytest.raises(UsageError, match="read-only"):
        reader.append(message(0))


def test_open_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(NotALedger, match="does not exist"):
        Ledger.open(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotALedger, match=r"no holon-ledger\.json"):
        Ledger.open(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotALedger, match="not a directory"):
        Ledger.open(tmp_path / "file")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "holon-ledger.json").write_text('{"format": "other"}')
    with pytest.raises(NotALedger, match="not a holon ledger header"):
        Ledger.open(tmp_path / "foreign")


def test_create_refuses_an_existing_ledger_and_bad_settings(tmp_path: Path) -> None:
    Ledger.create(tmp_path / "l", agent_id=AGENT).close()
    with pytest.raises(UsageError, match="not an empty directory"):
        Ledger.create(tmp_path / "l", agent_id=AGENT)
    with pytest.raises(UsageError, match="agent_id"):
        Ledger.create(tmp_path / "x", agent_id="")
    with pytest.raises(UsageError, match="segment_bytes"):
        Ledger.create(tmp_path / "y", agent_id=AGENT, segment_bytes=10)
    with pytest.raises(UsageError, match="fsync policy"):
        Ledger.open(tmp_path / "l", fsync="sometimes")  # type: ignore[arg-type]


def test_reopened_writer_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, segment_bytes=2048) as ledger:
        ledger.append_many(message(i) for i in range(30))
    with Ledger.open(path) as ledger:
        assert ledger.recovery == ()
        assert ledger.head()[0] == 29
        ledger.append_many(message(i) for i in range(30, 40))
    assert_ledger_holds(path, [msgspec.structs.replace(message(i), seq=i) for i in range(40)])


@pytest.fixture
def small_max_payload(monkeypatch: pytest.MonkeyPatch) -> int:
    """Lower the frame payload limit for writer and reader alike (no format change), so a
    record over it takes kilobytes instead of 256 MiB."""
    limit = 4096
    for module in (frames, writer_mod, reader_mod, index_mod):
        monkeypatch.setattr(module, "MAX_PAYLOAD", limit)
    return limit


@pytest.mark.parametrize("fsync", ["always", "batch"])
def test_a_record_over_the_payload_limit_is_refused_before_anything_is_written(
    tmp_path: Path, small_max_payload: int, fsync: str
) -> None:
    # Before: the frame was written, and every later read called the ledger corrupt.
    path = tmp_path / "l"
    big = message(1, small_max_payload + 100)
    refusal = (
        r"invalid record at seq {seq}: record is 4,2\d\d bytes encoded; a record may be at most "
        r"4,096: store large content as a blob"
    )
    with Ledger.create(path, agent_id=AGENT, fsync=fsync) as ledger:  # type: ignore[arg-type]
        ledger.append(message(0))
        with pytest.raises(InvalidRecord, match=refusal.format(seq=1)) as info:
            ledger.append(big)
        assert info.value.where == "seq 1"
        # A batch is refused whole, naming the record and the seq it would have had.
        with pytest.raises(InvalidRecord, match=refusal.format(seq=2)):
            ledger.append_many([message(1), big, message(3)])
        assert ledger.head()[0] == 0
        assert ledger.append(message(1)) == 1
        assert ledger.append_many([message(2)]) == [2]
    assert_ledger_holds(path, [msgspec.structs.replace(message(i), seq=i) for i in range(3)])
    with Ledger.open(path) as ledger:
        assert ledger.recovery == ()
        assert ledger.get(2) == msgspec.structs.replace(message(2), seq=2)


def test_a_frame_over_the_payload_limit_is_never_built(small_max_payload: int) -> None:
    encode_frame(bytes(32), bytes(small_max_payload))
    with pytest.raises(InvalidRecord, match="at most 4,096"):
        encode_frame(bytes(32), bytes(small_max_payload + 1))


def test_the_payload_limit_is_stated_in_bytes_and_mib() -> None:
    # The real limit, without writing 256 MiB: the message a user meets.
    assert str(frames.oversized_payload(283_115_591, where="seq 5")) == (
        "invalid record at seq 5: record is 283,115,591 bytes encoded; a record may be at most "
        "268,435,456 (256 MiB): store large content as a blob (Ledger.put_blob) and keep only its "
        "reference in the record"
    )


def _blob_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "blobs").rglob("*") if p.is_file())


def test_a_refused_append_leaves_no_blob_behind(tmp_path: Path, small_max_payload: int) -> None:
    # Before: the output was moved to the blob store, then the batch (or record) was
    # refused, and the blob stayed: verify passed, but the store held bytes of no record.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id="a", fsync="never", blob_threshold=1024) as ledger:
        kept = ledger.append(tool_output(0, 3000))  # a blob that stays referenced
        before = _blob_files(path)
        assert len(before) == 1
        batch = [tool_output(0, 3000), tool_output(1, 3000), message(2, small_max_payload + 100)]
        with pytest.raises(InvalidRecord, match="at seq 3: record is"):
            ledger.append_many(batch)
        wide = tool_output(3, 3000)
        wide = msgspec.structs.replace(wide, body=msgspec.structs.replace(wide.body, exit_code=2**70))
        with pytest.raises(InvalidRecord, match="at seq 1: record does not encode"):
            ledger.append(wide)
        # The new blobs are gone; the one record 0 refers to (the same bytes as the
        # batch's first output) is still there.
        assert _blob_files(path) == before and ledger.head()[0] == kept == 0
        assert ledger.verify().ok


def test_a_large_output_that_is_not_utf8_text_is_an_invalid_record(tmp_path: Path) -> None:
    # Before: UnicodeEncodeError from the blob path (a short output got InvalidRecord).
    with Ledger.create(tmp_path / "l", agent_id="a", fsync="never", blob_threshold=1024) as ledger:
        record = tool_output(0, 3000)
        body = msgspec.structs.replace(record.body, output="x\udce9" * 2000)
        record = msgspec.structs.replace(record, body=body)
        with pytest.raises(InvalidRecord, match=r"at seq 0: record does not encode .*surrogates not allowed"):
            ledger.append(record)
        assert ledger.head()[0] == -1 and _blob_files(tmp_path / "l") == []


# A record whose fields do not have their declared types: the constructors do not check.
_ILL_TYPED = [
    (Record(body=Message(role="user", text=123), ts=1), "body.text", "Expected `str`, got `int`"),  # type: ignore[arg-type]
    (Record(body=Message(role="usr", text="x"), ts=1), "body.role", "expected one of 'assistant'"),  # type: ignore[arg-type]
    (Record(body=Message(role="user", text="x"), ts="1"), "ts", "Expected `int`, got `str`"),  # type: ignore[arg-type]
    (
        Record(body=ExecutionEnvironment(extra={"a": 1}), ts=1),  # type: ignore[dict-item]
        r"body.extra\[...\]",
        "got `int`",
    ),
]


@pytest.mark.parametrize(("record", "field", "why"), _ILL_TYPED)
def test_a_record_no_reader_would_accept_is_refused_on_append(
    tmp_path: Path, record: Record, field: str, why: str
) -> None:
    # Before: it was appended and acknowledged, and from then on every read of the ledger
    # failed at its seq ("invalid record at seq 1 (... at byte 64)").
    path = tmp_path / "l"
    with Ledger.create(path, agent_id="a", fsync="always") as ledger:
        ledger.append(message(0))
        with pytest.raises(InvalidRecord, match=rf"at seq 1, field `{field}`: .*{why}"):
            ledger.append(record)
        with pytest.raises(InvalidRecord, match=rf"at seq 2, field `{field}`"):
            ledger.append_many([message(1), record])
        assert ledger.head()[0] == 0
        ledger.append(message(1))
    with Ledger.open(path) as reopened:
        assert [r.body for r in reopened.read()] == [message(0).body, message(1).body]
        assert reopened.verify().ok


_NOT_JSON = [
    ({"x": float("nan")}, "body.args.x", "the number nan has no JSON form"),
    ({"x": [1, float("-inf")]}, r"body.args.x\[1\]", "the number -inf has no JSON form"),
    ({"x": {"y": b"raw"}}, "body.args.x.y", "a bytes value has no JSON form"),
    ({"x": {1: "one"}}, "body.args.x", "object key 1 is not a string"),
    ({"at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}, "body.args.at", "a datetime value has no JSON form"),
]


@pytest.mark.parametrize(("args", "field", "why"), _NOT_JSON)
def test_tool_arguments_json_cannot_hold_are_refused(
    tmp_path: Path, args: dict[str, Any], field: str, why: str
) -> None:
    # Before: accepted, and the canonical JSONL export wrote NaN as null, bytes as base64
    # text and 1 as "1" without a word, so importing the export gave different records.
    record = Record(body=ToolIntent(call_id="c", tool="t", args=args), ts=1)
    with Ledger.create(tmp_path / "l", agent_id="a", fsync="never") as ledger:
        with pytest.raises(InvalidRecord, match=rf"at seq 0, field `{field}`: {why}"):
            ledger.append(record)
        with pytest.raises(InvalidRecord, match=rf"at seq 0, field `{field}`"):
            ledger.append_many([record])
        assert ledger.head()[0] == -1


def test_tool_definition_parameters_are_checked_too(tmp_path: Path) -> None:
    tools = (ToolDefinition(name="a"), ToolDefinition(name="b", parameters={"m": b""}))
    ledger = Ledger.create(tmp_path / "l", agent_id="a", fsync="never")
    with ledger, pytest.raises(InvalidRecord, match=r"field `body.tools\[1\].parameters.m`: a bytes value"):
        ledger.append(Record(body=SystemPolicy(text="p", tools=tools), ts=1))


_ANY_VALUE: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=5)
    | st.binary(max_size=3)
    | st.datetimes(timezones=st.just(dt.UTC)),
    lambda children: st.lists(children, max_size=3)
    | st.tuples(children)
    | st.dictionaries(st.text(max_size=3) | st.integers(0, 9), children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(args=st.dictionaries(st.text(max_size=4), _ANY_VALUE, max_size=3))
def test_whatever_the_ledger_accepts_survives_the_jsonl_form(args: dict[str, Any]) -> None:
    # The canonical JSONL form is lossless: a record the ledger took reads back the same
    # from its JSON line, or the ledger refused it.
    with scratch_dir() as root, Ledger.create(root / "l", agent_id="a", fsync="never") as ledger:
        try:
            ledger.append(Record(body=ToolIntent(call_id="c", tool="t", args=args), ts=1))
        except InvalidRecord:
            assert ledger.head()[0] == -1
            return
        stored = ledger.get(0)
        assert decode_json_record(encode_json_record(stored)) == stored


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        (Message(role="user", text="x"), r"a Message is not a Record; wrap the body: Record\(body=Message\("),
        (None, r"a NoneType is not a Record; build one with Record\(body=..., ts=...\)"),
    ],
)
def test_something_that_is_not_a_record_is_an_invalid_record(
    tmp_path: Path, value: object, hint: str
) -> None:
    # Before: AttributeError ('Message' object has no attribute 'body') from inside append.
    with Ledger.create(tmp_path / "l", agent_id="a", fsync="never") as ledger:
        with pytest.raises(InvalidRecord, match=rf"at seq 0: {hint}"):
            ledger.append(value)  # type: ignore[arg-type]
        with pytest.raises(InvalidRecord, match=rf"at seq 0: {hint}"):
            ledger.append_many([value])  # type: ignore[list-item]
        assert ledger.head()[0] == -1


def test_a_schema_version_no_reader_accepts_is_refused_with_what_to_do(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id="a", fsync="never") as ledger:
        for v in (0, 99):
            with pytest.raises(InvalidRecord, match=r"field `v`: schema version \d+ is not one this holon"):
                ledger.append(msgspec.structs.replace(message(0), v=v))
        assert ledger.append(msgspec.structs.replace(message(0), v=1)) == 0  # an older version still reads
        assert ledger.get(0).v == 1


# --------------------------------------------------------------------------- ts range on append


_OUT_OF_RANGE = [-1, -(2**63), r.MAX_TS + 1, 1_700_000_000_000_000, 2**63 - 1, 2**64 - 1]


def _message(ts: int) -> r.Record:
    return r.Record(body=r.Message(role="user", text="hi"), ts=ts)


def _big_output(ts: int) -> r.Record:
    # Over the blob threshold: append stores a blob before the record is refused.
    return r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", output="x" * 10_000), ts=ts)


@pytest.mark.parametrize("ts", _OUT_OF_RANGE)
def test_append_refuses_a_ts_outside_the_range_and_changes_nothing(tmp_path: Path, ts: int) -> None:
    # A negative ts or a nanosecond clock was appended, and `holon audit` of the ledger
    # then failed with a DuckDB subtraction overflow naming no record.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id="a", fsync="always") as ledger:
        ledger.append(_message(5))
        before, head = tree_bytes(path), ledger.head()
        for record in (_message(ts), _big_output(ts)):
            says = rf"at seq 1, field `ts`: ts {ts} is out of range"
            with pytest.raises(InvalidRecord, match=says) as caught:
                ledger.append(record)
            assert caught.value.field == "ts" and caught.value.where == "seq 1"
            assert "milliseconds since the Unix epoch" in str(caught.value)
            assert ledger.head() == head and tree_bytes(path) == before  # no record, no blob
        assert ledger.append(_message(6)) == 1  # and the writer goes on


def test_the_error_says_what_the_value_probably_is(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id="a", fsync="never") as ledger:
        with pytest.raises(InvalidRecord, match="before 1970"):
            ledger.append(_message(-5))
        with pytest.raises(InvalidRecord, match=r"nanosecond clock\? time.time_ns\(\) // 1_000_000"):
            ledger.append(_message(1_700_000_000_000_000_000))


@pytest.mark.parametrize("ts", [r.MIN_TS, 1, 1_700_000_000_000, r.MAX_TS])
def test_every_ts_in_the_range_is_appended(tmp_path: Path, ts: int) -> None:
    with Ledger.create(tmp_path / "l", agent_id="a", fsync="never") as ledger:
        assert ledger.append(_message(ts)) == 0
        assert ledger.append_many([_message(ts)]) == [1]
        assert [rec.ts for rec in ledger.read()] == [ts, ts]


def test_the_range_is_the_runtimes_clock_range() -> None:
    # One range for every writer: the runtime refuses a clock reading of 10**14 or more.
    assert r.MIN_TS == 0 and r.MAX_TS == 10**14 - 1


@pytest.mark.parametrize("ts", [-1, r.MAX_TS + 1])
def test_append_many_names_the_record_in_the_batch_and_appends_none(tmp_path: Path, ts: int) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id="a", fsync="always") as ledger:
        ledger.append(_message(1))
        before = tree_bytes(path)
        batch = [_message(2), _big_output(3), _message(ts), _message(4)]
        with pytest.raises(InvalidRecord) as caught:
            ledger.append_many(batch)
        assert caught.value.where == "seq 3 (record 2 of the batch)" and caught.value.field == "ts"
        assert f"ts {ts} is out of range" in str(caught.value)
        assert ledger.head()[0] == 0 and tree_bytes(path) == before  # the blob of record 1 is gone too


@pytest.mark.parametrize("ts", [-1, r.MAX_TS + 1, 2**63 - 1])
def test_import_jsonl_names_the_line_of_a_ts_outside_the_range(tmp_path: Path, ts: int) -> None:
    records = [msgspec.structs.replace(_message(1), seq=0), msgspec.structs.replace(_message(ts), seq=1)]
    file = write_jsonl(tmp_path / "in.jsonl", records)
    path = tmp_path / "l"
    with Ledger.create(path, agent_id="a", fsync="never") as ledger:
        before = tree_bytes(path)
        with pytest.raises(InvalidRecord) as caught:
            import_jsonl(file, ledger)
        assert caught.value.where == f"line 2 of {file}" and caught.value.field == "ts"
        assert ledger.head()[0] == -1 and tree_bytes(path) == before


# --------------------------------------------------------------------------- edges of reading and appending


def test_read_with_a_negative_to_seq_is_a_usage_error_not_an_empty_read(tmp_path: Path) -> None:
    # read(0, -1) looked like a slice ("all but the last") and silently yielded nothing.
    with Ledger.create(tmp_path / "l", agent_id="a", fsync="never") as ledger:
        ledger.append_many([_message(n) for n in range(3)])
        with pytest.raises(UsageError, match=r"to_seq -1 must be >= 0 .* head\(\)\[0\] \+ 1 - n"):
            ledger.read(0, -1)
        assert [rec.seq for rec in ledger.read(0, 2)] == [0, 1]
        assert list(ledger.read(2, 1)) == [] and list(ledger.read(7)) == []  # empty ranges stay empty


def test_append_many_of_nothing_appends_nothing_and_returns_no_seqs(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id="a", fsync="always") as ledger:
        ledger.append(_message(1))
        before, head = tree_bytes(path), ledger.head()
        assert ledger.append_many([]) == [] and ledger.append_many(iter(())) == []
        assert ledger.head() == head and tree_bytes(path) == before
        assert ledger.append(_message(2)) == 1


def test_an_empty_ledger_reads_as_empty_for_a_writer_and_a_reader(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id="a", fsync="never") as ledger:
        head = ledger.head()
        assert head[0] == -1 and list(ledger.read()) == [] and list(ledger.read(5)) == []
    with Ledger.open(path, readonly=True) as reader:
        assert reader.head() == head and list(reader.read()) == []
        with pytest.raises(RefNotFound, match="seq 0 is past the end"):
            reader.get(0)


# ---------------------------------------------------------------- a write that fails


def _failing(real: Callable[..., object], nth: int, err: int) -> Callable[..., object]:
    """``real``, raising OSError(err) at its ``nth`` call from this thread (not the sealer's)."""
    calls = 0
    caller = threading.current_thread()

    def fake(*args: object, **kwargs: object) -> object:
        nonlocal calls
        if threading.current_thread() is caller:
            calls += 1
            if calls == nth:
                raise OSError(err, "injected")
        return real(*args, **kwargs)

    return fake


def test_after_a_failed_write_the_writers_head_is_what_its_files_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # head() counted the records of the failed append_many (seq 5 and their hash) while
    # read() and every later open found seq 2: a caller that caught the error was shown
    # records that never reached the disk.
    path = tmp_path / "l"
    ledger = Ledger.create(path, agent_id=AGENT)
    ledger.append_many([message(i) for i in range(3)])
    durable = ledger.head()
    with monkeypatch.context() as patch:
        patch.setattr(store.os, "pwrite", _failing(store.os.pwrite, 1, errno.ENOSPC))
        with pytest.raises(OSError, match="injected"):
            ledger.append_many([message(i) for i in range(3, 6)])
    assert ledger.head() == durable
    assert [rec.seq for rec in ledger.read()] == [0, 1, 2]
    with pytest.raises(UsageError, match=r"an earlier write .* failed"):
        ledger.append(message(3))
    ledger.close()
    with Ledger.open(path) as again:
        assert again.head() == durable


@pytest.mark.parametrize(
    ("name", "err"),
    [("pwrite", errno.ENOSPC), ("write", errno.ENOSPC), ("fdatasync", errno.EIO), ("replace", errno.ENOSPC)],
)
@pytest.mark.parametrize("policy", ["always", "batch"])
def test_a_write_failing_anywhere_in_append_many_acknowledges_nothing_and_reopens_consistent(
    name: str, err: int, policy: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every call of the os function during a batch that rolls segments over and stores
    # blobs fails in turn (the disk fills, or the device errs, there).
    before = [message(100 + i, 300) for i in range(5)]
    batch = [tool_output(i, 3000) if i % 7 == 3 else message(i, 300) for i in range(24)]
    nth = 1
    while True:
        path = tmp_path / f"l{nth}"
        ledger = Ledger.create(path, agent_id=AGENT, segment_bytes=4096, blob_threshold=1000, fsync=policy)  # type: ignore[arg-type]
        ledger.append_many(before)
        ledger.flush()
        with monkeypatch.context() as patch:
            patch.setattr(store.os, name, _failing(getattr(store.os, name), nth, err))
            try:
                ledger.append_many(batch)
                ledger.flush()
            except OSError as exc:
                assert exc.errno == err
                failed = True
            else:
                failed = False
        shown = ledger.head()
        ledger.close()
        if not failed:
            break
        with Ledger.open(path) as again:
            head = again.head()
            assert head[0] >= len(before) - 1 and head == shown, (nth, head, shown)
            got = list(again.read())
            report = again.verify()
            assert report.ok, (nth, str(report))
        assert [rec.ts for rec in got] == [rec.ts for rec in [*before, *batch][: len(got)]]
        for rec in got:
            if isinstance(rec.body, ToolResult) and rec.body.blob is not None:
                with Ledger.open(path, readonly=True) as reader:
                    assert len(reader.get_blob(rec.body.blob.hash)) == rec.body.blob.size
        nth += 1
    assert nth > 1, f"os.{name} was never called"
