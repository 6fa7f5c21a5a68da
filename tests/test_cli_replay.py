"""`holon replay`: memory turn by turn, --until-turn, and --check naming the divergent seq."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.ledger import Ledger
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
