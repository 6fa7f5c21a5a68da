"""holon.search.MemorySearch: BM25 over episodes and evidence, deterministic, every hit restorable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.search import MemorySearch, evidence_text
from tests.cli_support import invoke, live_records

ROOT = Path(__file__).resolve().parent.parent


def _msg(seq: int, text: str, turn: int | None = 1) -> r.Record:
    return r.Record(body=r.Message(role="user", text=text), ts=seq, turn=turn, seq=seq)


def test_rare_terms_rank_first_and_ties_go_to_the_newer_record() -> None:
    index = MemorySearch(
        [
            _msg(0, "deploy the billing service"),
            _msg(1, "the billing invoice totals are wrong"),
            _msg(2, "billing"),
            _msg(3, "billing"),
        ]
    )
    hits = index.search("invoice billing")
    assert hits[0].ref == "ledger:1" and hits[0].matched == ("billing", "invoice")
    # Equal documents score equally; the newer one comes first.
    equal = [h.ref for h in hits if h.ref in ("ledger:2", "ledger:3")]
    assert equal == ["ledger:3", "ledger:2"]
    assert index.search("") == [] and index.search("zebra") == []


def test_episodes_and_evidence_carry_refs_and_provenance() -> None:
    records = live_records("session_multi_work")
    index = MemorySearch(records)
    by_seq = {rec.seq: rec for rec in records}
    hits = index.search("W3 closed by active_work_switched", limit=20)
    assert any(h.source == "episode" for h in hits) and any(h.source != "episode" for h in hits)
    for hit in hits:
        scheme, value = hit.ref.split(":")
        if scheme == "episode":
            episode = next(
                rec.body
                for rec in records
                if isinstance(rec.body, r.ContextEpisodeRecord) and rec.body.episode_id == int(value)
            )
            assert hit.seq == episode.to_seq and hit.turns == (episode.first_turn, episode.last_turn)
            assert f"ledger:{episode.from_seq}..{episode.to_seq}" in hit.provenance
        else:
            record = by_seq[int(value)]
            text = evidence_text(record.body)
            assert text is not None and hit.snippet.rstrip("…") in text
            assert hit.provenance.startswith(f"{record.kind} at seq {record.seq}")
    episodes_only = index.search("feature 3", only="episodes")
    assert episodes_only and {h.source for h in episodes_only} == {"episode"}
    evidence_only = index.search("feature 3", only="evidence")
    assert evidence_only and "episode" not in {h.source for h in evidence_only}


def test_kinds_without_text_are_not_indexed() -> None:
    index = MemorySearch(
        [
            r.Record(body=r.TurnEnded(outcome="completed"), ts=0, turn=1, seq=0),
            r.Record(body=r.ExecutionEnvironment(cwd="/billing"), ts=0, turn=1, seq=1),
        ]
    )
    assert len(index) == 0


_SCRIPT = """
import json, msgspec
from holon.search import MemorySearch
from tests.cli_support import invoke, live_records
hits = MemorySearch(live_records("session_multi_work")).search("pytest billing feature W3 wait", limit=25)
print(msgspec.json.encode(hits).decode())
"""


def test_ranking_is_the_same_under_any_hash_seed() -> None:
    outputs = []
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    in_process = msgspec.json.encode(
        MemorySearch(live_records("session_multi_work")).search("pytest billing feature W3 wait", limit=25)
    ).decode()
    assert json.loads(outputs[0]) == json.loads(in_process)


def test_the_limit_cuts_ties_by_recency_and_must_be_positive() -> None:
    # Six equal documents and one better: the cut falls inside the tie, which the newest win.
    records = [_msg(seq, "billing") for seq in range(6)] + [_msg(6, "billing billing invoice")]
    index = MemorySearch(records)
    assert [h.ref for h in index.search("billing invoice", limit=3)] == ["ledger:6", "ledger:5", "ledger:4"]
    # Alone, "billing" weighs more in the shorter documents (BM25 length normalisation).
    assert [h.ref for h in index.search("billing", limit=2, only="evidence")] == ["ledger:5", "ledger:4"]
    assert index.search("billing", limit=2, only="episodes") == []
    with pytest.raises(ValueError, match="limit must be at least 1"):
        index.search("billing", limit=0)


def test_a_sub_agents_work_is_found_named_by_its_task_and_restored(tmp_path: Path) -> None:
    fixture = ROOT / "fixtures" / "importers" / "claude-code" / "sidechain_inline.jsonl"
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "cc").exit_code == 0
    assert invoke("import", ledger, fixture, "--from", "claude-code").exit_code == 0
    # The sub-agent's failing test run: in no Task result, only in its own tool result.
    found = invoke("search", ledger, "pytest test_empty", "--json")
    assert found.exit_code == 0, found.stderr
    hits = json.loads(found.stdout)
    result = next(h for h in hits if h["source"] == "tool_result")
    assert result["task"] == "toolu_T1" and result["provenance"].endswith(", task toolu_T1")
    assert "FAILED tests/test_parser.py::test_empty" in result["snippet"]
    # Restored byte for byte: the output the sub-agent's call returned, and its record.
    restored = invoke("get", ledger, result["ref"])
    assert restored.stdout == "Exit code 1\nFAILED tests/test_parser.py::test_empty - IndexError"
    record = json.loads(invoke("get", ledger, result["ref"], "--json").stdout)
    body = record["record"]["body"]
    assert body["task_id"] == "toolu_T1" and body["status"] == "error"
    # The main agent's own records name no task.
    own = json.loads(invoke("search", ledger, "Fixing the lexer", "--json").stdout)
    assert own[0]["source"] == "message" and own[0]["task"] is None
