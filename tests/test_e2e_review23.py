"""End-to-end review of the day's changes: what a user running the product hit.

Each test names the scenario a user reached it by (an agent's ledger, a CLI command) and
fails on the code before its fix.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

import holon.records as r
from holon.context import Budget, EpisodeIndex, RenderConfig
from holon.projections import ProjectionConfig
from holon.records import PlanStep
from holon.runtime import Agent, AgentConfig
from tests.cli_support import build_ledger, invoke, live_records, write_jsonl
from tests.runtime_support import Tick

# --------------------------------------------------------------------------- a decision revised

#: Small enough that a few turns archive an episode (turn_cap), checkpointed every turn.
REVISING = AgentConfig(
    budget=Budget(context_window=8_000, output_reserve=1_000),
    render=RenderConfig(),
    projection=ProjectionConfig(turn_cap=3),
    checkpoint_every=1,
    checkpoints_kept=2,
)


def _revising_agent(path: Path, turns: int) -> None:
    """An agent that revises its decision every turn (a decision is revised as work goes on)."""
    with Agent.open(path, agent_id="reviser", config=REVISING, clock=Tick()) as agent:
        for i in range(turns):
            with agent.turn(input=f"turn {i}: go on with the parser") as turn:
                turn.context()
                if i == 0:
                    turn.add_work_item("W1", "port the parser", state="active")
                    turn.record_plan([PlanStep(id="s1", text="port it")], work_item_id="W1")
                turn.record_decision("D1", f"parse with approach {i}")
                turn.record_message(f"turn {i} done", role="assistant")


def test_an_episode_that_lists_a_decision_revised_in_it_restores_its_saved_index() -> None:
    # An episode lists every revision of a decision made in it ("D1: a", "D1: b"); the
    # index keeps the last text. The restore's spot check compared each line with that
    # last text, so the first revision made the saved index "stale" and it was rebuilt.
    def episode(i: int, decisions: tuple[str, ...]) -> r.ContextEpisodeRecord:
        return r.ContextEpisodeRecord(
            episode_id=i,
            boundary_reason="turn_cap",
            work_item_id="W1",
            first_turn=i * 3,
            last_turn=i * 3 + 2,
            from_seq=i * 30,
            to_seq=i * 30 + 29,
            objective="port the parser",
            decisions=decisions,
            projection_version=1,
        )

    episodes = [
        episode(0, ("D1: parse by hand",)),
        episode(1, ("D1: parse with a grammar", "D2: keep the tests", "D1: parse with a generator")),
    ]
    restored = EpisodeIndex.restore(EpisodeIndex(episodes).export(), episodes)
    assert isinstance(restored, EpisodeIndex), restored
    assert restored.decisions == {"D1": "parse with a generator", "D2": "keep the tests"}
    assert restored.export() == EpisodeIndex(episodes).export()


def test_an_agent_that_revises_a_decision_reopens_from_its_saved_episode_index(tmp_path: Path) -> None:
    # What a daemon printed at every start: "saved episode index not used (stale: ...
    # another text for decision 'D1'); it is rebuilt", and `holon render` re-tokenized the
    # archive too, though nothing was stale.
    path = tmp_path / "ledger"
    _revising_agent(path, turns=7)
    with Agent.open(path, config=REVISING, clock=Tick(start=2_000_000_000_000)) as agent:
        report = agent.report
        assert report.checkpoint_seq is not None
        archived = list(agent.memory.archive)
        newest = archived[-1]
        revised = len({line.partition(": ")[0] for line in newest.decisions}) < len(newest.decisions)
        assert revised, "the scenario needs a newest episode that lists a decision revised in it"
        assert report.episode_index == "restored", report.episode_index_rejected
        assert agent.episodes.export() == EpisodeIndex(archived).export()


# --------------------------------------------------------------------------- holon prompts --check


def test_a_prompt_outside_any_turn_that_differs_is_not_named_at_turn_none(tmp_path: Path) -> None:
    # `holon append` takes a prompt_rendered outside any turn (a writer other than the
    # runtime); when it does not reproduce, --check's hint was `holon explain L --at-turn None
    # --call 1`, a command click refuses ('None' is not a valid integer).
    path = build_ledger(tmp_path / "l", "boundary_turn_cap")
    records = live_records("boundary_turn_cap")
    last = next(x for x in reversed(records) if isinstance(x.body, r.PromptRendered))
    stray = msgspec.structs.replace(
        last,
        turn=None,
        ts=records[-1].ts + 1_000,
        body=msgspec.structs.replace(last.body, prompt_hash="0" * 64),
    )
    appended = invoke("append", path, write_jsonl(tmp_path / "stray.jsonl", [stray]))
    assert appended.exit_code == 0, appended.output + appended.stderr
    listed = invoke("prompts", path, "--each")
    assert "no turn call 1" in listed.output and "DIFFERS 1" in listed.output
    failed = invoke("prompts", path, "--check")
    assert failed.exit_code == 1, failed.output
    assert "outside any turn" in failed.stderr
    assert "None" not in failed.stderr, failed.stderr
