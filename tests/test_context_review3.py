"""Regressions found in a third adversarial review of holon.context (one test per bug)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon.context import Budget, CurrentInput, RenderConfig, build_context, get_estimator
from holon.context.estimator import _BPE_SPLIT, BpeEstimator, _count_in_pieces
from holon.errors import BudgetExceeded
from tests.context_inputs import inputs, message

pytest.importorskip("bpe_openai")

_EXACT = ("o200k_base", "cl100k_base")

# Characters around which the o200k / cl100k pre-tokenizers behave differently: line
# breaks and "/" (o200k's punctuation runs may end in [\r\n/]*), the apostrophe
# (contractions), whitespace of every kind, marks, digits, CJK, emoji.
_TRICKY = st.lists(
    st.sampled_from(
        [*"aZq09 \n\r\t/'.,\"{}-_:;#", "\u00a0", "\u3000", "\u0301", "é", "中", "😀", "\x0b", "'s", "\n/"]
    ),
    max_size=40,
).map("".join)
_TEXT = st.lists(st.one_of(_TRICKY, st.text(max_size=20)), max_size=6).map("".join)


def _exact(name: str) -> BpeEstimator:
    estimator = get_estimator(name)
    assert isinstance(estimator, BpeEstimator)
    return estimator


@pytest.mark.parametrize("name", _EXACT)
@settings(max_examples=400, deadline=None)
@given(text=_TEXT)
def test_bpe_counts_add_up_exactly_at_every_split_point(name: str, text: str) -> None:
    # The claim long texts are counted on: at a _BPE_SPLIT point the pre-tokenizer always
    # splits, so the parts' exact counts add up to the whole's.
    count = _exact(name)._count_piece
    whole = count(text)
    for m in _BPE_SPLIT.finditer(text):
        cut = m.start()
        assert count(text[:cut]) + count(text[cut:]) == whole, (text, cut)


@pytest.mark.parametrize("name", _EXACT)
@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_TRICKY, min_size=1, max_size=30), limit=st.integers(min_value=8, max_value=200))
def test_a_text_counted_in_pieces_counts_exactly_what_it_counts_whole(
    name: str, lines: list[str], limit: int
) -> None:
    # Lines starting with a letter: a split point at least every 61 characters, so with a
    # window of limit // 2 >= 61 characters no stretch falls back to the byte bound.
    text = "\n".join("x" + line for line in lines)
    count = _exact(name)._count_piece
    pieces = _count_in_pieces(count, text, limit=limit)
    if limit >= 2 * 62:
        assert pieces == count(text)
    else:
        # Where a window holds no split point, the stretch is bounded by its bytes.
        assert pieces >= count(text)


@pytest.mark.parametrize("name", _EXACT)
@settings(max_examples=200, deadline=None)
@given(text=_TEXT, limit=st.integers(min_value=2, max_value=40))
def test_a_text_counted_in_pieces_is_never_under_counted(name: str, text: str, limit: int) -> None:
    count = _exact(name)._count_piece
    assert _count_in_pieces(count, text, limit=limit) >= count(text)


_HUGE = {
    # 1.35 MB of log lines: over bpe-openai's 1,000,000-character input limit.
    "log lines": "2024-05-01 12:00:00 INFO worker[3]: processed batch {id: 17, ok: true}\n" * 19_000,
    # One line of minified JSON (no line break at all), 1.2 MB.
    "minified json": '{"key":"value","n":12345,"list":[1,2,3]},' * 29_000,
    # 300,000 emoji: under the character limit but 300k+ tokens (bpe-openai's token limit).
    "emoji": "\U0001f600" * 300_000,
    # 1.2 MB of one hex digest after another: no split point, counted by its bytes.
    "hex": "0123456789abcdef" * 75_000,
}


@pytest.mark.parametrize("name", _EXACT)
@pytest.mark.parametrize("kind", sorted(_HUGE))
def test_the_exact_estimators_count_texts_over_bpe_openais_limits(name: str, kind: str) -> None:
    # bpe-openai raised a bare ValueError ("Input too long to encode safely") for a text of
    # 1,000,000 characters or more, and a TokenLimitError for one over 200,000 tokens.
    text = _HUGE[kind]
    estimator = _exact(name)
    # The oracle: the Rust tokenizer's own count, which has neither limit (private API,
    # so only the test relies on it).
    truth = estimator._encoding._backend.count(text)
    n = estimator.count(text)
    if kind == "hex":
        # No split point in a 1.2 MB line: bounded by its bytes, never under the truth.
        assert n == len(text) >= truth
    else:
        assert n == truth


@pytest.mark.parametrize("name", _EXACT)
def test_a_huge_history_message_renders_within_budget_with_an_exact_estimator(name: str) -> None:
    # build_context(..., estimator="o200k_base") crashed with ValueError on a ~1.1 MB message.
    big = "line of a very long pasted document, with words and numbers 12345\n" * 17_000
    source = inputs(messages=(message(10, big), message(11, "and a short one")))
    budget = Budget(context_window=4_000)
    prompt = build_context(source, budget, RenderConfig(estimator=name))
    assert get_estimator(name).count(prompt.text) <= budget.available
    assert "and a short one" in prompt.text


@pytest.mark.parametrize("name", _EXACT)
@pytest.mark.parametrize("window", [3_000, 400])
def test_a_huge_current_input_renders_within_budget_or_raises_budget_exceeded(name: str, window: int) -> None:
    # A 1.2 MB current input crashed the exact estimators with ValueError. Now it is cut to
    # its cap and fits, or (a window too small for even that) BudgetExceeded says so.
    source = inputs(current_input=CurrentInput(text="paste " * 200_000, seq=5000))
    budget = Budget(context_window=window, output_reserve=100)
    try:
        prompt = build_context(source, budget, RenderConfig(estimator=name))
    except BudgetExceeded as exc:
        assert window == 400 and "current input" in str(exc)
    else:
        assert window == 3_000
        assert get_estimator(name).count(prompt.text) <= budget.available
