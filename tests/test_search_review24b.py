"""Review 24b of memory search: a hit says which work item it belonged to, and a daemon's
index holds neither every document's text nor a Python int per posting. Each finding is
pinned by a test that failed before its fix."""

from __future__ import annotations

import gc
import json
import random
import tracemalloc
from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.context import Budget
from holon.context.search import terms
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.projections import (
    DEFAULT_CONFIG,
    PROJECTION_VERSION,
    ProjectionConfig,
    RuntimeState,
    apply_runtime,
)
from holon.runtime import Agent, blob_text_of
from holon.search import MemorySearch, evidence_text
from tests.cli_support import invoke, live_records
from tests.context_session import run_session
from tests.ledger_support import with_real_blobs
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
