"""Review 24 of recall and search over a long-lived agent's ledger, each finding pinned by a test
that failed before its fix."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import holon.search
from holon import records as r
from holon.context import Budget
from holon.context.search import terms
from holon.ledger import Ledger
from holon.runtime import Agent
from holon.search import MemorySearch, evidence_text
from tests.cli_support import invoke
from tests.context_session import run_session
from tests.runtime_support import Tick

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
    monkeypatch.setattr(holon.search, "BLOB_INDEXED_CHARS", 1_000)
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
