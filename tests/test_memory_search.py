"""holon.search.MemorySearch: BM25 over episodes and evidence, deterministic, every hit restorable."""

from __future__ import annotations

import gc
import json
import math
import os
import random
import subprocess
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.search.memory
from holon import records as r
from holon.context import Budget
from holon.context.search import episode_text, terms
from holon.errors import UsageError
from holon.importers import import_transcript
from holon.ledger import Ledger
from holon.projections import (
    DEFAULT_CONFIG,
    PROJECTION_VERSION,
    ProjectionConfig,
    RuntimeState,
    apply_runtime,
)
from holon.replay import append_evidence
from holon.runtime import Agent, blob_text_of
from holon.search import FIELD_WEIGHTS, RECENCY, MemorySearch, evidence_text, search_terms
from holon.testing import run_session, with_real_blobs
from tests.cli_support import invoke, live_records
from tests.runtime_support import Tick

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


# ---------------------------------------------------------------- one hit per turn input


def test_a_turn_input_recorded_as_turn_started_and_as_its_message_is_one_hit() -> None:
    # Importers write each user message twice: TurnStarted(input=text), then the Message.
    # Both were indexed, so every search for a user's words returned two equal hits.
    records = import_transcript(ROOT / "fixtures/importers/claude-code/session.jsonl", "claude-code")
    records = [msgspec.structs.replace(rec, seq=seq) for seq, rec in enumerate(records)]
    started = next(rec for rec in records if isinstance(rec.body, r.TurnStarted) and rec.body.input)
    message = records[started.seq + 1]
    assert isinstance(message.body, r.Message) and message.body.text == started.body.input
    hits = MemorySearch(records).search(started.body.input, limit=25)
    same_text = [h for h in hits if h.snippet == started.body.input.strip()]
    assert [(h.ref, h.source) for h in same_text] == [(f"ledger:{message.seq}", "message")]
    # A turn input without its message is still found, and a later message with the
    # same words (not the input's message) is a hit of its own.
    alone = [
        r.Record(body=r.TurnStarted(trigger="timer", input="rotate the signing keys"), ts=0, turn=1, seq=0),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=0, turn=1, seq=1),
        r.Record(body=r.TurnStarted(trigger="user", input="rotate the signing keys"), ts=0, turn=2, seq=2),
        _msg(3, "rotate the signing keys", turn=2),
        _msg(4, "rotate the signing keys", turn=2),
    ]
    # The two messages are near-duplicates: one hit, with both refs, newest first.
    hits = MemorySearch(alone).search("signing keys")
    assert [h.refs for h in hits] == [("ledger:4", "ledger:3"), ("ledger:0",)]


# ---------------------------------------------------------------- snippets


@pytest.mark.parametrize("where", [0, 20, 60, 119])
def test_the_snippet_of_a_long_line_shows_the_match(where: int) -> None:
    # A one-line JSON output: its snippet was the line's first 159 characters, which
    # did not show the match, so the model could not tell why the hit was found.
    fields = [f'"field{i}": {i}' for i in range(120)]
    fields.insert(where, '"error_code": "E_TIMEOUT"')
    line = "{" + ", ".join(fields) + "}"
    hit = MemorySearch([_msg(0, "unrelated"), _msg(1, f"curl said\n{line}\ndone")]).search("E_TIMEOUT")[0]
    assert hit.ref == "ledger:1" and len(hit.snippet) <= 160
    assert "E_TIMEOUT" in hit.snippet and hit.snippet.strip("…") in line
    assert hit.snippet.startswith("{") == (where < 3)  # an early match keeps the line's head


