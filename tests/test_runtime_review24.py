"""A daemon that runs for days in one process stays flat: findings of review 24, each pinned by a test.

Each test counts what a long run would accumulate or walk (characters held, entries
visited), never seconds, so it does not depend on the machine's speed.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator
from pathlib import Path

import msgspec
import pytest

from holon.context import CurrentInput, inputs_from_state, select_episodes
from holon.context import render as render_module
from holon.context.estimator import DEFAULT_ESTIMATOR, get_estimator
from holon.context.render import clear_count_cache, token_counter
from holon.runtime import Agent
from tests.runtime_support import Tick


def _held_chars() -> int:
    return sum(len(text) for memo in render_module._COUNTS.values() for text in memo)


def test_the_token_count_memo_holds_a_bounded_number_of_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    # The memo was bounded by count only (4096 texts of up to 1 Mi characters each): a
    # daemon recording one 500 KB tool output per turn (each is counted as a round) held
    # 136 Mi characters of old outputs after 300 turns, and its RSS grew with them. The
    # bound (16 Mi characters) is lowered here so the test counts 3 Mi, not 24 Mi.
    cap = 1 << 20
    monkeypatch.setattr(render_module, "_MEMO_TOTAL_CHARS", cap, raising=False)
    clear_count_cache()
    count = token_counter(DEFAULT_ESTIMATOR)
    estimator = get_estimator(DEFAULT_ESTIMATOR)
    size = 1 << 16
    texts = [f"output {i}\n" + "log line with words\n" * (size // 20) for i in range(48)]
    for text in texts:
        assert count(text) == estimator.count(text)
    assert _held_chars() <= cap
    # Still a memo: the newest texts are kept (consecutive renders count the same ones).
    newest = render_module._COUNTS[(estimator.name, estimator.version)]
    assert texts[-1] in newest and texts[-2] in newest
    clear_count_cache()
    assert _held_chars() == 0


class _CountingStates(dict[str, str]):
    """A work-state map that counts the entries read by walking it."""

    walked = 0

    def items(self) -> ItemsView[str, str]:
        _CountingStates.walked += len(self)
        return super().items()

    def __iter__(self) -> Iterator[str]:
        _CountingStates.walked += len(self)
        return super().__iter__()


def test_episode_selection_does_not_walk_every_work_item_the_agent_ever_had(tmp_path: Path) -> None:
    # Each selection built the set of every abandoned work item the episode index knows
    # (EpisodeIndex.abandoned_work walks them all), so a daemon that opens a work item per
    # task paid, at every render that re-selects, for every item of its whole life.
    items = 40
    with Agent.open(tmp_path / "l", agent_id="rv24", clock=Tick()) as agent:
        for i in range(items):
            with agent.turn(input=f"task {i}: migrate shard {i}") as turn:
                turn.add_work_item(f"W{i}", f"migrate shard {i}", state="active")
                turn.context()
                turn.record_message(f"shard {i} cannot move")
                turn.set_work_state(f"W{i}", "abandoned" if i % 2 else "done")
        index = agent.episodes
        states = _CountingStates(index._work_states)
        assert len(states) >= items - 1
        index._work_states = states
        _CountingStates.walked = 0
        with agent.turn(input="migrate shard 3 again") as turn:
            turn.add_work_item("W-new", "migrate shard 3 again", state="active")
            turn.context()
        assert _CountingStates.walked == 0
        # Selection is what it was: episodes of abandoned work stay out, unless the input names the item.
        inputs = inputs_from_state(agent.projection, agent_id=agent.agent_id, include_episodes=False)
        selected = select_episodes(inputs, index, limit=6, max_postings=256)
        assert selected
        assert all(index.work_state(str(e.work_item_id)) == "done" for e in selected)
        named = msgspec.structs.replace(inputs, current_input=CurrentInput(text="retry W3"))
        assert "W3" in {e.work_item_id for e in select_episodes(named, index, limit=40, max_postings=256)}
        assert _CountingStates.walked == 0
