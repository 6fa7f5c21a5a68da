"""Review 24b of memory search: a hit says which work item it belonged to, and a daemon's
index holds neither every document's text nor a Python int per posting. Each finding is
pinned by a test that failed before its fix."""

from __future__ import annotations

import json
import random
from pathlib import Path

from holon import records as r
from holon.context import Budget
from holon.context.search import terms
from holon.projections import (
    DEFAULT_CONFIG,
    PROJECTION_VERSION,
    ProjectionConfig,
    RuntimeState,
    apply_runtime,
)
from holon.runtime import Agent
from holon.search import MemorySearch, evidence_text
from tests.cli_support import invoke, live_records
from tests.context_session import run_session
from tests.runtime_support import Tick


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
        for query in rng.sample(vocabulary, min(150, len(vocabulary))):
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
