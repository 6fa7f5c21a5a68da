"""Decisions in the prompt: made mid-turn, shown at once; revised since an episode, not repeated.

A check that failed mid-turn is shown at once the same way."""

from __future__ import annotations

import msgspec

from holon import records as r
from holon.context import Budget, EpisodeIndex, RenderConfig, build_context, get_estimator, prompt_rendered
from holon.context.sections import episodes_candidate
from tests.live import LiveLedger

BUDGET = Budget(context_window=8_000, output_reserve=1_000)
CONFIG = RenderConfig(prompt_cache_key="t")


def _render(live: LiveLedger) -> str:
    live.before_prompt()
    prompt = build_context(live.state, BUDGET, CONFIG, agent_id="a")
    live.append(prompt_rendered(prompt))
    return prompt.text


def _section(text: str, name: str) -> str:
    start = text.index(name)
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_a_decision_made_this_turn_is_shown_until_working_memory_has_it() -> None:
    live = LiveLedger()
    live.start_turn("operator", "migrate the database")
    live.append(r.WorkItem(id="w", objective="migrate the database", state="active"))
    live.end_turn()

    live.start_turn("operator", "continue")
    _render(live)
    live.append(r.Decision(id="d1", text="use logical replication", work_item_id="w"))
    live.append(r.ToolIntent(call_id="c1", tool="bash", args={"command": "ls"}))
    live.append(r.ToolResult(call_id="c1", tool="bash", status="ok", output="x"))
    text = _render(live)  # the next model call of the same turn
    active = _section(text, "## Active work item")
    assert "decision d1 (made this turn" in active and "use logical replication" in active
    assert "use logical replication" not in _section(text, "## Working memory")

    # A revision of the decision in the same turn shows the new text, not the old one.
    live.append(r.Decision(id="d1", text="use dump and restore", work_item_id="w"))
    text = _render(live)
    active = _section(text, "## Active work item")
    assert "use dump and restore" in active and "use logical replication" not in active
    live.end_turn()

    # After the post-turn refresh, working memory carries it and it is not repeated.
    live.start_turn("operator", "continue")
    text = _render(live)
    assert "use dump and restore" in _section(text, "## Working memory")
    assert "made this turn" not in text


def test_a_check_that_failed_this_turn_is_shown_until_working_memory_has_it() -> None:
    live = LiveLedger()
    live.start_turn("operator", "fix the parser")
    live.append(r.WorkItem(id="w", objective="fix the parser", state="active"))
    live.end_turn()
    live.start_turn("operator", "continue")
    _render(live)
    failed = "FAILED tests/test_parser.py::test_nested[case-7] - AssertionError\n1 failed, 9 passed"
    live.append(r.ToolIntent(call_id="c1", tool="bash", args={"command": "pytest -q"}))
    live.append(r.ToolResult(call_id="c1", tool="bash", status="error", exit_code=1, output=failed))
    # The prompt rendered again in this turn (its rounds outgrew it): the failure is in
    # the active work, whether or not the history still holds the run.
    text = _render(live)
    active = _section(text, "## Active work item")
    assert "failing this turn (after working memory revision" in active
    assert "`pytest -q` (exit 1)" in active and "test_nested[case-7]" in active
    assert "test_nested" not in _section(text, "## Working memory")
    live.end_turn()

    # From the next turn on working memory shows it, and it is not repeated.
    live.start_turn("operator", "continue")
    text = _render(live)
    assert "test_nested[case-7]" in _section(text, "## Working memory")
    assert "failing this turn" not in text

    # A check that passes again is not shown as failing.
    live.append(r.ToolIntent(call_id="c2", tool="bash", args={"command": "pytest -q"}))
    again = r.ToolResult(call_id="c2", tool="bash", status="error", exit_code=1, output="FAILED x\n1 failed")
    live.append(again)
    live.append(r.ToolIntent(call_id="c3", tool="bash", args={"command": "pytest -q"}))
    live.append(r.ToolResult(call_id="c3", tool="bash", status="ok", exit_code=0, output="10 passed"))
    assert "failing this turn" not in _render(live)


def test_decisions_of_another_work_item_are_not_shown_as_new() -> None:
    live = LiveLedger()
    live.start_turn("operator", "two things")
    live.append(r.WorkItem(id="w", objective="main work", state="active"))
    live.append(r.WorkItem(id="other", objective="queued work", state="queued"))
    live.end_turn()
    live.start_turn("operator", "continue")
    live.append(r.Decision(id="d9", text="only for the queued item", work_item_id="other"))
    assert "only for the queued item" not in _render(live)


def _episode(*decisions: str) -> r.ContextEpisodeRecord:
    return r.ContextEpisodeRecord(
        episode_id=3,
        boundary_reason="turn_cap",
        work_item_id="w",
        first_turn=1,
        last_turn=12,
        from_seq=0,
        to_seq=90,
        objective="migrate the database",
        decisions=decisions,
        projection_version=1,
    )


def test_an_archived_episode_does_not_repeat_a_decision_revised_since() -> None:
    count = get_estimator().count
    episode = _episode("d1: use logical replication", "d2: keep the old cluster read-only")
    current = {"d1": "use dump and restore", "d2": "keep the old cluster read-only"}
    candidate = episodes_candidate([episode], 4_000, count, current)
    assert candidate is not None
    text = candidate.forms[0].text
    assert "use logical replication" not in text
    assert "d1: (revised since; see working memory or a later episode)" in text
    assert "d2: keep the old cluster read-only" in text
    # Unrevised (or unknown) decisions are shown as archived.
    plain = episodes_candidate([episode], 4_000, count, {"d2": "keep the old cluster read-only"})
    assert plain is not None and "d1: use logical replication" in plain.forms[0].text


def test_a_later_episode_revising_a_decision_marks_the_earlier_one() -> None:
    first = _episode("d1: use logical replication")
    later = msgspec.structs.replace(first, episode_id=4, from_seq=91, to_seq=120, decisions=("d1: use dump",))
    index = EpisodeIndex([first, later])
    assert index.decisions == {"d1": "use dump"}
    candidate = episodes_candidate([first], 4_000, get_estimator().count, index.decisions)
    assert candidate is not None and "use logical replication" not in candidate.forms[0].text
