"""Regressions found in an adversarial review of holon.context (one test per bug)."""

from __future__ import annotations

import pytest

from holon.context import get_estimator, parse_ref
from holon.errors import InvalidRef


@pytest.mark.parametrize("scheme", ["ledger", "episode"])
def test_a_ref_with_more_digits_than_int_converts_is_an_invalid_ref(scheme: str) -> None:
    # Python refuses to convert more than 4300 digits (sys.int_info.str_digits_check_threshold):
    # a model's or user's garbage ref must still be an InvalidRef (the recall tool and
    # `holon get` handle that), not a bare ValueError reported as an internal error.
    ref = f"{scheme}:" + "9" * 5000
    with pytest.raises(InvalidRef, match="too many digits"):
        parse_ref(ref)


# Texts an agent meets in tool output and chat whose characters BPE has few merges for.
_SYMBOL_TEXTS = {
    "tree": "".join(f"│   ├── module_{i}.py\n│   └── tests_{i}\n" for i in range(40)),
    "test runner": "".join(f"✓ test_parser_{i} passed\n✗ test_render_{i} failed\n" for i in range(40)),
    "progress bar": "[████████████░░░░░░░░] 60% ⠋ building\n" * 30,
    "emoji chat": "Great job 🎉🎉 thanks 👍😀 see you 👩\u200d💻\n" * 30,
    "shapes": "■ ▶ ● ★ ☆ ◆ ✔ ❌ ⚠️ ✨\n" * 30,
    "math": "∀x ∈ S: f(x) ≥ 0 ∧ ∑ g(x) ≤ 1 ⊆ ∅\n" * 30,
    "decomposed accents": "cafe\u0301 nai\u0308ve re\u0301sume\u0301 " * 60,
    "zero-width": "word\u200b" * 200,
}


@pytest.mark.parametrize("kind", sorted(_SYMBOL_TEXTS))
def test_the_default_estimator_does_not_under_count_symbols_and_emoji(kind: str) -> None:
    # The heuristic exists to over-count (an under-count overflows the prompt), but it
    # counted a symbol or an emoji as punctuation: 0.7 of a token where o200k spends 2-3,
    # so a `tree` listing or an emoji-heavy chat was budgeted at a third to two thirds
    # of its real size.
    text = _SYMBOL_TEXTS[kind]
    truth = get_estimator("o200k_base").count(text)
    assert get_estimator().count(text) >= 0.95 * truth