@pytest.mark.parametrize(
    ("query", "written"), [("strasse", "Straße"), ("cafe", "Café"), ("istanbul", "İSTANBUL")]
)
def test_the_snippet_of_a_long_line_shows_a_match_found_by_its_folded_form(query: str, written: str) -> None:
    # The match was looked for as written in the lowered line, so a term found by its
    # folded form was never located and the snippet fell back to the line's head.
    line = " ".join(f"Eintrag{i} ok" for i in range(40)) + f" Umleitung über die {written} Nord"
    hit = MemorySearch([_msg(0, "unrelated"), _msg(1, line)]).search(query)[0]
    assert hit.ref == "ledger:1" and len(hit.snippet) <= 160
    assert written in hit.snippet and hit.snippet.strip("…") in line


# ---------------------------------------------------------------- ties and hash seeds

_TIES = """
import msgspec
from holon import records as r
from holon.context import EpisodeIndex
from holon.search import MemorySearch

texts = ["Straße gesperrt", "strasse gesperrt", "数据库迁移", "数据库迁移", "deploy billing", "billing dep"]
records, episodes = [], []
for i in range(24):
    text = texts[i % len(texts)]
    if i % 4 == 3:
        episode = r.ContextEpisodeRecord(
            episode_id=len(episodes), boundary_reason="turn_cap", work_item_id=f"w{i % 2}", first_turn=i,
            last_turn=i, from_seq=i, to_seq=i, objective=text, projection_version=1,
        )
        episodes.append(episode)
        records.append(r.Record(body=episode, ts=i, turn=None, seq=i))
    else:
        records.append(r.Record(body=r.Message(role="user", text=text), ts=i, turn=i, seq=i))
memory = MemorySearch(records)
index = EpisodeIndex(episodes)
out = [memory.search(q, limit=7) for q in ("STRASSE", "迁移 数据库", "billing deploy", "gesperrt billing")]
out.append([(h.episode.episode_id, h.score) for q in ("strasse", "deploy") for h in index.search(q)])
print(msgspec.json.encode(out).decode())
"""


def test_ranking_ties_are_broken_the_same_under_any_hash_seed() -> None:
    # Equal scores everywhere (identical texts, an episode and a message at one seq):
    # the order must come from seq, kind and id, never from dict or set order.
    runs = []
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", _TIES], cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
        runs.append(done.stdout)
    assert runs[0] == runs[1] == runs[2]
    for hits in msgspec.json.decode(runs[0])[:4]:
        keys = [(-hit["score"], -hit["seq"], hit["source"] != "episode") for hit in hits]
        assert keys == sorted(keys), "equal scores: the newer record first, an episode before evidence"


# --------------------------------------------------------------------------- tool arguments, BM25 itself


def _call_intent(seq: int, args: dict[str, r.JSON], tool: str = "bash") -> r.Record:
    return r.Record(body=r.ToolIntent(call_id=f"c{seq}", tool=tool, args=args), ts=seq, turn=1, seq=seq)


# ---------------------------------------------------------------- tool calls as text


@pytest.mark.parametrize(
    ("args", "query"),
    [
        ({"command": "cd /repo\npytest -x tests/test_checkout.py"}, "pytest"),
        ({"command": "make lint\tmypy --strict"}, "mypy"),
        ({"path": "app.py", "content": "import os\nimport sys\nrevert_migration()\n"}, "revert_migration"),
        ({"edits": [{"old": "a = 1\nbilling_total = 2", "new": "x"}]}, "billing_total"),
        ({"note": 'say "rollback" now'}, "rollback"),
    ],
)
def test_a_word_starting_a_line_of_a_tool_argument_is_found(args: dict[str, r.JSON], query: str) -> None:
    # Intents were indexed as their arguments' JSON, where a line break or tab inside a
    # string is the escape backslash-n / backslash-t: `cd /repo\npytest` gave the term
    # `npytest`, so the first word of every line of a command or written file was lost.
    index = MemorySearch([_msg(0, "unrelated"), _call_intent(1, args), _msg(2, "other words")])
    hits = index.search(query)
    assert [h.ref for h in hits] == ["ledger:1"], terms(evidence_text(_call_intent(1, args).body) or "")
    assert query in hits[0].matched and query in hits[0].snippet


