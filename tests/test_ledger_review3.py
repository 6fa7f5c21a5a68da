"""Third ledger review: canonical JSONL imports as they arrive, interrupted imports, failed writes."""

from __future__ import annotations

import errno
import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from holon.errors import InvalidRecord, UsageError
from holon.ledger import Ledger, export_jsonl, import_jsonl, store, writer
from holon.records import Record, ToolResult
from tests.cli_support import invoke
from tests.ledger_support import AGENT, assert_ledger_holds, message, tool_output


def _export(tmp_path: Path, records: list[Record], **settings: int) -> tuple[Path, tuple[int, str]]:
    """Export a ledger holding ``records``; returns the JSONL path and the source's head."""
    with Ledger.create(tmp_path / "src", agent_id=AGENT, fsync="never", **settings) as source:
        source.append_many(records)
        export_jsonl(source, tmp_path / "x.jsonl")
        return tmp_path / "x.jsonl", source.head()


def _blob_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "blobs").rglob("*") if p.is_file())


# ---------------------------------------------------------------- an export edited on Windows


def test_an_export_a_windows_editor_saved_imports_to_the_same_head(tmp_path: Path) -> None:
    # Notepad and friends save with a byte order mark and CRLF line ends, often without a
    # final newline. `holon append` read a BOM; `holon import --from jsonl` refused the
    # whole export at line 1, byte 0.
    records = [message(i) for i in range(4)] + [tool_output(4, 3000)]
    out, head = _export(tmp_path, records, blob_threshold=1000)
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(b"\xef\xbb\xbf" + out.read_bytes().replace(b"\n", b"\r\n").removesuffix(b"\r\n"))
    shutil.copytree(tmp_path / "x.jsonl.blobs", tmp_path / "edited.jsonl.blobs")
    with Ledger.create(tmp_path / "copy", agent_id=AGENT, blob_threshold=1000) as copy:
        assert import_jsonl(edited, copy, require_empty=True) == range(5)
        assert copy.head() == head
    # A byte order mark anywhere else is not one: the line is named.
    inner = tmp_path / "inner.jsonl"
    lines = out.read_bytes().splitlines(keepends=True)
    inner.write_bytes(lines[0] + b"\xef\xbb\xbf" + b"".join(lines[1:]))
    shutil.copytree(tmp_path / "x.jsonl.blobs", tmp_path / "inner.jsonl.blobs")
    with Ledger.create(tmp_path / "other", agent_id=AGENT) as other:
        with pytest.raises(InvalidRecord, match=f"line 2 of {inner}"):
            import_jsonl(inner, other)
        assert other.head()[0] == -1


# ---------------------------------------------------------------- a blob the ledger already holds


def test_a_blob_the_ledger_holds_with_a_misstated_size_is_named_at_its_line_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    # A blob missing from .blobs/ but already in the ledger was taken without its size:
    # append_many then refused the record at "seq 3" (telling an importer to use put_blob),
    # after the import had stored the blob of line 5, which no record names.
    records = [message(i) for i in range(3)] + [tool_output(3, 3000), tool_output(4, 5000)]
    out, _head = _export(tmp_path, records, blob_threshold=1000)
    lines = out.read_text().splitlines()
    line = json.loads(lines[3])
    blob_hash = line["body"]["blob"]["hash"]
    line["body"]["blob"]["size"] += 1
    lines[3] = json.dumps(line, separators=(",", ":"))
    edited = tmp_path / "e.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    shutil.copytree(tmp_path / "x.jsonl.blobs", tmp_path / "e.jsonl.blobs")
    held = (tmp_path / "e.jsonl.blobs" / blob_hash).read_bytes()
    (tmp_path / "e.jsonl.blobs" / blob_hash).unlink()
    with Ledger.create(tmp_path / "copy", agent_id=AGENT, blob_threshold=1000) as copy:
        copy.put_blob(held)
        before = _blob_files(tmp_path / "copy")
        with pytest.raises(InvalidRecord, match=r"says blob .* holds 3001 bytes, .* holds 3000") as refused:
            import_jsonl(edited, copy, require_empty=True)
        assert refused.value.where == f"line 4 of {edited}" and refused.value.field == "body.blob.size"
        assert copy.head()[0] == -1
        assert _blob_files(tmp_path / "copy") == before
    # With the size it has, the blob the ledger holds serves the import.
    lines[3] = json.dumps({**line, "body": {**line["body"], "blob": {**line["body"]["blob"], "size": 3000}}})
    edited.write_text("\n".join(lines) + "\n")
    with Ledger.open(tmp_path / "copy") as copy:
        assert import_jsonl(edited, copy, require_empty=True) == range(5)
        assert copy.verify().ok


