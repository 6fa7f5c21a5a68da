"""Regressions found in a second adversarial review of holon.context (one test per bug)."""

from __future__ import annotations

import pytest

from holon.context import Budget, RenderConfig, build_context, get_estimator
from tests.context_inputs import execution, inputs

# Tool output made of long whitespace runs: blank lines, blank CRLF lines, lines of
# trailing spaces, column padding, a progress bar redrawn with carriage returns.
_WHITESPACE_TEXTS = {
    "blank lines": "start\n" + "\n" * 3000 + "end\n",
    "blank CRLF lines": "start\r\n" + "\r\n" * 1500 + "end\r\n",
    "trailing spaces": "start\n" + "   \n" * 800 + "end\n",
    "padding": "name" + " " * 3000 + "value\n",
    "tabs": "col\t" + "\t" * 3000 + "col\n",
    "carriage returns": "progress" + "\r" * 2000 + "done\n",
    "indented blank lines": "def f():\n" + "\n    " * 700 + "return 1\n",
}


@pytest.mark.parametrize("kind", sorted(_WHITESPACE_TEXTS))
def test_the_default_estimator_counts_long_whitespace_runs(kind: str) -> None:
    # A whitespace run was one piece of the heuristic's split and cost one token whatever
    # its length: 3,000 blank lines in a tool output were budgeted at 1 token, where o200k
    # spends ~190 (100,000 of them: 1 against 6,250), so the prompt overflowed its window.
    # Lines of trailing spaces stay ~11% under: a higher weight per change of character
    # would break the promise that joins add up (see estimator._W_WS_CHANGE).
    text = _WHITESPACE_TEXTS[kind]
    truth = get_estimator("o200k_base").count(text)
    assert get_estimator().count(text) >= (0.85 if kind == "trailing spaces" else 1.0) * truth


def test_a_tool_output_of_blank_lines_does_not_overflow_the_prompt() -> None:
    blank = "\n" * 80_000
    source = inputs(tools=(execution(1, output="x" + blank + "y"),))
    config = RenderConfig(tool_result_max_tokens=100_000)
    window = 3_000
    prompt = build_context(source, Budget(context_window=window), config)
    # Shown or cleared, the prompt costs what o200k says at most the window.
    assert get_estimator("o200k_base").count(prompt.text) <= window
