"""Second ledger review: each test pins what a user did and what the ledger got wrong."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.errors import InvalidRecord, RefNotFound, UsageError
from holon.ledger import Ledger, export_jsonl, import_jsonl
from tests.cli_support import tree_bytes, write_jsonl
from tests.ledger_support import without_ts_check

_OUT_OF_RANGE = [-1, -(2**63), r.MAX_TS + 1, 1_700_000_000_000_000, 2**63 - 1, 2**64 - 1]


def _message(ts: int) -> r.Record:
    return r.Record(body=r.Message(role="user", text="hi"), ts=ts)


def _big_output(ts: int) -> r.Record:
    # Over the blob threshold: append stores a blob before the record is refused.
    return r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", output="x" * 10_000), ts=ts)


# --------------------------------------------------------------------------- ts range on append


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


# --------------------------------------------------------------------------- ledgers from before the check


def _legacy(path: Path, stamps: list[int]) -> None:
    with without_ts_check(), Ledger.create(path, agent_id="a", fsync="never") as ledger:
        ledger.append_many([_message(ts) for ts in stamps])


def test_verify_names_out_of_range_ts_as_a_warning_not_corruption(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _legacy(path, [1, -(2**63), 7, 2**63 - 1, 2**64 - 1])
    with Ledger.open(path, readonly=True) as ledger:
        report = ledger.verify()
        assert [rec.ts for rec in ledger.read()] == [1, -(2**63), 7, 2**63 - 1, 2**64 - 1]  # still reads
    assert report.ok and not report.problems and report.records_checked == 5
    assert report.ts_out_of_range == ((1, -(2**63)), (3, 2**63 - 1), (4, 2**64 - 1))
    assert report.ts_out_of_range_count == 3
    (warning,) = report.warnings
    assert warning.startswith("3 record(s) hold a ts outside 0..99999999999999")
    assert "seq 1 (ts -9223372036854775808), seq 3 (ts 9223372036854775807)" in warning
    assert "warning: 3 record(s)" in str(report)


def test_verify_counts_every_out_of_range_ts_and_names_the_first_few(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _legacy(path, [-n for n in range(1, 26)])
    with Ledger.open(path, readonly=True) as ledger:
        report = ledger.verify()
    assert report.ok and report.ts_out_of_range_count == 25
    assert report.ts_out_of_range == tuple((seq, -(seq + 1)) for seq in range(10))
    assert "seq 9 (ts -10) and 15 more;" in report.warnings[0]


def test_verify_of_an_ordinary_ledger_has_no_ts_warning(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id="a", fsync="never") as ledger:
        ledger.append_many([_message(0), _message(r.MAX_TS)])
        report = ledger.verify()
    assert report.ok and report.warnings == () and report.ts_out_of_range_count == 0


def test_an_export_of_a_legacy_ledger_exports_and_its_import_names_the_line(tmp_path: Path) -> None:
    _legacy(tmp_path / "old", [1, 2, -3])
    with Ledger.open(tmp_path / "old", readonly=True) as old:
        assert export_jsonl(old, tmp_path / "x.jsonl") == 3
    with Ledger.create(tmp_path / "new", agent_id="a", fsync="never") as new:
        with pytest.raises(InvalidRecord, match=r"line 3 of .*x\.jsonl, field `ts`: ts -3 is out of range"):
            import_jsonl(tmp_path / "x.jsonl", new)
        assert new.head()[0] == -1


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


@pytest.mark.parametrize("many", [False, True], ids=["append", "append_many"])
@pytest.mark.parametrize("over", [-1, 0, 1])
def test_a_segment_that_reaches_segment_bytes_exactly_rolls_over(
    tmp_path: Path, many: bool, over: int
) -> None:
    # The active segment is sealed once it holds segment_bytes or more: a first frame that
    # fills it to exactly 1024 bytes starts a new segment at seq 1; one byte less does not.
    path = tmp_path / "l"
    empty = len(r.encode_msgpack_record(r.Record(body=r.Message(role="user", text=""), ts=1, seq=0)))
    text = "x" * (1024 - 64 - 48 - empty - 2 + over)  # segment header, frame overhead, str16 length
    first = r.Record(body=r.Message(role="user", text=text), ts=1)
    assert 64 + 48 + len(r.encode_msgpack_record(msgspec.structs.replace(first, seq=0))) == 1024 + over
    with Ledger.create(path, agent_id="a", fsync="never", segment_bytes=1024) as ledger:
        if many:
            ledger.append_many([first, _message(2)])
        else:
            ledger.append(first)
            ledger.append(_message(2))
    starts = sorted(int(name.name.split(".")[0]) for name in (path / "segments").iterdir())
    assert starts == ([0, 2] if over < 0 else [0, 1])
    with Ledger.open(path) as ledger:  # reopens, reads across and appends on
        assert [rec.seq for rec in ledger.read()] == [0, 1]
        assert ledger.append(_message(3)) == 2
        assert ledger.verify().ok