# ---------------------------------------------------------------- an interrupted import


def _interrupt_at_rollover(monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    """Raise KeyboardInterrupt (Ctrl-C) when the writer starts its ``nth`` new segment."""
    real = writer.create_segment
    calls = 0

    def create(*args: object, **kwargs: object) -> Path:
        nonlocal calls
        calls += 1
        if calls == nth:
            raise KeyboardInterrupt
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "create_segment", create)


def _interrupted_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, list[Record]]:
    """A copy of an 80-record export whose import was interrupted at its third rollover."""
    # Outputs of 2500 bytes go to blobs; those of 500 stay inline (under the threshold).
    sizes = {4: 2500, 1: 500}
    records = [tool_output(i, sizes[i % 9]) if i % 9 in sizes else message(i, 200) for i in range(80)]
    out, _head = _export(tmp_path, records, segment_bytes=4096, blob_threshold=1000)
    target = tmp_path / "copy"
    ledger = Ledger.create(target, agent_id=AGENT, segment_bytes=4096, blob_threshold=1000)
    with monkeypatch.context() as patch:
        _interrupt_at_rollover(patch, 3)
        with pytest.raises(KeyboardInterrupt):
            import_jsonl(out, ledger, require_empty=True)
    ledger.close()
    return out, target, records


def test_an_import_interrupted_after_a_rollover_continues_when_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first segments of an interrupted import were synced by its rollovers: the
    # ledger held a part of the export, verified, and a second import was refused because
    # the ledger was not empty. Nothing but deleting the ledger got the rest in.
    out, target, _records = _interrupted_import(tmp_path, monkeypatch)
    with Ledger.open(target) as partial:
        held = partial.head()[0] + 1
        assert 0 < held < 80
        assert partial.verify().ok
    with Ledger.open(target) as ledger:
        assert import_jsonl(out, ledger, require_empty=True) == range(held, 80)
    with Ledger.open(tmp_path / "src", readonly=True) as source:
        expected = list(source.read())
    assert_ledger_holds(target, expected)
    with Ledger.open(target) as ledger:
        _refused_unchanged(out, ledger, match=r"already holds every record of .*x\.jsonl")


def test_only_a_ledger_holding_exactly_the_files_first_records_is_continued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, target, records = _interrupted_import(tmp_path, monkeypatch)
    with Ledger.open(target, readonly=True) as partial:
        held = partial.head()[0] + 1
    # The same records under a smaller blob threshold are stored differently (the 500-byte
    # output of seq 1 goes to a blob): not the file's.
    with Ledger.create(tmp_path / "small", agent_id=AGENT, blob_threshold=100) as small:
        small.append_many(records[:held])
        assert small.get(1).body.blob is not None  # type: ignore[union-attr]
        _refused_unchanged(out, small)
    # A record of the file's first ones edited: refused, the ledger unchanged.
    lines = out.read_bytes().splitlines(keepends=True)
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(lines[0].replace(b"record 0", b"record X") + b"".join(lines[1:]))
    shutil.copytree(tmp_path / "x.jsonl.blobs", tmp_path / "edited.jsonl.blobs")
    with Ledger.open(target) as ledger:
        _refused_unchanged(edited, ledger)
        # A file that does not start at seq 0 continues nothing either.
        cut = tmp_path / "cut.jsonl"
        cut.write_bytes(b"".join(lines[1:]))
        shutil.copytree(tmp_path / "x.jsonl.blobs", tmp_path / "cut.jsonl.blobs")
        _refused_unchanged(cut, ledger)


def _refused_unchanged(file: Path, ledger: Ledger, *, match: str = "is not empty") -> None:
    """A copy of ``file`` into ``ledger`` is refused (``match``), leaving the ledger as it was."""
    head = ledger.head()
    with pytest.raises(UsageError, match=match):
        import_jsonl(file, ledger, require_empty=True)
    assert ledger.head() == head


def test_holon_import_run_again_after_an_interruption_appends_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, target, _records = _interrupted_import(tmp_path, monkeypatch)
    with Ledger.open(target, readonly=True) as partial:
        held = partial.head()[0] + 1
    result = invoke("import", target, out, "--from", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert f"the ledger held the first {held} records of {out}" in result.stdout
    assert f"seq {held}..79" in result.stdout
    assert invoke("verify", target).exit_code == 0
    again = invoke("import", target, out, "--from", "jsonl", "--json")
    assert again.exit_code == 2 and "already holds every record" in again.stderr


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
