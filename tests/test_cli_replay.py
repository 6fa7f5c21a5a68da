"""`holon replay`: memory turn by turn, --until-turn, and --check naming the divergent seq."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.cli import EXIT_CHECK_FAILED, EXIT_OK
from holon.ledger import Ledger
from holon.projections import PROJECTION_VERSION, verify_derivations
from tests.cli_support import build_ledger, invoke, live_records


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_ledger(tmp_path_factory.mktemp("replay") / "L", "session_multi_work")


def _tampered(directory: Path, name: str) -> tuple[Path, int]:
    """Fixture ``name`` with the lines of its second working-memory delta edited; returns its seq."""
    records = list(live_records(name))
    deltas = [i for i, rec in enumerate(records) if isinstance(rec.body, r.WorkingMemoryDelta)]
    index = deltas[1]
    body = records[index].body
    assert isinstance(body, r.WorkingMemoryDelta)
    records[index] = msgspec.structs.replace(
        records[index], body=msgspec.structs.replace(body, lines=(*body.lines, "forged line"))
    )
    with Ledger.create(directory, agent_id=name, fsync="never") as ledger:
        ledger.append_many(records)
    return directory, records[index].seq


def test_replay_prints_every_turn_with_memory_and_prompts(session: Path) -> None:
    result = invoke("replay", session)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.startswith("agent session_multi_work · 2,019 records · 220 turns")
    assert out.count("\nturn ") == 220
    assert "  memory   revision 0 → 1 (" in out
    assert "  prompt   seq " in out and "cache key first:" in out
    assert "compression epoch → 52" in out
    assert "working memory revision 189, compression epoch 52, 52 episode(s) archived" in out


def test_until_turn_stops_after_that_turns_refresh(session: Path) -> None:
    result = invoke("replay", session, "--until-turn", "10", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert [t["turn"] for t in doc["turns"]] == list(range(1, 11))
    with Ledger.open(session, readonly=True) as ledger:
        records = list(ledger.read())
    last = doc["last_seq"]
    assert isinstance(records[last + 1].body, r.TurnStarted) and records[last + 1].turn == 11
    assert doc["revision"] == doc["turns"][-1]["revision"]


def test_replay_json_matches_the_recorded_prompts(session: Path) -> None:
    doc = json.loads(invoke("replay", session, "--json").stdout)
    with Ledger.open(session, readonly=True) as ledger:
        prompts = {rec.seq: rec.body for rec in ledger.read() if isinstance(rec.body, r.PromptRendered)}
    shown = [p for t in doc["turns"] for p in t["prompts"]]
    assert len(shown) == len(prompts) == 186
    for p in shown:
        recorded = prompts[p["seq"]]
        assert p["cache_key"] == recorded.cache_key and p["total_tokens"] == recorded.total_tokens
        assert [s["section"] for s in p["sections"]] == [s.section for s in recorded.sections]
    assert shown[0]["previous_cache_key"] is None
    assert all(b["previous_cache_key"] == a["cache_key"] for a, b in itertools.pairwise(shown))


def test_check_passes_on_an_untouched_ledger(session: Path) -> None:
    result = invoke("replay", session, "--check")
    assert result.exit_code == 0
    assert "replay check ok: 220 post-turn refreshes re-run" in result.stdout
    doc = json.loads(invoke("replay", session, "--check", "--json", "--until-turn", "3").stdout)
    assert doc["check"]["ok"] is True and doc["check"]["refreshes"] == 3


def test_check_fails_with_the_seq_and_a_diff(tmp_path: Path) -> None:
    ledger, seq = _tampered(tmp_path / "L", "boundary_result_checkpoint")
    result = invoke("replay", ledger, "--check")
    assert result.exit_code == 1
    assert f"replay check FAILED at seq {seq}" in result.stdout
    assert "  body.lines:" in result.stdout
    assert '+  "forged line"' in result.stdout.replace("    ", "  ")
    assert "--- re-derived by this holon" in result.stdout and f"+++ ledger seq {seq}" in result.stdout
    line = result.stderr.strip()
    assert line.startswith("holon: check failed:") and f"seq {seq}" in line
    # Without --check the same ledger replays fine (it is intact, just not re-derivable).
    assert invoke("replay", ledger).exit_code == 0
    # And replay up to a turn before the forged delta passes the check.
    assert invoke("replay", ledger, "--check", "--until-turn", "1").exit_code == 0


def test_replay_of_an_empty_ledger(tmp_path: Path) -> None:
    assert invoke("init", tmp_path / "L", "--agent-id", "a").exit_code == 0
    result = invoke("replay", tmp_path / "L", "--check")
    assert result.exit_code == 0
    assert result.stdout.startswith("agent a · 0 records · 0 turns")


# --------------------------------------------------------------------------- what a divergence is said to be
# What `replay --check` and `verify` tell a user whose ledger diverges: derived records of
# another projection version, a ledger written without the refresh, a record missing after
# matching ones.


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