def test_a_tool_call_is_indexed_by_its_name_argument_names_and_every_value() -> None:
    args: dict[str, r.JSON] = {"timeout": 30, "flags": [True, None], "env": {"DEPLOY_ENV": "staging"}}
    text = evidence_text(r.ToolIntent(call_id="c", tool="run_job", args=args))
    assert text == "run_job\ntimeout: 30\nflags: true\nflags: null\nDEPLOY_ENV: staging"
    # No nesting is too deep (the walk is a loop, not a recursion).
    deep: r.JSON = "bottom_word"
    for _ in range(5_000):
        deep = {"k": [deep]}
    assert MemorySearch([_call_intent(0, {"deep": deep})]).search("bottom_word")[0].ref == "ledger:0"


# ---------------------------------------------------------------- BM25 against a reference


def _reference(records: list[r.Record], query: str, only: str | None) -> list[tuple[str, float]]:
    """Textbook BM25 over every document, weighted by field and recency, ranked in full (ref, score)."""
    docs: list[tuple[bool, int, Counter[str], str, float]] = []
    for rec in records:
        body = rec.body
        if isinstance(body, r.ContextEpisodeRecord):
            counts = Counter(search_terms(episode_text(body)))
            docs.append((True, body.to_seq, counts, f"episode:{body.episode_id}", 1.0))
        else:
            counts = Counter(search_terms(evidence_text(body) or ""))
            weight = FIELD_WEIGHTS["request" if isinstance(body, r.Message) else "tool call"]
            docs.append((False, rec.seq, counts, f"ledger:{rec.seq}", weight))
    # The prior's scale: the newest record indexed (one with a term), by its own seq.
    newest = max([rec.seq for rec, doc in zip(records, docs, strict=True) if doc[2]] + [0])
    docs = [doc for doc in docs if doc[2]]
    if not docs:
        return []
    n, avg = len(docs), sum(doc[2].total() for doc in docs) / len(docs)
    ranked = []
    for is_episode, seq, counts, ref, weight in docs:
        if only is not None and is_episode != (only == "episodes"):
            continue
        score, hit = 0.0, False
        for term in sorted(set(search_terms(query))):
            if term in counts:
                hit = True
                df = sum(1 for doc in docs if term in doc[2])
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                tf = counts[term]
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * counts.total() / avg))
        if hit:
            score *= weight * (1 + RECENCY * seq / max(1, newest))
            ranked.append((-score, -seq, not is_episode, ref))
    return [(item[3], -item[0]) for item in sorted(ranked)]


_WORDS = ("billing", "deploy", "Straße", "strasse", "数据库迁移", "test_checkout", "café", "cafe", "the")


@st.composite
def _ledger(draw: st.DrawFn) -> list[r.Record]:
    records: list[r.Record] = []
    episodes = 0
    for seq in range(draw(st.integers(0, 14))):
        text = " ".join(draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4)))
        kind = draw(st.sampled_from(("message", "message", "intent", "episode")))
        if kind == "episode" and seq:
            episode = r.ContextEpisodeRecord(
                episode_id=episodes,
                boundary_reason="turn_cap",
                work_item_id=None,
                first_turn=1,
                last_turn=1,
                from_seq=0,
                to_seq=seq - 1,  # an episode ends at the evidence before it: a tie on seq
                objective=text,
                projection_version=1,
            )
            episodes += 1
            records.append(r.Record(body=episode, ts=seq, turn=None, seq=seq))
        elif kind == "intent":
            records.append(_call_intent(seq, {"command": text.replace(" ", "\n")}))
        else:
            records.append(_msg(seq, text))
    return records


