"""Shared pieces of the runtime tests: the example daemon as a module, and cold replay."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import msgspec

from holon import records as r
from holon.context import EpisodeIndex, EvidenceBuffer, Prompt, build_context, prompt_rendered
from holon.ledger import Ledger
from holon.projections import ProjectionConfig, ProjectionState, apply, initial_state
from holon.runtime import Agent, AgentConfig

ROOT = Path(__file__).resolve().parent.parent
START_TS = 1_700_000_000_000


def load_daemon() -> ModuleType:
    """examples/daemon.py, imported as a module (it is a script, not a package)."""
    name = "holon_example_daemon"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "daemon.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Tick:
    """A deterministic clock for tests: each reading is one second later."""

    def __init__(self, start: int = START_TS) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1000
        return self.now


def cold_replay(path: Path, config: AgentConfig) -> Iterator[tuple[r.Record, Prompt, ProjectionState]]:
    """Fold a ledger from scratch and re-render every recorded prompt.

    Yields, for each ``prompt_rendered`` record, the record, the prompt rendered from the
    state just before it (with the budget and render config the agent used), and that
    state. The episode index is rebuilt from the archive at that point.
    """
    with Ledger.open(path, readonly=True) as ledger:
        agent_id = ledger.agent_id
        state = initial_state(config.projection)
        index = EpisodeIndex()
        evidence = EvidenceBuffer(older=ledger.read, blob=ledger.get_blob)
        for record in ledger.read(0):
            if isinstance(record.body, r.PromptRendered):
                prompt = build_context(
                    state, config.budget, config.render, agent_id=agent_id, index=index, history=evidence
                )
                yield record, prompt, state
            state = apply(state, record)
            evidence.add(record)
            if isinstance(record.body, r.ContextEpisodeRecord):
                index.add(record.body)


def fold_ledger(path: Path, config: AgentConfig) -> tuple[ProjectionState, list[r.Record]]:
    """The state of a whole ledger folded from scratch, and its records."""
    with Ledger.open(path, readonly=True) as ledger:
        records = list(ledger.read(0))
    state = initial_state(config.projection)
    for record in records:
        state = apply(state, record)
    return state, records


#: The system policy of the agents prompted_turns runs.
TEST_POLICY = r.SystemPolicy(text="You are a test agent.")


def prompted_turns(
    path: Path, projection: ProjectionConfig, turns: range, *, agent_id: str, checkpoint_every: int = 100
) -> None:
    """Turns of an agent under ``projection``, each recording a decision and rendering its prompt."""
    config = AgentConfig(projection=projection, checkpoint_every=checkpoint_every)
    with Agent.open(path, agent_id=agent_id, config=config, clock=Tick(), policy=TEST_POLICY) as agent:
        for i in turns:
            with agent.turn(input=f"step {i}") as turn:
                if agent.state.active_work_item is None:
                    turn.add_work_item("W1", "build the parser", state="active")
                turn.record_decision(f"d{i}", f"use approach {i}")
                turn.context()
                turn.record_message(f"did step {i}")


def ledger_records(path: Path) -> list[r.Record]:
    """Every record of the ledger at ``path``."""
    with Ledger.open(path, readonly=True) as ledger:
        return list(ledger.read())


def same_record(a: r.PromptRendered, b: r.PromptRendered) -> bool:
    """Two prompt_rendered bodies are identical field by field (msgspec equality)."""
    return msgspec.msgpack.encode(a) == msgspec.msgpack.encode(b)


__all__ = [
    "TEST_POLICY",
    "Tick",
    "cold_replay",
    "fold_ledger",
    "ledger_records",
    "load_daemon",
    "prompt_rendered",
    "prompted_turns",
    "same_record",
]
