"""Export, import and the CLI's passes over episodes stream: memory stays flat however
long the ledger, and the import stays all-or-nothing although it reads its file twice."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from holon.errors import UsageError
from holon.ledger import Ledger, export_jsonl, import_jsonl
from tests.cli_support import invoke
from tests.ledger_support import AGENT, message, peak_memory, tool_output

SMALL, LARGE = 5_000, 20_000


def _ledger(path: Path) -> Ledger:
    # Segments of 256 KiB, so that even the small ledger has several: a reader holds at
    # most two decompressed segments at a time, and a writer seals one.
    return Ledger.create(path, agent_id=AGENT, fsync="never", blob_threshold=1024, segment_bytes=256 << 10)


def _export_and_import(root: Path, records: int) -> tuple[int, int, int]:
    """The peaks of exporting a ledger of ``records`` records, of importing the export, and
    of listing its episodes with ``holon episodes``."""
    with _ledger(root / "L") as ledger:
        ledger.append_many(message(i, 200) for i in range(records))
        ledger.append(tool_output(records, 5000))  # one blob, written beside the file
    with Ledger.open(root / "L", readonly=True) as ledger:
        exported = peak_memory(lambda: export_jsonl(ledger, root / "x.jsonl"))
    with _ledger(root / "M") as target:
        imported = peak_memory(lambda: import_jsonl(root / "x.jsonl", target, require_empty=True))
        assert target.verify().ok
    with Ledger.open(root / "L", readonly=True) as a, Ledger.open(root / "M", readonly=True) as b:
        assert a.head() == b.head()
    listed = peak_memory(lambda: invoke("episodes", root / "L", "--json"))
    return exported, imported, listed


@pytest.mark.slow
def test_export_and_import_hold_a_piece_of_the_file_however_long_it_is(tmp_path: Path) -> None:
    # Before: an export kept every line, then joined them; an import held the file's bytes,
    # its lines and every decoded record at once. Both grew with the ledger: 4x the records
    # took ~4x the memory.
    small = _export_and_import(tmp_path / "small", SMALL)
    large = _export_and_import(tmp_path / "large", LARGE)
    assert large[0] < 1.5 * small[0], ("export", small[0], large[0])
    assert large[1] < 1.5 * small[1], ("import", small[1], large[1])
    # Before, `holon episodes` read every record into a list to keep the episodes.
    assert large[2] < 1.5 * small[2], ("episodes", small[2], large[2])


def test_a_file_changed_while_it_is_checked_appends_nothing(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "L", agent_id=AGENT) as ledger:
        ledger.append_many(message(i) for i in range(3))
        export_jsonl(ledger, tmp_path / "x.jsonl")
    out = tmp_path / "x.jsonl"
    grown = out.read_bytes().splitlines(keepends=True)[-1].replace(b'"seq":2', b'"seq":3')

    def writer_appends(done: int, total: int) -> None:
        # Another process adds a line while the first read checks the file: what the second
        # read would append is no longer what was checked.
        if done == total // 2:
            with out.open("ab") as f:
                f.write(grown)

    with Ledger.create(tmp_path / "M", agent_id=AGENT) as target:
        with pytest.raises(UsageError, match="changed while it was being checked; nothing was appended"):
            import_jsonl(out, target, progress=writer_appends)
        assert target.head()[0] == -1


def test_a_pipe_is_read_twice_through_a_temporary_copy(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "L", agent_id=AGENT) as ledger:
        ledger.append_many(message(i) for i in range(50))
        export_jsonl(ledger, tmp_path / "x.jsonl")
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    data = (tmp_path / "x.jsonl").read_bytes()
    feeder = threading.Thread(target=fifo.write_bytes, args=(data,))
    feeder.start()
    with Ledger.create(tmp_path / "M", agent_id=AGENT) as target:
        assert import_jsonl(fifo, target) == range(50)
    feeder.join()
    with Ledger.open(tmp_path / "L", readonly=True) as a, Ledger.open(tmp_path / "M", readonly=True) as b:
        assert a.head() == b.head()