@settings(max_examples=300, deadline=None)
@given(
    records=_ledger(),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
    limit=st.integers(1, 6),
    only=st.sampled_from((None, "episodes", "evidence")),
    cut=st.integers(0, 14),
)
def test_hits_are_textbook_bm25_ranked_in_full_and_an_index_grown_by_add_is_a_rebuilt_one(
    records: list[r.Record], query: str, limit: int, only: str | None, cut: int
) -> None:
    # The postings, the heap's cut at the limit and the tie rule (newer seq, then the
    # episode) against BM25 computed document by document; and an index searched, then
    # extended (as Agent.search extends it between calls), answers as one built at once.
    grown = MemorySearch(records[:cut])
    grown.search(query)
    for record in records[cut:]:
        grown.add(record)
    rebuilt = MemorySearch(records)
    hits = rebuilt.search(query, limit=limit, only=only)  # type: ignore[arg-type]
    expected = _reference(records, query, only)
    rank = {ref: at for at, (ref, _) in enumerate(expected)}
    # Each hit is the best of its near-duplicates, with its reference score; the hits keep
    # the reference order, and every document ranked above the last hit is one of them.
    assert all(h.refs[0] == h.ref and h.count == len(h.refs) for h in hits)
    assert [rank[h.ref] for h in hits] == sorted(rank[h.ref] for h in hits)
    for hit in hits:
        assert hit.score == pytest.approx(expected[rank[hit.ref]][1], abs=2e-6)
        assert [rank[ref] for ref in hit.refs] == sorted(rank[ref] for ref in hit.refs)
    shown = {ref for h in hits for ref in h.refs}
    if hits:
        assert {ref for ref, _ in expected[: rank[hits[-1].ref] + 1]} <= shown
    assert len(hits) == limit or shown == set(rank)
    assert grown.search(query, limit=limit, only=only) == hits  # type: ignore[arg-type]
    assert len(grown) == len(rebuilt)


# --------------------------------------------------------------------- blob-stored outputs, one-query indexes

# A long tool output as a test run writes it: the failure is at the end, after 4 KB of
# progress lines, so it is not in the 200-character preview a blob keeps inline.
_LOG = "".join(f"tests/test_shop.py::test_case_{i} PASSED\n" for i in range(200)) + (
    "E   ConnectionRefusedError: [Errno 111] connect to payments-gateway:8443 refused\n"
    "FAILED tests/test_checkout.py::test_pay_with_saved_card - ConnectionRefusedError\n"
)


def _agent_with_a_long_output(path: Path) -> int:
    """An agent whose one tool output is over the blob threshold; its tool result's seq."""
    with Agent.open(path, agent_id="a", clock=Tick()) as agent, agent.turn(input="run the tests") as turn:
        turn.tool("bash", {"command": "pytest -x"}).run(lambda: _LOG)
        seq = agent.seq
    with Ledger.open(path, readonly=True) as ledger:
        body = ledger.get(seq).body
    assert isinstance(body, r.ToolResult) and body.blob is not None and not body.output
    return seq


def test_holon_search_finds_words_of_a_blob_stored_output_past_its_preview(tmp_path: Path) -> None:
    # An output over the blob threshold (4 KB) was indexed by its 200-character preview:
    # the error at the end of a long test log, the identifier in a file read whole, were
    # not found ("nothing matches"), though `holon get` restores the very text.
    path = tmp_path / "agent"
    seq = _agent_with_a_long_output(path)
    result = invoke("search", path, "ConnectionRefusedError test_pay_with_saved_card", "--json")
    assert result.exit_code == 0, result.stderr
    (hit,) = json.loads(result.stdout)
    assert hit["ref"] == f"ledger:{seq}" and hit["source"] == "tool_result"
    assert hit["snippet"].startswith("FAILED tests/test_checkout.py::test_pay_with_saved_card")
    assert {"connectionrefusederror", "test_pay_with_saved_card"} <= set(hit["matched"])
    assert invoke("get", path, hit["ref"]).stdout == _LOG


