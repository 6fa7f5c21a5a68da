"""`holon memory`, `episodes`, `get`, `search`, `stats` and `verify` on a live fixture ledger."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.audit import connect
from holon.cli import EXIT_OK, EXIT_USAGE
from holon.context.causes import omission_cause
from holon.ledger import Ledger
from holon.replay import memory_at
from holon.runtime import Agent
from tests.cli_support import build_ledger, invoke, live_records, write_jsonl
from tests.ledger_support import AGENT
from tests.runtime_support import Tick


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_ledger(tmp_path_factory.mktemp("inspect") / "L", "session_multi_work")


def _records(path: Path) -> list[r.Record]:
    with Ledger.open(path, readonly=True) as ledger:
        return list(ledger.read())


def test_memory_now_and_at_a_turn(session: Path) -> None:
    records = _records(session)
    doc = json.loads(invoke("memory", session, "--json").stdout)
    expected = msgspec.to_builtins(memory_at(records))
    assert doc == json.loads(msgspec.json.encode(expected))
    assert doc["revision"] == 189 and doc["archived_episodes"] == 52
    text = invoke("memory", session, "--at-turn", "5").stdout
    assert text.startswith("working memory after turn 5 (seq ")
    assert "  active work: W1 (active) — Deliver feature 1 [ledger:4]" in text
    # Turn 5 woke from a wait: refreshed before its prompt, and again after it.
    assert "pending delta: revision 5 → 6" in text
    assert "active episode: W1" in text


def test_memory_says_when_the_revisions_delta_was_already_confirmed(session: Path) -> None:
    records = _records(session)
    turns = sorted({rec.turn for rec in records if isinstance(rec.body, r.TurnEnded)})
    turn = next(t for t in turns if memory_at(records, t).latest_delta is not None)
    view = memory_at(records, turn)
    latest = view.latest_delta
    assert view.pending_delta is None and latest is not None and latest.to_revision == view.revision
    text = invoke("memory", session, "--at-turn", str(turn)).stdout
    assert (
        f"pending delta: none — a prompt confirmed revision {view.revision}; its delta, revision "
        f"{latest.from_revision} → {latest.to_revision} (" in text
    )
    assert all(f"  {line}" in text for line in latest.lines)
    # While a delta is pending, it is the pending one and no confirmed one is reported.
    pending = memory_at(records, 5)
    assert pending.pending_delta is not None and pending.latest_delta is None


def test_memory_of_an_empty_ledger(tmp_path: Path) -> None:
    assert invoke("init", tmp_path / "L", "--agent-id", "a").exit_code == 0
    text = invoke("memory", tmp_path / "L").stdout
    assert "(empty: no work item, plan or facts yet)" in text and "pending delta: none" in text


def test_episodes_lists_and_searches_the_archive(session: Path) -> None:
    archived = [rec.body for rec in _records(session) if isinstance(rec.body, r.ContextEpisodeRecord)]
    listed = json.loads(invoke("episodes", session, "--json").stdout)
    assert [e["episode_id"] for e in listed] == [e.episode_id for e in archived] == list(range(52))
    table = invoke("episodes", session).stdout.splitlines()
    assert table[0].split() == ["id", "turns", "work", "boundary", "evidence", "objective"]
    assert len(table) == 53
    hits = json.loads(invoke("episodes", session, "--search", "W3 feature", "--limit", "3", "--json").stdout)
    assert len(hits) == 3 and hits[0]["episode"]["work_item_id"] == "W3"
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
    assert "no episode matches" in invoke("episodes", session, "--search", "zebra").stdout


def test_get_restores_records_episodes_and_blobs(tmp_path: Path, session: Path) -> None:
    records = _records(session)
    message = next(rec for rec in records if isinstance(rec.body, r.TurnStarted) and rec.body.input)
    assert isinstance(message.body, r.TurnStarted)
    assert invoke("get", session, f"ledger:{message.seq}").stdout_bytes == message.body.input.encode()
    result = next(rec for rec in records if isinstance(rec.body, r.ToolResult))
    assert isinstance(result.body, r.ToolResult)
    assert invoke("get", session, f"ledger:{result.seq}").stdout_bytes == result.body.output.encode()
    episode = json.loads(invoke("get", session, "episode:7").stdout)
    stored = next(
        rec.body
        for rec in records
        if isinstance(rec.body, r.ContextEpisodeRecord) and rec.body.episode_id == 7
    )
    assert episode == json.loads(msgspec.json.encode(stored))
    doc = json.loads(invoke("get", session, f"ledger:{result.seq}", "--json").stdout)
    assert doc["record"]["kind"] == "tool_result" and doc["record"]["seq"] == result.seq
    # A large output moved to the blob store restores through its record and its blob ref.
    output = "line of output\n" * 1000
    big = r.Record(body=r.ToolResult(call_id="c1", tool="bash", status="ok", output=output), ts=1)
    assert invoke("init", tmp_path / "B", "--agent-id", "b").exit_code == 0
    assert invoke("append", tmp_path / "B", write_jsonl(tmp_path / "in.jsonl", [big])).exit_code == 0
    stored_big = _records(tmp_path / "B")[0].body
    assert isinstance(stored_big, r.ToolResult) and stored_big.blob is not None and stored_big.output == ""
    assert invoke("get", tmp_path / "B", "ledger:0").stdout_bytes == output.encode()
    assert invoke("get", tmp_path / "B", f"blob:{stored_big.blob.hash}").stdout_bytes == output.encode()
    blob = json.loads(invoke("get", tmp_path / "B", f"blob:{stored_big.blob.hash}", "--json").stdout)
    assert blob["blob"] == {"size": len(output), "text": output, "base64": None}


def test_search_finds_episodes_and_evidence_with_refs(session: Path) -> None:
    hits = json.loads(invoke("search", session, "feature 3 PR 103", "--json").stdout)
    assert hits and hits == json.loads(invoke("search", session, "feature 3 PR 103", "--json").stdout)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    for hit in hits:
        assert invoke("get", session, hit["ref"]).exit_code == 0
    only = json.loads(invoke("search", session, "feature 3", "--only", "episodes", "--json").stdout)
    assert only and all(h["ref"].startswith("episode:") and h["source"] == "episode" for h in only)
    evidence = json.loads(invoke("search", session, "pytest", "--only", "evidence", "--json").stdout)
    assert evidence and all(h["ref"].startswith("ledger:") for h in evidence)
    text = invoke("search", session, "pytest", "--limit", "2").stdout
    assert text.startswith(" 1. ledger:") and "    why: matched pytest in a tool " in text
    assert "nothing matches" in invoke("search", session, "zebra").stdout


def test_stats_counts_what_the_ledger_holds(session: Path) -> None:
    records = _records(session)
    doc = json.loads(invoke("stats", session, "--json").stdout)
    assert doc["records"] == len(records) == 2019
    kinds: dict[str, int] = {}
    for rec in records:
        kinds[rec.kind] = kinds.get(rec.kind, 0) + 1
    assert doc["by_kind"] == kinds
    assert doc["turns"] == 220 and doc["prompts"] == 186 and doc["episodes"] == 52
    keys = [rec.body.cache_key for rec in records if isinstance(rec.body, r.PromptRendered)]
    assert doc["cache_keys"] == len(set(keys))
    assert doc["cache_key_changes"] == sum(a != b for a, b in itertools.pairwise(keys))
    history = next(s for s in doc["sections"] if s["section"] == "history")
    assert history["min"] <= history["median"] <= history["max"]
    text = invoke("stats", session).stdout
    assert "records by kind:" in text and "prompts: 186" in text


def test_stats_counts_unknown_outcomes(tmp_path: Path) -> None:
    intent = r.Record(body=r.ToolIntent(call_id="c9", tool="bash", args={"command": "deploy"}), ts=1, turn=1)
    assert invoke("init", tmp_path / "L", "--agent-id", "a").exit_code == 0
    assert invoke("append", tmp_path / "L", write_jsonl(tmp_path / "in.jsonl", [intent])).exit_code == 0
    doc = json.loads(invoke("stats", tmp_path / "L", "--json").stdout)
    assert doc["unknown_outcomes"] == 1 and doc["prompts"] == 0 and doc["prompt_tokens"] is None


def test_stats_counts_results_recorded_as_unknown(tmp_path: Path) -> None:
    # What holon.Agent writes on reopen for an intent a crash left open: an `unknown` result.
    records = [
        r.Record(body=r.ToolIntent(call_id="c9", tool="bash", args={"command": "deploy"}), ts=1, turn=1),
        r.Record(body=r.ToolResult(call_id="c9", tool="bash", status="unknown", output="lost"), ts=2, turn=1),
        r.Record(body=r.ToolIntent(call_id="c10", tool="bash", args={"command": "ls"}), ts=3, turn=1),
        r.Record(body=r.ToolResult(call_id="c10", tool="bash", status="ok", output="a"), ts=4, turn=1),
    ]
    assert invoke("init", tmp_path / "L", "--agent-id", "a").exit_code == 0
    assert invoke("append", tmp_path / "L", write_jsonl(tmp_path / "in.jsonl", records)).exit_code == 0
    doc = json.loads(invoke("stats", tmp_path / "L", "--json").stdout)
    assert (doc["tool_calls"], doc["unknown_outcomes"]) == (2, 1)
    assert "unknown outcomes: 1" in invoke("stats", tmp_path / "L").stdout


def test_verify_ok_and_divergent(tmp_path: Path, session: Path) -> None:
    result = invoke("verify", session)
    assert result.exit_code == 0
    assert "frames and chain  ok · 2,019 records" in result.stdout
    assert "derivations       ok · 220 post-turn refreshes re-run" in result.stdout
    doc = json.loads(invoke("verify", session, "--json").stdout)
    assert doc["ok"] is True and doc["storage"]["problems"] == []
    records = list(live_records("boundary_task_rejoined"))
    index = next(i for i, rec in enumerate(records) if isinstance(rec.body, r.ContextEpisodeRecord))
    body = records[index].body
    assert isinstance(body, r.ContextEpisodeRecord)
    records[index] = msgspec.structs.replace(
        records[index], body=msgspec.structs.replace(body, objective="rewritten")
    )
    with Ledger.create(tmp_path / "L", agent_id="x", fsync="never") as ledger:
        ledger.append_many(records)
    result = invoke("verify", tmp_path / "L")
    assert result.exit_code == 1
    assert f"derivations       FAILED at seq {records[index].seq}" in result.stdout
    assert "body.objective" in result.stdout
    assert result.stderr.startswith("holon: check failed: derived records diverge")
    # Under --json the report is on stdout and the failure is a JSON line on stderr.
    result = invoke("verify", tmp_path / "L", "--json")
    assert result.exit_code == 1 and json.loads(result.stdout)["ok"] is False
    error = json.loads(result.stderr)["error"]
    assert error["exit_code"] == 1 and error["kind"] == "check failed" and error["type"] == "CheckFailed"
    assert error["message"].startswith("derived records diverge")


# --------------------------------------------------------------------------- search leaves out recall calls


def test_holon_search_leaves_out_recall_calls_as_agent_search_does(tmp_path: Path) -> None:
    # The model restored a text with holon_get: the CLI found it twice (the original and
    # the recall result), and the model's own search queries as hits.
    path = tmp_path / "agent"
    with Agent.open(path, agent_id="a", clock=Tick()) as agent:
        with agent.turn(input="look at the schema") as turn:
            turn.record_message("the xylophone table holds the invoices")
            seq = agent.seq
        with agent.turn(input="what was that table?") as turn:
            assert turn.recall("holon_get", {"ref": f"ledger:{seq}"}).output is not None
            turn.recall("holon_search", {"query": "xylophone"})
        expected = [hit.ref for hit in agent.search("xylophone")]
    result = invoke("search", path, "xylophone", "--json")
    assert result.exit_code == 0, result.stderr
    assert [hit["ref"] for hit in json.loads(result.stdout)] == expected == [f"ledger:{seq}"]


# --------------------------------------------------------------------------- stats: evictions by cause


def _prompt(turn: int, omitted: tuple[r.Omission, ...]) -> r.Record:
    return r.Record(
        body=r.PromptRendered(
            working_memory_revision=0,
            compression_epoch=0,
            cache_key="k",
            prompt_hash=f"h{turn}",
            total_tokens=100,
            budget=8000,
            estimator="test",
            sections=(r.SectionTokens(section="working_memory", tokens=100),),
            omitted=omitted,
        ),
        ts=1000 + turn,
        turn=turn,
    )


def _ledger_naming_items(path: Path, items: int) -> None:
    """Prompts leaving out a decision, a file and plan steps each, another one every time."""
    with Ledger.create(path, agent_id=AGENT) as ledger:
        for i in range(items):
            ledger.append(
                _prompt(
                    i,
                    (
                        r.Omission(
                            section="working_memory", ref=f"ledger:{i}", reason=f"decision d{i} not shown"
                        ),
                        r.Omission(
                            section="working_memory", ref=f"ledger:{i}", reason=f"file src/m{i}.py not shown"
                        ),
                        r.Omission(
                            section="working_memory",
                            ref=f"ledger:{i}",
                            reason=f"{i + 1} finished plan steps collapsed",
                        ),
                    ),
                )
            )


def test_stats_counts_evictions_by_cause_not_a_row_per_item(tmp_path: Path) -> None:
    # Reasons name their item: `holon stats` printed a row per decision, file and step count
    # (120 rows here, one per item in a real agent's ledger), where the audit counts 3 causes.
    ledger = tmp_path / "L"
    _ledger_naming_items(ledger, 40)
    text = invoke("stats", ledger)
    assert text.exit_code == EXIT_OK, text.stderr
    table = text.stdout.split("evictions by cause", 1)[1].splitlines()[2:]
    assert [line.split()[-1] for line in table] == ["40", "40", "40"]
    assert "decision <id> not shown" in text.stdout
    assert "file <id> not shown" in text.stdout
    assert "N finished plan steps collapsed" in text.stdout
    assert "decision d7" not in text.stdout
    as_json = json.loads(invoke("stats", ledger, "--json").stdout)
    assert as_json["evictions_by_cause"] == {
        "N finished plan steps collapsed": 40,
        "decision <id> not shown": 40,
        "file <id> not shown": 40,
    }
    assert len(as_json["evictions_by_reason"]) == 120  # by reason still there, for scripts


@pytest.mark.parametrize(
    "reason",
    [
        "decision d1 not shown",
        "decision plain not shown",
        "file src/a.py not shown",
        "1,234 finished plan steps collapsed",
        "wait of wait q1 clipped",
        "arguments of c-1 over the cap",
        "result of call_7 without its call",
        "follow-up f-2 not shown",
        "work item W3 clipped",
        "episode 12 not shown (did not fit the episode budget)",
        "file a\u000bb1 not shown",
        "decision d\u00e91 not shown",
        "before the history anchor",
    ],
)
def test_stats_and_the_audit_agree_on_causes(tmp_path: Path, reason: str) -> None:
    # One pattern, two engines (Python's re for stats, DuckDB's RE2 for the audit).
    ledger = tmp_path / "L"
    with Ledger.create(ledger, agent_id=AGENT) as held:
        held.append(_prompt(1, (r.Omission(section="history", ref="ledger:0", reason=reason),)))
    con = connect([ledger])
    try:
        row = con.execute("SELECT cause FROM omissions").fetchone()
    finally:
        con.close()
    assert row is not None
    assert row[0] == omission_cause(reason)


@pytest.mark.parametrize("command", [("search",), ("episodes", "--search")])
@pytest.mark.parametrize("query", ["", "  ", "the", "!!! ???", "🚀", "with the"])
def test_a_query_with_no_words_is_a_usage_error_not_nothing_matches(
    session: Path, command: tuple[str, ...], query: str
) -> None:
    # `holon search L the` printed "nothing matches 'the'" (exit 0): read as "the ledger holds
    # no such thing", when no ledger could match it. holon_search tells the model so too.
    result = invoke(command[0], session, *command[1:], query)
    assert result.exit_code == EXIT_USAGE, result.stdout
    assert result.stdout == ""
    assert f"the query {query!r} has no words to search for" in result.stderr
    found = invoke(command[0], session, *command[1:], "billing", "--json")
    assert found.exit_code == EXIT_OK and found.stdout.startswith("[")
