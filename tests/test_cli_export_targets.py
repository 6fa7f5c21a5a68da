"""Export never writes into the ledger it reads, never replaces what is not a regular file,
leaves nothing behind when it fails; `--from jsonl` imports only into an empty ledger."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from holon import records as r
from holon.cli import EXIT_OK, EXIT_USAGE
from holon.errors import UsageError
from holon.ledger import Ledger, export_jsonl, import_jsonl
from holon.ledger.files import write_atomic
from tests.cli_support import build_ledger, invoke, tree_bytes, write_jsonl
from tests.ledger_support import child_env


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return build_ledger(tmp_path / "runs", "boundary_turn_cap")


def _segment(path: Path) -> Path:
    return sorted((path / "segments").iterdir())[0]


@pytest.mark.parametrize(
    ("out", "fmt"),
    [
        (_segment, "jsonl"),
        (lambda led: led / "holon-ledger.json", "jsonl"),
        (lambda led: led / "inside.jsonl", "jsonl"),
        (lambda led: led, "parquet"),
        (lambda led: led / "blobs", "parquet"),
    ],
    ids=["segment", "header", "new-file-inside", "ledger-dir-parquet", "blobs-dir-parquet"],
)
def test_an_export_into_its_own_ledger_is_refused_and_changes_nothing(
    ledger: Path, out: object, fmt: str
) -> None:
    target = out(ledger)  # type: ignore[operator]
    before = tree_bytes(ledger)
    result = invoke("export", ledger, target, "--format", fmt)
    assert result.exit_code == 2
    assert f"is inside the ledger {ledger}" in result.stderr
    assert "choose a path outside the ledger directory" in result.stderr
    assert tree_bytes(ledger) == before
    assert invoke("verify", ledger).exit_code == 0


def test_an_export_over_something_that_is_not_a_regular_file_is_refused(ledger: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    directory = tmp_path / "somedir"
    directory.mkdir()
    for target in (fifo, directory):
        result = invoke("export", ledger, target)
        assert result.exit_code == 2
        assert f"{target} exists and is not a regular file" in result.stderr
    # Still a FIFO and an empty directory: not swapped for a file, nothing beside them.
    assert fifo.is_fifo() and list(directory.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "runs", "somedir"]


def test_an_export_to_a_missing_directory_names_it_and_leaves_nothing(ledger: Path, tmp_path: Path) -> None:
    target = tmp_path / "nope" / "out.jsonl"
    result = invoke("export", ledger, target)
    assert result.exit_code == 2
    assert f"directory {tmp_path / 'nope'} does not exist" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_an_export_to_a_parquet_directory_whose_parent_is_missing_names_it(
    ledger: Path, tmp_path: Path
) -> None:
    # The Parquet directory is created, its parents are not (a typo made a new tree).
    result = invoke("export", ledger, tmp_path / "nope" / "pq", "--format", "parquet")
    assert result.exit_code == 2
    assert f"directory {tmp_path / 'nope'} does not exist" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_an_export_over_a_symbolic_link_is_refused_and_the_link_kept(ledger: Path, tmp_path: Path) -> None:
    # `holon export L /dev/stdout` with stdout redirected to a file: the atomic replace
    # renamed the export over the link, so /dev/stdout became a regular file.
    real = tmp_path / "real.jsonl"
    real.write_bytes(b"")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    result = invoke("export", ledger, link)
    assert result.exit_code == 2
    assert f"{link} is a symbolic link" in result.stderr
    assert "pass the path of the file itself" in result.stderr
    assert link.is_symlink() and real.read_bytes() == b""
    assert not (tmp_path / "link.jsonl.blobs").exists()


def test_a_failed_export_removes_the_blob_directory_it_created(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "L", agent_id="a") as led:
        led.append(r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", output="x" * 9000), ts=1))
    target = tmp_path / "out.jsonl"
    # A directory where the atomic replace must put the file: the write fails at the end.
    (tmp_path / "out.jsonl.tmp").mkdir()
    with Ledger.open(tmp_path / "L", readonly=True) as led, pytest.raises(OSError):
        export_jsonl(led, target)
    assert not (tmp_path / "out.jsonl.blobs").exists() and not target.exists()


def test_a_failed_atomic_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "here").mkdir()  # os.replace(file, non-empty-or-any directory) fails
    with pytest.raises(OSError):
        write_atomic(tmp_path / "here", b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here"]


def test_import_from_jsonl_wants_an_empty_ledger(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    assert invoke("export", ledger, out).exit_code == 0
    before = tree_bytes(ledger)
    result = invoke("import", ledger, out, "--from", "jsonl")
    assert result.exit_code == 2
    # Its own export: every record is there already (a finished import looks the same).
    assert "is not empty" in result.stderr and "already holds every record" in result.stderr
    assert tree_bytes(ledger) == before
    # A ledger holding other records.
    assert invoke("init", tmp_path / "other", "--agent-id", "boundary_turn_cap").exit_code == 0
    hello = write_jsonl(tmp_path / "hello.jsonl", [r.Record(body=r.Message(role="user", text="hello"), ts=1)])
    assert invoke("append", tmp_path / "other", hello).exit_code == 0
    before = tree_bytes(tmp_path / "other")
    result = invoke("import", tmp_path / "other", out, "--from", "jsonl")
    assert result.exit_code == 2
    assert "is not empty" in result.stderr and "holon append" in result.stderr
    assert tree_bytes(tmp_path / "other") == before
    # An empty ledger takes it, and it verifies.
    assert invoke("init", tmp_path / "copy", "--agent-id", "boundary_turn_cap").exit_code == 0
    assert invoke("import", tmp_path / "copy", out, "--from", "jsonl").exit_code == 0
    assert invoke("verify", tmp_path / "copy").exit_code == 0


def test_import_jsonl_refuses_derived_records_after_another_head(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    assert invoke("export", ledger, out).exit_code == 0
    with Ledger.create(tmp_path / "other", agent_id="x") as other:
        other.append(r.Record(body=r.Message(role="user", text="hello"), ts=1))
        head = other.head()
        with pytest.raises(UsageError, match=r"is not empty \(head seq 0\) and .* holds derived records"):
            import_jsonl(out, other)
        assert other.head() == head
        # Evidence alone may still be appended after the head (the library allows it).
        hello = r.Record(body=r.Message(role="user", text="hi"), ts=2)
        evidence = write_jsonl(tmp_path / "evidence.jsonl", [hello])
        assert list(import_jsonl(evidence, other)) == [1]


# --------------------------------------------------------------------------- `-`, and another ledger


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_to_dash_is_refused_not_a_file_named_dash(fmt: str, tmp_path: Path) -> None:
    # `holon export L -` wrote a file named "-" (and "-.blobs/") in the working directory
    # and said "wrote N records to -", which reads as standard output.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    done = subprocess.run(
        [sys.executable, "-m", "holon", "export", str(ledger), "-", "--format", fmt],
        capture_output=True,
        env=child_env(),
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert done.returncode == EXIT_USAGE
    assert "not to standard output: pass a path" in done.stderr.decode()
    assert done.stdout == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L"]


def test_export_into_another_ledger_is_refused(tmp_path: Path) -> None:
    source, other = tmp_path / "L", tmp_path / "O"
    assert invoke("init", source, "--agent-id", "a").exit_code == EXIT_OK
    assert invoke("init", other, "--agent-id", "b").exit_code == EXIT_OK
    before = tree_bytes(other)
    result = invoke("export", source, other / "segments" / "x.jsonl")
    assert result.exit_code == EXIT_USAGE
    assert f"inside the ledger {other}" in result.stderr
    assert tree_bytes(other) == before


def test_a_parquet_export_into_another_ledger_is_refused(tmp_path: Path) -> None:
    source, other = tmp_path / "L", tmp_path / "O"
    assert invoke("init", source, "--agent-id", "a").exit_code == EXIT_OK
    assert invoke("init", other, "--agent-id", "b").exit_code == EXIT_OK
    before = tree_bytes(other)
    for out in (other, other / "tables"):
        result = invoke("export", source, out, "--format", "parquet")
        assert result.exit_code == EXIT_USAGE, result.stderr
        assert f"inside the ledger {other}" in result.stderr
    assert tree_bytes(other) == before