def test_agent_search_and_holon_search_find_a_blob_stored_output_alike(tmp_path: Path) -> None:
    path = tmp_path / "agent"
    seq = _agent_with_a_long_output(path)
    with Agent.open(path) as agent, agent.turn(input="what failed?") as turn:
        (hit,) = agent.search("payments-gateway")
        assert hit.ref == f"ledger:{seq}" and "payments-gateway:8443" in hit.snippet
        # What the model reads from holon_search names it, and holon_get restores it.
        found = turn.recall("holon_search", {"query": "payments-gateway"}).output
        assert found is not None and f"ledger:{seq}" in found
    cli = json.loads(invoke("search", path, "payments-gateway", "--json").stdout)
    assert [h["ref"] for h in cli] == [hit.ref]


def test_a_missing_blob_is_searched_by_its_preview_with_a_warning_not_an_error(tmp_path: Path) -> None:
    # One damaged blob must not make the whole ledger unsearchable; the operator is told.
    path = tmp_path / "agent"
    seq = _agent_with_a_long_output(path)
    with Ledger.open(path, readonly=True) as ledger:
        body = ledger.get(seq).body
    assert isinstance(body, r.ToolResult) and body.blob is not None
    (blob_file,) = (p for p in (path / "blobs").rglob("*") if p.is_file() and body.blob.hash in p.name)
    blob_file.unlink()
    result = invoke("search", path, "test_case_0", "--json")
    assert result.exit_code == 0, result.stderr
    assert [h["ref"] for h in json.loads(result.stdout)] == [f"ledger:{seq}"]  # in the preview
    assert "1 blob-stored tool output(s) could not be read" in result.stderr
    assert "holon verify" in result.stderr
    assert json.loads(invoke("search", path, "ConnectionRefusedError", "--json").stdout) == []


def test_a_huge_blob_is_indexed_by_its_head_and_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    # The cap on what is tokenized keeps the end of a log, where it says how it ended.
    monkeypatch.setattr(holon.search.memory, "BLOB_INDEXED_CHARS", 1_000)
    middle = "filler words " * 500
    text = "alphastart " + middle + "middleword " + middle + "omegaend"
    blob = r.BlobRef(hash="0" * 64, size=len(text), preview=text[:200])
    result = r.ToolResult(call_id="c", tool="bash", status="ok", blob=blob)
    record = r.Record(body=result, ts=1, turn=1, seq=0)
    index = MemorySearch([record], blob_text=lambda ref: text if ref == blob else None)
    assert [h.ref for h in index.search("alphastart")] == ["ledger:0"]
    assert [h.ref for h in index.search("omegaend")] == ["ledger:0"]
    assert index.search("middleword") == []
    assert index.unread_blobs == 0


def _session_records() -> tuple[r.Record, ...]:
    session = run_session(300, Budget(context_window=32_000, output_reserve=4_000), seed=5, render=False)
    return tuple(session.live.records)


@pytest.mark.slow
def test_an_index_built_for_one_query_gives_the_full_index_hits() -> None:
    # holon search built the whole index (every term's postings, every document's text)
    # to answer one query: ~240 MB and half the command's time on a 1M-record ledger.
    # An index built for the query keeps its terms' postings only, and must rank alike.
    records = _session_records()
    full = MemorySearch(records)
    vocabulary = sorted({t for rec in records if (text := evidence_text(rec.body)) for t in terms(text)})
    rng = random.Random(3)
    queries = [" ".join(rng.sample(vocabulary, rng.randint(1, 3))) for _ in range(40)]
    queries += ["invoice", "billing/procs/refund.sql", "pg_dump schema-only", "no-such-word"]
    for query in queries:
        one = MemorySearch(records, for_query=query)
        assert len(one) == len(full)  # every document counts for BM25's statistics
        for only in (None, "episodes", "evidence"):
            for limit in (1, 5, 25):
                assert one.search(query, limit=limit, only=only) == full.search(query, limit=limit, only=only)


def test_an_index_built_for_one_query_refuses_another() -> None:
    # It holds no postings of other terms: it would answer "nothing matches".
    records = _session_records()
    one = MemorySearch(records, for_query="invoice refund")
    assert one.search("refund invoice") == MemorySearch(records).search("refund invoice")
    with pytest.raises(ValueError, match="only the query it was built for"):
        one.search("rollback")


