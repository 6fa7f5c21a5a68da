"""The offline audit as an analyst uses it: its figures against the ledger's, its output clean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from holon.audit import connect, export_parquet, tables
from holon.cli import main
from tests.test_audit_reports import planted
from tests.test_audit_support import write_ledger


@pytest.fixture
def eager_progress_bar(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Audit connections that would draw DuckDB's progress bar at once, not after 2 s.

    DuckDB draws it on the process's stdout (fd 1), a pipe as much as a terminal, for a
    statement running past ``progress_bar_time`` (2 s): a big ledger's load does. Setting
    the time turns the bar on again, so it is set as the connection opens; what the
    connection's own setup statements draw under it is dropped when the tables start
    being built (at 2 s, those take microseconds and draw nothing).
    """
    real_connect, real_build = duckdb.connect, tables._build

    def eager(*args: Any, **kwargs: Any) -> duckdb.DuckDBPyConnection:
        con = real_connect(*args, **kwargs)
        con.execute("SET progress_bar_time = 0")
        return con

    def build(*args: Any, **kwargs: Any) -> None:
        capfd.readouterr()
        real_build(*args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", eager)
    monkeypatch.setattr(tables, "_build", build)


def test_the_audit_writes_no_duckdb_progress_bar_into_its_output(
    tmp_path: Path, eager_progress_bar: None, capfd: pytest.CaptureFixture[str]
) -> None:
    records, _ = planted()
    write_ledger(tmp_path / "a", "planted-a", records)
    result = CliRunner().invoke(
        main, ["audit", str(tmp_path / "a"), "--sql", "SELECT agent_id, records FROM agents", "--csv"]
    )
    written = capfd.readouterr()
    assert result.exit_code == 0, result.output
    assert result.stdout == f"agent_id,records\nplanted-a,{len(records)}\n"
    # What DuckDB wrote to the file descriptors themselves, past click's streams.
    assert (written.out, written.err) == ("", "")


def test_connect_and_export_leave_the_callers_stdout_alone(
    tmp_path: Path, eager_progress_bar: None, capfd: pytest.CaptureFixture[str]
) -> None:
    records, _ = planted()
    write_ledger(tmp_path / "a", "planted-a", records)
    con = connect(tmp_path / "a", workers=1)
    assert con.execute("SELECT count(*) FROM records").fetchall() == [(len(records),)]
    con.close()
    export_parquet(tmp_path / "a", tmp_path / "out", workers=1)
    assert capfd.readouterr() == ("", "")
