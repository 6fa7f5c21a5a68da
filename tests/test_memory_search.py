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
from holon.context.search import terms
from holon.search import MemorySearch, evidence_text, search_terms
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
    # Equal documents are one hit, the newer first, with the count and both refs.
    (equal,) = [h for h in hits if h.ref in ("ledger:2", "ledger:3")]
    assert equal.ref == "ledger:3" and equal.count == 2 and equal.refs == ("ledger:3", "ledger:2")
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
    # The hits fold near-duplicates and weigh several fields: those are the same under any seed too.
    hits = json.loads(outputs[0])
    assert any(h["count"] > 1 for h in hits) and len({h["field"] for h in hits}) >= 4


def test_the_limit_cuts_ties_by_recency_and_must_be_positive() -> None:
    # Six equal documents and one better: the six are one hit, newest first; three that
    # tie on BM25 (other words) are cut by the recency prior.
    records = [_msg(seq, "billing") for seq in range(6)] + [_msg(6, "billing billing invoice")]
    records += [_msg(7 + i, f"billing {word}") for i, word in enumerate(("north", "south", "east"))]
    index = MemorySearch(records)
    hits = index.search("billing invoice", limit=3)
    assert [h.ref for h in hits] == ["ledger:6", "ledger:5", "ledger:9"]
    assert hits[1].refs == tuple(f"ledger:{seq}" for seq in range(5, -1, -1)) and hits[1].count == 6
    # Alone, "billing" weighs more in the shorter documents (BM25 length normalisation).
    assert [h.ref for h in index.search("billing", limit=2, only="evidence")] == ["ledger:5", "ledger:6"]
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


# ---------------------------------------------------------------- identifiers, fields, near-duplicates


def _record(seq: int, body: r.Body, turn: int | None = 1) -> r.Record:
    return r.Record(body=body, ts=seq, turn=turn, seq=seq)


def _intent(seq: int, tool: str, args: dict[str, r.JSON]) -> r.Record:
    return _record(seq, r.ToolIntent(call_id=f"c{seq}", tool=tool, args=args))


def _result(seq: int, output: str, tool: str = "bash") -> r.Record:
    return _record(seq, r.ToolResult(call_id=f"c{seq - 1}", tool=tool, status="ok", output=output))


_IDENTIFIERS = [
    _msg(0, "please review PR #123 before the release"),
    _result(1, "deleted 123 rows from pull requests, 7 left"),
    _msg(2, "the fix is in https://github.com/acme/shop/pull/123 now", turn=2),
    _result(3, "pull 41 done; 123 commits behind"),
    _msg(4, "edit src/shop/cart.py, not the shop cart docs", turn=3),
    _result(5, "the shop: src and cart are fine, py ok"),
    _msg(6, "push the branch feat/search-v2 when green", turn=4),
    _result(7, "search v2 feature flag is off"),
    _result(8, "toolu_01AbC9 failed with E1101 at 9f86d081", tool="pytest"),
]


@pytest.mark.parametrize(
    ("query", "first", "whole"),
    [
        ("#123", "ledger:0", "#123"),  # the request that wrote "#123", not a record with 123 in it
        ("PR #123", "ledger:0", "#123"),
        ("pull/123", "ledger:2", "pull/123"),  # the PR's URL path, inside the pasted URL
        ("src/shop/cart.py", "ledger:4", "src/shop/cart.py"),  # the path, not its words apart
        ("cart.py", "ledger:4", "cart.py"),  # a path by its tail
        ("feat/search-v2", "ledger:6", "feat/search-v2"),  # a branch name
        ("toolu_01AbC9", "ledger:8", None),  # a call id, an error code, a hex id: words whole
        ("E1101", "ledger:8", None),
        ("9f86d081", "ledger:8", None),
    ],
)
def test_identifiers_match_as_written_and_by_their_parts(query: str, first: str, whole: str | None) -> None:
    hits = MemorySearch(_IDENTIFIERS).search(query)
    assert hits[0].ref == first, [(h.ref, h.why) for h in hits]
    if whole is not None:
        assert whole in hits[0].matched and f"{whole} whole" in hits[0].why
        # Its parts still find the records that have only them.
        assert len(hits) > 1


def test_search_terms_keep_an_identifier_whole_and_give_its_parts() -> None:
    found = search_terms("see https://github.com/acme/shop/pull/123 and #45 in src/a.py at 10:30:02")
    assert found[:4] == terms("see https://github.com")
    for term in ("https://github.com/acme/shop/pull/123", "pull/123", "shop/pull", "#45", "src/a.py", "a.py"):
        assert term in found, found
    assert {"github", "acme", "pull", "123", "45", "src", "py"} <= set(found)
    assert "10:30:02" not in found  # times of day are numbers, not identifiers
    # A pull request's URL path is also the #N it is written as in text, and the other way round.
    assert "#123" in found and "#7" in search_terms("gitlab.com/a/b/merge_requests/7")
    hits = MemorySearch([_msg(0, "merged https://github.com/acme/shop/pull/77"), _msg(1, "77 rows")]).search(
        "#77"
    )
    assert hits[0].ref == "ledger:0" and "#77" in hits[0].matched
    assert search_terms("plain words only") == terms("plain words only")