# --------------------------------------------------------------------- a hit's work item, a lean daemon index
# A hit says which work item it was recorded under, and a daemon's index holds neither
# every document's text nor a Python int per posting.


def _agent_with_two_work_items(path: Path) -> tuple[int, int]:
    """An agent that ran `pytest` under work item w-login, then under w-billing: the two results' seqs."""
    with Agent.open(path, agent_id="a", clock=Tick()) as agent:
        with agent.turn(input="fix the login redirect") as turn:
            turn.add_work_item("w-login", "fix the login redirect", state="active")
            turn.tool("bash", {"command": "pytest tests/test_auth.py"}).run(lambda: "3 failed flaky")
            first = agent.seq
        with agent.turn(input="now the invoice totals") as turn:
            turn.finish_work("w-login", reason="fixed")
            turn.add_work_item("w-billing", "fix the invoice totals", state="active")
            turn.tool("bash", {"command": "pytest tests/test_billing.py"}).run(lambda: "1 failed flaky")
            second = agent.seq
    return first, second


def test_an_evidence_hit_names_the_work_item_it_was_recorded_under(tmp_path: Path) -> None:
    # A tool result's hit said only "tool_result at seq N, turn T": the operator and the
    # model (through holon_search) could not tell which work it belonged to, so whether
    # a "flaky" failure of a finished item still matters.
    path = tmp_path / "agent"
    first, second = _agent_with_two_work_items(path)
    result = invoke("search", path, "flaky", "--json")
    assert result.exit_code == 0, result.stderr
    hits = {h["ref"]: h for h in json.loads(result.stdout)}
    assert hits[f"ledger:{first}"]["work_item"] == "w-login"
    assert hits[f"ledger:{second}"]["work_item"] == "w-billing"
    assert hits[f"ledger:{first}"]["provenance"] == f"tool_result at seq {first}, turn 1, work item w-login"
    text = invoke("search", path, "flaky").stdout
    assert f"ledger:{second}  score" in text and "work item w-billing" in text
    with Agent.open(path) as agent, agent.turn(input="which test was flaky?") as turn:
        by_seq = {h.seq: h.work_item for h in agent.search("flaky", only="evidence")}
        assert by_seq[first] == "w-login" and by_seq[second] == "w-billing"
        found = turn.recall("holon_search", {"query": "flaky"}).output
    assert found is not None
    assert f"ledger:{first} — tool_result at seq {first}, turn 1, work item w-login" in found


def test_a_record_outside_any_work_item_says_none() -> None:
    records = [
        r.Record(body=r.Message(role="user", text="hello gateway"), ts=0, turn=0, seq=0),
        r.Record(body=r.WorkItem(id="w1", objective="gateway", state="active"), ts=0, turn=0, seq=1),
        r.Record(body=r.Decision(id="d1", text="gateway port", work_item_id="w0"), ts=0, turn=0, seq=2),
        r.Record(body=r.WorkItemState(id="w1", state="done"), ts=0, turn=0, seq=3),
        r.Record(body=r.Message(role="user", text="gateway again"), ts=0, turn=0, seq=4),
    ]
    hits = {h.seq: h for h in MemorySearch(records).search("gateway", limit=10)}
    assert hits[0].work_item is None and hits[0].provenance == "message at seq 0, turn 0"
    assert hits[1].work_item == "w1"  # a work item record is its own item's
    assert hits[2].work_item == "w0"  # a record naming its item is that item's
    assert hits[4].work_item is None  # w1 finished: nothing active


def _expected_work_items(records: tuple[r.Record, ...], config: ProjectionConfig) -> dict[int, str | None]:
    """Each record's work item by the full runtime fold: named by the record, else active before it."""
    state = RuntimeState()
    expected: dict[int, str | None] = {}
    for record in records:
        body = record.body
        named = getattr(body, "work_item_id", None) if not isinstance(body, r.WorkingMemoryDelta) else None
        if isinstance(body, r.WorkItem | r.WorkItemState):
            named = body.id
        expected[record.seq] = named if named is not None else state.active_work_item_id
        state = apply_runtime(state, record, config)
    return expected


