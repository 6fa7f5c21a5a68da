"""Fourth audit review: Ctrl-C during the load, and what `holon verify --json` says."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from holon import records as r
from holon.audit import connect, tables
from holon.audit.tables import TABLES, Table
from holon.cli import EXIT_CHECK_FAILED, EXIT_CORRUPT, EXIT_INTERRUPTED, EXIT_USAGE, main
from holon.errors import UsageError
from holon.ledger import Ledger
from tests.cli_support import build_ledger, divergent_ledger, invoke, live_records, tree_bytes
from tests.ledger_support import without_ts_check
from tests.test_audit_support import write_ledger

# A statement that runs for hours unless interrupted.
_RUNAWAY = "SELECT sum(a.range * 2 + 1) AS s FROM range(100000000000) a"


def _small_ledger(path: Path) -> Path:
    records = [
        r.Record(body=r.TurnStarted(trigger="user"), ts=1, turn=0),
        r.Record(body=r.Message(role="user", text="hello"), ts=2, turn=0),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=3, turn=0),
    ]
    write_ledger(path, "a", records)
    return path


@pytest.fixture
def runaway_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[duckdb.DuckDBPyConnection]]:
    """One more audit table whose build never ends; yields the load's connections (for the watchdog)."""
    monkeypatch.setitem(TABLES, "runaway", Table("runaway", "a statement that does not end", {}, _RUNAWAY))
    opened: list[duckdb.DuckDBPyConnection] = []
    open_database = tables._open_database

    def recording(database: Any, memory_limit: str | None) -> duckdb.DuckDBPyConnection:
        con = open_database(database, memory_limit)
        opened.append(con)
        return con

    monkeypatch.setattr(tables, "_open_database", recording)
    yield opened


def _interrupting(call: Callable[[], Any], opened: list[duckdb.DuckDBPyConnection]) -> tuple[Any, bool]:
    """Run ``call`` while another thread sends SIGINT until it returns; (its result, watchdog fired).

    Past a minute the watchdog stops the statement another way (``interrupt()`` on the
    load's connection): only a failing test ever waits for it.
    """
    stopped = threading.Event()
    fired: list[bool] = []

    def keep_interrupting() -> None:
        for _ in range(300):
            if stopped.wait(0.2):
                return
            os.kill(os.getpid(), signal.SIGINT)
        fired.append(True)
        for con in opened:
            con.interrupt()

    # Outside a statement, a SIGINT only counts here (a KeyboardInterrupt would end pytest).
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    sender = threading.Thread(target=keep_interrupting)
    sender.start()
    try:
        result = call()
    finally:
        stopped.set()
        sender.join()
        signal.signal(signal.SIGINT, previous)
    return result, bool(fired)


def _leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("holon-audit"))


# --------------------------------------------------------------------------- Ctrl-C in the load


def test_ctrl_c_stops_building_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runaway_table: list[duckdb.DuckDBPyConnection]
) -> None:
    # A table of a big ledger takes DuckDB seconds to build (minutes when it spills); Ctrl-C
    # waited for the statement to end, and then DuckDB's own check of the signal raised
    # RuntimeError("Query interrupted"), which `holon audit` reported as a bug in holon.
    ledger = _small_ledger(tmp_path / "l")
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(spool))
    database = tmp_path / "audit.duckdb"

    def load() -> type[BaseException] | None:
        try:
            connect(ledger, database=database)
        except BaseException as exc:  # which one is the point
            return type(exc)
        return None

    raised, fired = _interrupting(load, runaway_table)
    assert not fired
    assert raised is KeyboardInterrupt
    assert not database.exists() and not Path(f"{database}.wal").exists()  # no half-built file
    assert _leftovers(spool) == []  # the extracted JSON is gone too


def test_ctrl_c_in_the_cli_load_exits_130_and_leaves_no_database_file(
    tmp_path: Path, runaway_table: list[duckdb.DuckDBPyConnection]
) -> None:
    ledger = _small_ledger(tmp_path / "l")
    database = tmp_path / "audit.duckdb"
    runner = CliRunner()
    result, fired = _interrupting(
        lambda: runner.invoke(main, ["audit", str(ledger), "--database", str(database)]), runaway_table
    )
    assert not fired
    assert result.exit_code == EXIT_INTERRUPTED, result.output
    assert result.stderr == "holon: error: interrupted\n"
    assert not database.exists()


def _stuck_chunk(started: Path) -> Callable[..., Any]:
    """An extract_chunk for the worker processes that says it started, then never ends."""

    def stuck(chunk: Any, out_dir: str) -> Any:
        (started / f"{os.getpid()}-{chunk.from_seq}").touch()
        threading.Event().wait()

    return stuck


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers inherit the patch by fork")
def test_ctrl_c_while_workers_extract_stops_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The parent stopped on Ctrl-C, but leaving the process pool waited for every chunk in
    # flight to be extracted (and a SIGINT sent to the parent alone, as by `kill -INT` or a
    # supervisor, never reaches the workers): seconds per chunk on a big ledger.
    records = [r.Record(body=r.Message(role="user", text=f"m{i}"), ts=i) for i in range(400)]
    write_ledger(tmp_path / "l", "a", records, segment_bytes=4 << 10)
    started = tmp_path / "started"
    started.mkdir()
    monkeypatch.setattr(tables, "extract_chunk", _stuck_chunk(started))
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(spool))
    fired: list[bool] = []
    stopped = threading.Event()

    def interrupt_once_extracting() -> None:
        # One SIGINT once a worker is extracting; past a minute, end the workers another way.
        for _ in range(300):
            if stopped.wait(0.2):
                return
            if any(started.iterdir()):
                os.kill(os.getpid(), signal.SIGINT)
                break
        else:
            fired.append(True)
        if not stopped.wait(60):
            fired.append(True)
            for child in multiprocessing.active_children():
                child.kill()

    sender = threading.Thread(target=interrupt_once_extracting)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            connect(tmp_path / "l", workers=2, chunk_records=50)
    finally:
        stopped.set()
        sender.join()
    assert not fired
    assert multiprocessing.active_children() == []
    assert _leftovers(spool) == []


