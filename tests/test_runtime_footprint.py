"""What a daemon's agent holds and walks stays bounded: large tool outputs, runs of days.

A large tool output is counted without multiplying memory and only as far as the room left,
and the token-count memo keeps no large text alive; a daemon that runs for days in one
process stays flat. Each test counts what a run would accumulate or walk (characters held,
entries visited, bytes allocated), never seconds, so it does not depend on the machine's
speed.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import ItemsView, Iterator
from pathlib import Path

import msgspec
import pytest

from holon.context import CurrentInput, inputs_from_state, select_episodes
from holon.context import render as render_module
from holon.context.estimator import DEFAULT_ESTIMATOR, get_estimator
from holon.context.render import clear_count_cache, token_counter
from holon.runtime import Agent
from holon.runtime import turn as turn_module
from tests.runtime_support import Tick

# --------------------------------------------------------------------------- large tool outputs


def _agent(path: Path) -> Agent:
    return Agent.open(path, agent_id="rv3", clock=Tick())


def test_a_large_tool_output_is_counted_without_multiplying_memory(tmp_path: Path) -> None:
    # The heuristic estimator split the whole text with findall before counting: ~50
    # bytes per piece, so recording a 50 MB tool output (its round is counted against the
    # budget) peaked at 2.5 GB. The counts themselves are unchanged.
    text = "line of tool output 0123456789 ÄÖ 日本語 ── x_y aGVsbG8gd29ybGQgaGVsbG8=\n" * 40_000
    assert len(text) > 2_000_000
    estimator = get_estimator(DEFAULT_ESTIMATOR)
    tracemalloc.start()
    try:
        counted = estimator.count(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000, f"counting a {len(text):,}-character text peaked at {peak:,} bytes"
    line = text[: text.index("\n") + 1]
    assert counted == estimator.count(line * 1_000) * 40  # the per-line count, repeated
    with _agent(tmp_path / "l") as agent, agent.turn(input="cat it") as turn:
        turn.context()
        call = turn.tool("cat", {"path": "big.log"})
        call.run(lambda: text)
        assert call.result is not None and call.result.blob is not None
        prompt = turn.context()
        assert f"blob:{call.result.blob.hash}" in prompt.block_text("turn") + prompt.block_text("agent")


def test_the_token_count_cache_does_not_keep_a_large_text_alive() -> None:
    # Memoized by the text itself, a 50 MB output recorded as a round stayed in memory
    # until 4096 other texts had been counted.
    text = "x = compute(y)\n" * 100_000
    count = token_counter(DEFAULT_ESTIMATOR)
    assert count(text) == count(text) == get_estimator(DEFAULT_ESTIMATOR).count(text)
    held = [len(key) for memo in render_module._COUNTS.values() for key in memo]
    assert max(held, default=0) < len(text)


def test_a_huge_tool_output_is_counted_only_as_far_as_the_room_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recording a 50 MB output took seconds, nearly all of it counting every piece of it
    # for the round's tokens, though a few thousand tokens already show it cannot fit.
    counted: list[int] = []
    real = turn_module.token_counter

    def spy(name: str):  # type: ignore[no-untyped-def]
        inner = real(name)

        def count(text: str) -> int:
            counted.append(len(text))
            return inner(text)

        return count

    output = "".join(f"row {i}: value {i * 7}\n" for i in range(250_000))  # ~5 MB
    with Agent.open(tmp_path / "a", agent_id="a", clock=Tick()) as agent, agent.turn(input="dump") as turn:
        first = turn.context()
        monkeypatch.setattr(turn_module, "token_counter", spy)
        turn.tool("bash", {"cmd": "dump"}).run(lambda: output)
        monkeypatch.setattr(turn_module, "token_counter", real)
        assert sum(counted) < len(output) // 10
        # It does not fit: the next call renders the prompt again, with the output as a
        # restorable preview.
        again = turn.context()
        assert again is not first and "restore with ref blob:" in again.text


# --------------------------------------------------------------------------- a long run stays flat


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