def test_the_work_item_of_every_hit_is_the_full_folds() -> None:
    # The index folds only the work item records; the active item must be the one the
    # whole runtime fold has, record for record.
    session = run_session(400, Budget(context_window=32_000, output_reserve=4_000), seed=5, render=False)
    for records in (tuple(session.live.records), live_records("session_multi_work")):
        expected = _expected_work_items(records, DEFAULT_CONFIG)
        assert len({v for v in expected.values() if v is not None}) >= 2
        index = MemorySearch(records)
        vocabulary = sorted({t for rec in records if (text := evidence_text(rec.body)) for t in terms(text)})
        rng = random.Random(7)
        seen = 0
        for query in rng.sample(vocabulary, min(200, len(vocabulary))):
            for hit in index.search(query, limit=50, only="evidence"):
                assert hit.work_item == expected[hit.seq], (query, hit)
                seen += 1
        assert seen > 500


def test_the_work_item_of_a_reactivated_item_follows_the_ledgers_finished_window() -> None:
    # Reactivating an item finished longer ago than the default window (16) but within
    # the ledger's own (40): the full fold under the ledger's config makes it active.
    config = ProjectionConfig(finished_window=40)
    records: list[r.Record] = []

    def add(body: r.Body) -> None:
        records.append(r.Record(body=body, ts=0, turn=0, seq=len(records)))

    add(r.WorkingMemoryDelta(
        from_revision=0, to_revision=1, reason="turn_completed", changed_fields=(), lines=(),
        evidence_from_seq=0, evidence_to_seq=0, projection_version=PROJECTION_VERSION, projection=config,
    ))  # fmt: skip
    for i in range(20):
        add(r.WorkItem(id=f"w{i}", objective=f"item {i}", state="active"))
        add(r.WorkItemState(id=f"w{i}", state="done"))
    add(r.WorkItemState(id="w0", state="active"))
    add(r.Message(role="user", text="zebra"))
    expected = _expected_work_items(tuple(records), config)
    (hit,) = MemorySearch(records).search("zebra")
    assert hit.work_item == expected[hit.seq] == "w0"


def _session_ledger(path: Path, turns: int = 300) -> list[r.Record]:
    """A generated session written to a ledger at ``path`` (its blob-stored outputs real): its records."""
    session = run_session(turns, Budget(context_window=32_000, output_reserve=4_000), seed=5, render=False)
    with Ledger.create(path, agent_id="a", fsync="never") as ledger:
        ledger.append_many(with_real_blobs(ledger, record) for record in session.live.records)
    with Ledger.open(path, readonly=True) as ledger:
        return list(ledger.read())


def test_a_daemons_search_index_holds_neither_texts_nor_an_int_object_per_posting(tmp_path: Path) -> None:
    # Agent.search's index kept every document's text, a struct per document and a Python
    # int per posting (~500 bytes a document; 340 MB on a 1M-record ledger). It keeps
    # postings in arrays and reads a hit's record back from the ledger instead.
    records = _session_ledger(tmp_path / "L")
    with Agent.open(tmp_path / "L") as agent:
        gc.collect()
        tracemalloc.start()
        try:
            hits = agent.search("invoice", limit=20)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert held / len(records) < 450, held  # ~950 bytes a record before, ~260 now
        assert hits == MemorySearch(records, blob_text=blob_text_of(agent.ledger)).search("invoice", limit=20)


