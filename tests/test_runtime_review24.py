"""A daemon that runs for days in one process stays flat: findings of review 24, each pinned by a test.

Each test counts what a long run would accumulate or walk (characters held, entries
visited), never seconds, so it does not depend on the machine's speed.
"""

from __future__ import annotations

import pytest

from holon.context import render as render_module
from holon.context.estimator import DEFAULT_ESTIMATOR, get_estimator
from holon.context.render import clear_count_cache, token_counter


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
