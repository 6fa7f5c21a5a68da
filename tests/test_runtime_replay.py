"""End to end: the example daemon's scripted runs replay cold to the same state and prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from holon import records as r
from holon.context import prompt_rendered
from holon.ledger import Ledger
from holon.projections import verify_derivations
from holon.runtime import Agent, AgentConfig
from tests.runtime_support import cold_replay, fold_ledger, load_daemon, same_record

CONFIG = AgentConfig(checkpoint_every=50)


def _run(path: Path, turns: int, prompts: dict[int, str], *, fresh: bool = False) -> object:
    daemon = load_daemon()

    def capture(agent: Agent, line: object) -> None:
        prompts[line.turn] = line.prompt.text  # type: ignore[attr-defined]

    return daemon.run(path, turns=turns, seed=7, fresh=fresh, quiet=True, on_turn=capture, config=CONFIG)


def _check_replay(path: Path, live_prompts: dict[int, str]) -> int:
    """Cold replay re-renders every prompt byte for byte; returns how many turns were checked.

    ``live_prompts`` holds each turn's first prompt (the daemon's); a turn whose rounds
    outgrew it rendered again, and that prompt is checked against its record.
    """
    turns: set[int] = set()
    for record, prompt, _state in cold_replay(path, CONFIG):
        body = record.body
        assert isinstance(body, r.PromptRendered)
        assert same_record(prompt_rendered(prompt), body), f"seq {record.seq}: re-rendered prompt differs"
        assert record.turn is not None
        if record.turn not in turns:
            assert prompt.text == live_prompts[record.turn], (
                f"turn {record.turn}: cold prompt differs from live"
            )
            turns.add(record.turn)
    return len(turns)


def _check_cache_stability(path: Path) -> None:
    """At an unchanged revision and epoch the cacheable prefix and the cache key do not move."""
    previous = None
    reused = 0
    for _record, prompt, _state in cold_replay(path, CONFIG):
        identity = prompt.identity
        if (
            previous is not None
            and not prompt.plan.degraded
            and (
                identity.working_memory_revision,
                identity.compression_epoch,
            )
            == (previous.identity.working_memory_revision, previous.identity.compression_epoch)
        ):
            assert prompt.cache_key == previous.cache_key
            assert prompt.block_text("stable") + prompt.block_text("agent") == previous.block_text(
                "stable"
            ) + previous.block_text("agent")
            reused += 1
        previous = prompt
    assert reused >= 20, f"only {reused} turns kept the previous cacheable prefix"


@pytest.mark.slow
def test_scripted_run_replays_cold_to_the_same_state_and_prompts(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    prompts: dict[int, str] = {}
    _run(path, 200, prompts, fresh=True)
    assert len(prompts) == 200

    assert _check_replay(path, prompts) == 200
    _check_cache_stability(path)
    cold, records = fold_ledger(path, CONFIG)
    with Agent.open(path, config=CONFIG) as agent:
        # Resumed from a checkpoint plus the tail: the same state as the cold fold.
        assert agent.report.checkpoint_seq is not None
        assert agent.projection == cold
        assert agent.report.interrupted_turn is None and agent.unknown_outcomes() == ()
    report = verify_derivations(records, config=CONFIG.projection)
    assert report.ok, report.divergence
    assert report.derived_checked > 0

    # The run covered what the daemon is for: several work items, waits, tasks, blobs, episodes.
    kinds = {rec.kind for rec in records}
    assert {"waiting_intent", "waiting_resolved", "task_started", "task_result", "context_episode"} <= kinds
    assert sum(1 for rec in records if isinstance(rec.body, r.WorkItem)) >= 10
    assert any(isinstance(rec.body, r.ToolResult) and rec.body.blob is not None for rec in records)
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify().ok


@pytest.mark.slow
def test_a_run_split_across_restarts_equals_one_run(tmp_path: Path) -> None:
    whole, split = tmp_path / "whole", tmp_path / "split"
    whole_prompts: dict[int, str] = {}
    split_prompts: dict[int, str] = {}
    _run(whole, 130, whole_prompts, fresh=True)
    for turns in (40, 41, 95, 130):  # clean stops, including one right after a checkpoint
        _run(split, turns, split_prompts)
    assert split_prompts == whole_prompts
    _, whole_records = fold_ledger(whole, CONFIG)
    _, split_records = fold_ledger(split, CONFIG)
    assert [(x.kind, x.turn, x.body) for x in split_records] == [
        (x.kind, x.turn, x.body) for x in whole_records
    ]
    assert _check_replay(split, split_prompts) == 130


@pytest.mark.parametrize("seed", [1, 2])
def test_other_seeds_replay_too(tmp_path: Path, seed: int) -> None:
    daemon = load_daemon()
    prompts: dict[int, str] = {}

    def capture(agent: Agent, line: object) -> None:
        prompts[line.turn] = line.prompt.text  # type: ignore[attr-defined]

    daemon.run(tmp_path / "l", turns=60, seed=seed, fresh=True, quiet=True, on_turn=capture, config=CONFIG)
    assert _check_replay(tmp_path / "l", prompts) == 60
