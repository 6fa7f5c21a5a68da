"""The prompt for the next call after a turn ended: its input is history, not a request to answer.

`holon render` on an imported tau-bench run (the last user message, "Thank you ... ###STOP###",
answered by no one, the turn closed) showed that message under "## Current input" as if the
next call had to answer it, though the turn was over.
"""

from __future__ import annotations

from holon import records as r
from holon.context import Budget, RenderConfig, build_context
from tests.live import LiveLedger

BUDGET = Budget(context_window=8_000, output_reserve=1_000)
CONFIG = RenderConfig(prompt_cache_key="t")
THANKS = "Thank you so much for your help! ###STOP###"


def _text(live: LiveLedger) -> str:
    live.before_prompt()
    return build_context(live.state, BUDGET, CONFIG, agent_id="a").text


def _current_input(text: str) -> str:
    start = text.index("## Current input")
    return text[start:]


def _imported_turn(live: LiveLedger) -> None:
    """A turn as the importers write it: the input on turn_started and as the turn's message."""
    live.start_turn("user_message", THANKS)
    live.append(r.Message(role="user", text=THANKS))


def test_an_open_turns_input_is_the_current_input_once() -> None:
    live = LiveLedger()
    _imported_turn(live)
    text = _text(live)
    assert THANKS in _current_input(text)
    assert text.count(THANKS) == 1


def test_an_ended_turns_input_is_history_shown_once() -> None:
    live = LiveLedger()
    _imported_turn(live)
    live.append(r.Message(role="assistant", text="You're welcome."))
    live.end_turn()
    text = _text(live)
    assert THANKS not in _current_input(text)
    assert text.count(THANKS) == 1
    # It is the session's first request, and the history shows it whole where it happened,
    # before the reply: the operator's requests would only repeat it.
    start = text.index("## Recent history")
    history = text[start : text.index("\n## ", start)]
    assert history.index(f"[ledger:1] user: {THANKS}") < history.index("You're welcome.")
    assert "## Operator's requests" not in text


def test_a_later_request_of_an_ended_turn_is_history_where_it_happened() -> None:
    live = LiveLedger()
    live.start_turn("user_message", "Fix the login page.")
    live.append(r.Message(role="user", text="Fix the login page."))
    live.end_turn()
    _imported_turn(live)
    live.append(r.Message(role="assistant", text="You're welcome."))
    live.end_turn()
    text = _text(live)
    assert THANKS not in _current_input(text)
    assert text.index(THANKS) < text.index("You're welcome.") < text.index("## Current input")


def test_an_input_only_turn_started_holds_stays_shown_after_the_turn_ended() -> None:
    # Nothing else holds it (no message): leaving it out would lose it from the prompt.
    live = LiveLedger()
    live.start_turn("user", "rebuild the index")
    live.end_turn()
    assert "rebuild the index" in _current_input(_text(live))