# --------------------------------------------------------------------------- holon verify --json


def _scenario(name: str, path: Path) -> int:
    """Build a ledger with one kind of finding; returns the exit code `holon verify` owes it."""
    if name == "torn_tail":
        build_ledger(path, "boundary_turn_cap")
        segment = sorted((path / "segments").glob("*.seg"))[-1]
        with segment.open("ab") as handle:
            handle.write(b"\x10\x00\x00")
        return 0
    if name == "ts_out_of_range":
        records = [
            r.Record(body=r.Message(role="user", text=f"m{i}"), ts=ts) for i, ts in enumerate([-5, 1, 2**62])
        ]
        with without_ts_check():
            write_ledger(path, "a", records)
        return 0
    if name == "storage":
        with Ledger.create(path, agent_id="a") as ledger:
            ledger.append(
                r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", output="x" * 10_000), ts=1)
            )
            ((_, blob),) = list(ledger.blobs.hashes())
        blob.write_bytes(b"not zstd")
        return EXIT_CORRUPT
    assert name == "derivation"
    divergent_ledger(path)
    return EXIT_CHECK_FAILED


@pytest.mark.parametrize("name", ["torn_tail", "ts_out_of_range", "storage", "derivation"])
def test_every_verify_finding_is_in_the_json_in_one_shape(tmp_path: Path, name: str) -> None:
    # The out-of-range ts was only a sentence in storage.warnings: no seq a script could act
    # on, and no kind to tell it from the torn tail's sentence beside it.
    code = _scenario(name, tmp_path / "l")
    text = invoke("verify", tmp_path / "l")
    as_json = invoke("verify", tmp_path / "l", "--json")
    assert text.exit_code == as_json.exit_code == code, text.output
    doc = json.loads(as_json.stdout)
    (finding,) = doc["findings"]
    assert set(finding) == {"severity", "kind", "file", "offset", "decompressed", "seq", "message"}
    assert finding["kind"] == name
    assert finding["severity"] == ("warning" if code == 0 else "error")
    assert doc["ok"] is (code == 0)
    # The same finding, in the same words, is in the text report (stdout or its stderr warning).
    assert finding["message"] in text.stdout + text.stderr.replace("\n", " ")
    if finding["offset"] is not None:
        assert f"byte {finding['offset']}" in text.stdout
    if finding["seq"] is not None:
        assert f"seq {finding['seq']}" in text.stdout


def test_out_of_range_ts_in_json_and_in_the_text_report(tmp_path: Path) -> None:
    _scenario("ts_out_of_range", tmp_path / "l")
    doc = json.loads(invoke("verify", tmp_path / "l", "--json").stdout)
    assert doc["storage"]["ts_out_of_range"] == {
        "count": 2,
        "examples": [{"seq": 0, "ts": -5}, {"seq": 2, "ts": 2**62}],
    }
    (finding,) = doc["findings"]
    assert (finding["kind"], finding["seq"]) == ("ts_out_of_range", 0)
    text = invoke("verify", tmp_path / "l")
    # Not only on stderr: `holon verify L > report.txt` kept no trace of them.
    assert (
        "record times      2 record(s) hold a ts outside 0..99999999999999, the first at seq 0" in text.stdout
    )
    clean = json.loads(invoke("verify", build_ledger(tmp_path / "c", "boundary_turn_cap"), "--json").stdout)
    assert clean["findings"] == [] and clean["storage"]["ts_out_of_range"] is None


def test_verify_says_when_the_last_refresh_is_still_to_be_appended(tmp_path: Path) -> None:
    # --json said pending_refresh: true; the text report said nothing of it.
    records = live_records("boundary_turn_cap")
    derived = (r.WorkingMemoryDelta, r.ContextEpisodeRecord)
    end = next(
        i
        for i, rec in enumerate(records)
        if isinstance(rec.body, r.TurnEnded) and isinstance(records[i + 1].body, derived)
    )
    with Ledger.create(tmp_path / "l", agent_id="a", fsync="never") as ledger:
        ledger.append_many(records[: end + 1])  # the writer died before the refresh's records
    result = invoke("verify", tmp_path / "l")
    assert result.exit_code == 0, result.output
    assert json.loads(invoke("verify", tmp_path / "l", "--json").stdout)["derivations"]["pending_refresh"]
    assert "derived records equal · the last turn's refresh is still to be appended" in result.stdout


# --------------------------------------------------------------------------- read-only


@pytest.mark.parametrize("inside", ["audit.duckdb", "segments/audit.duckdb"])
def test_a_database_file_inside_the_ledger_is_refused_and_the_ledger_untouched(
    tmp_path: Path, inside: str
) -> None:
    # `holon audit L --database L/segments/audit.duckdb` wrote the DuckDB file (and its
    # .wal) into the ledger being audited, which audit promises never to write to.
    ledger = _small_ledger(tmp_path / "l")
    before = tree_bytes(ledger)
    result = invoke("audit", ledger, "--database", ledger / inside)
    assert result.exit_code == EXIT_USAGE, result.output
    assert f"audit database {ledger / inside} is inside the ledger {ledger}" in result.stderr
    assert tree_bytes(ledger) == before
    with pytest.raises(UsageError):
        connect([tmp_path / "other-ledger-first", ledger], database=ledger / inside)
    assert tree_bytes(ledger) == before
