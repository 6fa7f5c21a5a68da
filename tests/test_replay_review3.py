"""Third review of replay: what `replay --check` and `verify` tell a user whose ledger diverges.

Each test names the bug it pins down (it fails on the code before its fix).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.cli import EXIT_CHECK_FAILED, EXIT_OK
from holon.ledger import Ledger
from holon.projections import PROJECTION_VERSION, verify_derivations
from tests.cli_support import invoke, live_records


def _ledger(path: Path, records: list[r.Record]) -> Path:
    with Ledger.create(path, agent_id="a", fsync="never") as ledger:
        ledger.append_many(records)
    return path


def _versioned(version: int) -> list[r.Record]:
    """A fixture ledger whose derived records say they were derived by projection ``version``."""
    out = []
    for record in live_records("boundary_result_checkpoint"):
        body = record.body
        if isinstance(body, r.WorkingMemoryDelta | r.ContextEpisodeRecord):
            body = msgspec.structs.replace(body, projection_version=version)
        out.append(msgspec.structs.replace(record, body=body))
    return out


def _failure(path: Path) -> str:
    """The error line `replay --check` ends with; `verify` must end with the same one."""
    replayed, verified = invoke("replay", path, "--check"), invoke("verify", path)
    assert replayed.exit_code == verified.exit_code == EXIT_CHECK_FAILED
    line = replayed.stderr.strip().splitlines()[-1]
    assert line == verified.stderr.strip().splitlines()[-1]
    return line


@pytest.mark.parametrize("delta", [-1, 1])
def test_derived_records_of_another_projection_version_are_named_as_such_not_as_an_edit(
    tmp_path: Path, delta: int
) -> None:
    # A ledger an older holon derived failed with "written by different projection code, or
    # edited (or derived under a non-default ProjectionConfig ...)": three guesses, one of
    # them tampering, when the record itself says which rules derived it.
    records = _versioned(PROJECTION_VERSION + delta)
    first = next(rec for rec in records if rec.kind in r.DERIVED_KINDS)
    line = _failure(_ledger(tmp_path / "L", records))
    assert f"derived records diverge at seq {first.seq} (mismatch); " in line
    assert f"the {first.kind} there was derived by projection version {PROJECTION_VERSION + delta}; " in line
    assert f"this holon derives version {PROJECTION_VERSION}" in line
    assert "edited" not in line and "ProjectionConfig" not in line
    if delta < 0:
        assert "an older holon wrote the ledger" in line and "which is not damage" in line
        assert "with the holon release that wrote them" in line
    else:
        assert "a newer holon wrote the ledger" in line
    # Without --check the ledger still replays: its derived records are folded as written.
    assert invoke("replay", tmp_path / "L").exit_code == EXIT_OK


def test_a_ledger_written_without_the_refresh_says_so(tmp_path: Path) -> None:
    # Evidence appended with Ledger.append alone (a daemon writing its own records): no
    # refresh ever ran, yet the failure blamed other projection code or an edit.
    records = []
    for turn in (1, 2):
        item = r.WorkItem(id=f"W{turn}", objective="o", state="active")
        records += [
            r.Record(body=r.TurnStarted(trigger="user", input=f"do {turn}"), ts=turn * 10, turn=turn),
            r.Record(body=item, ts=turn * 10 + 1, turn=turn),
            r.Record(body=r.TurnEnded(outcome="completed"), ts=turn * 10 + 2, turn=turn),
        ]
    path = _ledger(tmp_path / "L", records)
    line = _failure(path)
    assert "diverge at seq 3 (missing); the ledger holds no derived record before seq 3" in line
    assert "without the post-turn refresh" in line and "`holon append`" in line
    assert "edited" not in line
    # What it says to do works: the same evidence appended with `holon append` verifies.
    assert invoke("export", path, tmp_path / "e.jsonl").exit_code == EXIT_OK
    assert invoke("init", tmp_path / "M", "--agent-id", "a").exit_code == EXIT_OK
    assert invoke("append", tmp_path / "M", tmp_path / "e.jsonl").exit_code == EXIT_OK
    assert invoke("verify", tmp_path / "M").exit_code == EXIT_OK


def test_a_missing_record_after_matching_ones_keeps_the_general_cause(tmp_path: Path) -> None:
    # Only a ledger with no derived record before the gap is one written without the refresh;
    # a delta dropped later in an otherwise derived ledger is an edit (or other code).
    records = list(live_records("session_multi_work"))
    derived = [i for i, rec in enumerate(records) if rec.kind in r.DERIVED_KINDS]
    # A refresh's only derived record, evidence right after it: its absence is "missing".
    alone = next(
        i
        for i in derived[1:]
        if records[i - 1].kind == "turn_ended" and records[i + 1].kind not in r.DERIVED_KINDS
    )
    del records[alone]
    records = [msgspec.structs.replace(rec, seq=seq) for seq, rec in enumerate(records)]
    report = verify_derivations(records)
    assert report.divergence is not None and report.divergence.kind == "missing" and report.derived_checked
    line = _failure(_ledger(tmp_path / "L", records))
    assert "the ledger was written by different projection code, or edited" in line
