"""Second adversarial review of the recall tools, as a daemon and the model calling them hit them.

Each test pins a bug found in review (it fails on the code before its fix) or an edge
the review checked and found sound (said so in its docstring).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import holon.runtime.agent as agent_module
from holon import records as r
from holon.ledger import Ledger
from holon.runtime import RECALL_TOOLS, Agent, AgentConfig
from holon.runtime.recall import is_recall
from holon.search import MemoryHit, MemorySearch
from tests.runtime_support import Tick

POLICY = r.SystemPolicy(text="You are a test agent.", tools=RECALL_TOOLS)


def _open(path: Path, config: AgentConfig | None = None) -> Agent:
    return Agent.open(path, agent_id="t1", config=config or AgentConfig(), clock=Tick(), policy=POLICY)


def _fresh_hits(path: Path, query: str) -> list[MemoryHit]:
    """What a search index built now from the whole ledger answers (recall calls left out)."""
    with Ledger.open(path, readonly=True) as ledger:
        index = MemorySearch(record for record in ledger.read(0) if not is_recall(record))
    return index.search(query, limit=25)


def _busy_turn(agent: Agent, i: int) -> None:
    """A turn with a message, a tool call whose output goes to the blob store, and recall calls."""
    with agent.turn(input=f"check the flamingo enclosure {i}") as turn:
        turn.context()
        turn.record_message(f"flamingo count {i} recorded at the loading dock")
        output = "".join(f"flamingo feeding log {i} line {n}\n" for n in range(400))
        turn.tool("bash", {"cmd": f"cat feeding-{i}.log"}).run(lambda: output)
        turn.recall("holon_search", {"query": "flamingo"})
        turn.recall("holon_get", {"ref": "ledger:1"})


# ---------------------------------------------------------------- search: no ledger read per call


def test_a_search_after_the_first_reads_nothing_back_from_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each search read the ledger from the index's last seq, which walks the active segment
    from its start (up to 8 MB, ~15 ms at 3 MB) on every holon_search call, even with nothing
    new. The agent now keeps the records it appends for the next search."""
    path = tmp_path / "l"
    with _open(path) as agent:
        _busy_turn(agent, 0)
        assert agent.search("flamingo")  # the first search builds the index from the ledger

        def no_read(*_args: Any, **_kwargs: Any) -> Any:
            raise AssertionError("a later search read the ledger")

        monkeypatch.setattr(agent.ledger, "read", no_read)
        for i in range(1, 4):
            _busy_turn(agent, i)  # appends, turn ends and their derived records, recall calls
            with agent.turn(input="and now?") as turn:
                seq = turn.record_message(f"zebra number {i} crossed")
                # Fresh in the same turn, right after the append.
                assert [h.ref for h in agent.search(f"zebra number {i}", limit=1)] == [f"ledger:{seq}"]
        live = agent.search("flamingo feeding log", limit=25)
        monkeypatch.undo()
    # The same hits as an index built from the whole ledger, and after a reopen.
    assert live == _fresh_hits(path, "flamingo feeding log")
    with _open(path) as agent:
        assert agent.search("flamingo feeding log", limit=25) == live


def test_more_records_than_the_agent_keeps_are_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sound: past _SEARCH_PENDING records since the last search, the agent drops them and the
    next search reads them back from the ledger, finding the same hits."""
    monkeypatch.setattr(agent_module, "_SEARCH_PENDING", 3)
    path = tmp_path / "l"
    with _open(path) as agent:
        agent.search("warm up")
        for i in range(3):
            _busy_turn(agent, i)
        assert agent._unsearched is None  # dropped: more than 3 records were appended
        live = agent.search("flamingo count", limit=25)
        assert agent._unsearched == []
        fresh = MemorySearch(record for record in agent.ledger.read(0) if not is_recall(record))
        assert live == fresh.search("flamingo count", limit=25)
        _busy_turn(agent, 3)
        (hit,) = agent.search("flamingo count 3", limit=1)
        assert hit.snippet == "flamingo count 3 recorded at the loading dock"
        live = agent.search("flamingo count", limit=25)
    assert live == _fresh_hits(path, "flamingo count")