def test_plan_restatements_are_one_hit_with_every_ref_and_the_request_comes_first() -> None:
    # An imported Claude Code session: the operator's request names the PR once; every
    # TodoWrite call restates the plan (an intent, then the plan it declares).
    records = [_msg(0, "Please get PR #123 reviewed and merged today, it blocks the release")]
    steps = [
        "Read the review comments on PR #123",
        "Fix the flaky checkout test",
        "Push and re-request review",
    ]
    for update in range(7):
        seq = len(records)
        todos: list[r.JSON] = [
            {"content": text, "status": "completed" if i < update // 3 else "pending"}
            for i, text in enumerate(steps)
        ]
        records.append(_intent(seq, "TodoWrite", {"todos": todos}))
        plan = tuple(
            r.PlanStep(id=str(i + 1), text=text, status="done" if i < update // 3 else "pending")
            for i, text in enumerate(steps)
        )
        records.append(_record(seq + 1, r.WorkPlan(work_item_id=None, steps=plan)))
        records.append(_result(seq + 2, f"ran step {update}: nothing about the PR"))
    hits = MemorySearch(records).search("#123", limit=12)
    assert hits[0].ref == "ledger:0" and hits[0].field == "request" and hits[0].count == 1
    plans = [h for h in hits if h.source == "work_plan"]
    calls = [h for h in hits if h.source == "tool_intent"]
    plan_seqs = [rec.seq for rec in records if isinstance(rec.body, r.WorkPlan)]
    call_seqs = [rec.seq for rec in records if isinstance(rec.body, r.ToolIntent)]
    # One hit each, counting all seven, every ref newest first; the call that declared a plan
    # is searched as the plan it restates.
    assert [(h.count, h.refs) for h in plans] == [(7, tuple(f"ledger:{s}" for s in reversed(plan_seqs)))]
    assert [(h.count, h.refs) for h in calls] == [(7, tuple(f"ledger:{s}" for s in reversed(call_seqs)))]
    assert {h.field for h in plans + calls} == {"plan"} and "6 near-duplicates folded in" in plans[0].why
    assert len(hits) == 3


def test_a_request_or_decision_outranks_a_plan_and_a_result_outranks_its_calls_echo() -> None:
    step = r.PlanStep(id="1", text="migrate the ledger to zstd level 19")
    records = [
        _msg(0, "migrate the ledger to zstd level 19"),
        _record(1, r.WorkPlan(work_item_id=None, steps=(step,))),
        _record(2, r.Decision(id="d1", text="migrate the ledger to zstd level 19")),
        _record(3, r.WorkPlan(work_item_id=None, steps=(step,))),
        _intent(4, "bash", {"command": "zstd -19 ledger.seg"}),
        _result(5, "zstd -19 ledger.seg: 41% smaller"),
        _intent(6, "bash", {"command": "zstd -19 ledger.seg"}),
    ]
    index = MemorySearch(records)
    hits = index.search("migrate zstd level 19 ledger")
    fields = [h.field for h in hits]
    # The decision and the older request before the newer plan restatements (one hit).
    assert sorted(fields[:2]) == ["decision", "request"] and fields[2] == "plan", [
        (h.ref, h.why) for h in hits
    ]
    assert "in a decision (x1.6)" in hits[fields.index("decision")].why and "in a plan (x0.5)" in hits[2].why
    tools = index.search("zstd -19 ledger.seg", only="evidence")
    assert tools[0].ref == "ledger:5" and tools[0].field == "tool result"
    assert [h.ref for h in tools if h.field == "tool call"] == ["ledger:6"]  # one hit, both calls
    assert next(h for h in tools if h.field == "tool call").refs == ("ledger:6", "ledger:4")


def test_the_recency_prior_orders_equal_matches_and_does_not_bury_a_better_old_one() -> None:
    records = [_msg(0, "rotate the signing keys for billing-api")]
    records += [_result(seq, f"keys listed, signing pending, batch b{seq:02d}") for seq in range(1, 40)]
    hits = MemorySearch(records).search("rotate signing keys billing-api")
    assert hits[0].ref == "ledger:0"  # the best match, the oldest record
    newer = [int(h.ref.split(":")[1]) for h in hits[1:]]
    assert newer == sorted(newer, reverse=True)  # equal matches: the newest first
    assert "recency x1.000" in hits[0].why and "recency x1.1" in hits[1].why


def test_holon_search_shows_why_each_hit_matched_in_text_and_json(tmp_path: Path) -> None:
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(r.encode_json_record(rec) + b"\n" for rec in _IDENTIFIERS))
    imported = invoke("import", ledger, source, "--from", "jsonl")
    assert imported.exit_code == 0, imported.stderr
    text = invoke("search", ledger, "pull/123")
    assert text.exit_code == 0, text.stderr
    assert (
        " 1. ledger:2 " in text.stdout
        and "    why: matched #123, 123, pull, pull/123 (#123, pull/123 whole) in a request" in text.stdout
    )
    found = json.loads(invoke("search", ledger, "pull/123", "--json").stdout)
    assert found[0]["ref"] == "ledger:2" and found[0]["field"] == "request" and found[0]["count"] == 1
    assert found[0]["refs"] == ["ledger:2"] and "pull/123" in found[0]["matched"]
    assert found[0]["why"].startswith(
        "matched #123, 123, pull, pull/123 (#123, pull/123 whole) in a request (x1.6)"
    )