@pytest.mark.slow
def test_hits_read_back_from_the_ledger_are_those_of_an_index_holding_texts(tmp_path: Path) -> None:
    records = _session_ledger(tmp_path / "L", turns=250)
    with Ledger.open(tmp_path / "L", readonly=True) as ledger:
        blob_text = blob_text_of(ledger)
        held = MemorySearch(records, blob_text=blob_text)
        read = MemorySearch(records, blob_text=blob_text, read_record=ledger.get)
        vocabulary = sorted({t for rec in records if (text := evidence_text(rec.body)) for t in terms(text)})
        rng = random.Random(11)
        queries = [" ".join(rng.sample(vocabulary, rng.randint(1, 3))) for _ in range(20)]
        queries += ["blob", "invoice", "feature", "billing/procs/refund.sql", "no-such-word"]
        sources: set[str] = set()
        for query in queries:
            one = MemorySearch(records, blob_text=blob_text, read_record=ledger.get, for_query=query)
            for only in (None, "episodes", "evidence"):
                for limit in (1, 8, 30):
                    want = msgspec.json.encode(held.search(query, limit=limit, only=only))  # type: ignore[arg-type]
                    for index in (read, one):
                        hits = index.search(query, limit=limit, only=only)  # type: ignore[arg-type]
                        assert msgspec.json.encode(hits) == want, (query, only, limit)
                        sources.update(h.source for h in hits)
        # Episodes, blob-stored outputs (their text read from the blob) and messages were hits.
        assert {"episode", "tool_result", "message"} <= sources
        assert any(h.snippet.endswith("#blob") for h in read.search("blob", limit=30))


def test_a_reader_that_gives_another_record_is_refused() -> None:
    # A reader of another ledger would give wrong snippets silently; its record's kind tells.
    records = [r.Record(body=r.Message(role="user", text="deploy the gateway"), ts=0, turn=1, seq=0)]
    other = r.Record(body=r.TurnEnded(outcome="completed"), ts=0, turn=1, seq=0)
    index = MemorySearch(records, read_record=lambda seq: other)
    refused = r"indexed a message record at seq 0, but read_record\(0\) gave a turn_ended"
    with pytest.raises(UsageError, match=refused):
        index.search("gateway")


# ------------------------------------------------------- search over a blob that is not UTF-8


def test_a_blob_stored_output_that_is_not_utf8_is_searched_by_its_text_without_a_damage_warning(
    tmp_path: Path,
) -> None:
    # A build log holding one Latin-1 byte (a file name), stored by a program writing the
    # ledger through the library: `holon search` said it "could not be read (missing or
    # damaged) ... `holon verify` names them", verify found every blob intact, and the
    # error at the end of the log was "nothing matches". `holon get` shows that text.
    path = tmp_path / "ledger"
    log = ("compiling caf\xe9.c\n" * 400 + "error: zorgblat undefined\n").encode("latin-1")
    with Ledger.create(path, agent_id="builder") as ledger:
        blob = ledger.put_blob(log, preview="compiling caf\ufffd.c")
        ts = 1_700_000_000_000
        append_evidence(
            ledger,
            [
                r.Record(body=r.TurnStarted(trigger="user", input="build it"), ts=ts, turn=1),
                r.Record(body=r.ToolIntent(call_id="c1", tool="bash", args={"cmd": "make"}), ts=ts, turn=1),
                r.Record(
                    body=r.ToolResult(call_id="c1", tool="bash", status="error", blob=blob, exit_code=2),
                    ts=ts + 1,
                    turn=1,
                ),
                r.Record(body=r.TurnEnded(outcome="failed"), ts=ts + 2, turn=1),
            ],
        )
    assert invoke("verify", path).exit_code == 0

    found = invoke("search", path, "zorgblat", "--json")

    assert found.exit_code == 0, found.stderr
    assert found.stderr == ""
    hits = json.loads(found.stdout)
    assert [(hit["ref"], hit["snippet"]) for hit in hits] == [("ledger:2", "error: zorgblat undefined")]
    with Agent.open(path, clock=Tick(start=1_800_000_000_000)) as agent:
        assert [hit.ref for hit in agent.search("zorgblat")] == ["ledger:2"]
