"""The recalled section: older evidence the current input asks about, which the history no longer shows."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.records as r
from holon.cli import main as holon_cli
from holon.context import Budget, RenderConfig, build_context
from holon.context.inputs import inputs_from_state
from holon.context.prompt import Prompt
from holon.context.recall import RECALL_HEADER, recall_query
from holon.runtime import Agent, AgentConfig
from tests.live import LiveLedger
from tests.runtime_support import TEST_POLICY, Tick

#: Small enough that the history moves past the first sessions' records.
BUDGET = Budget(context_window=3_000, output_reserve=500)
PARKED = "I parked the camper van at the Alder Creek campground, bay 14."
FILLER = "Talked about the weather, the garden, the oven timer and the train to the coast; nothing else."


def _session(live: LiveLedger, n: int) -> None:
    live.append(r.ExecutionEnvironment(workspace="/home", extra={"session_id": f"s{n}"}), in_turn=False)


def _turn(live: LiveLedger, text: str, reply: str) -> None:
    live.start_turn("user", text)
    live.append(r.Message(role="user", text=text))
    live.append(r.Message(role="assistant", text=reply))
    live.end_turn()


def _ledger(question: str, *, sessions: int = 12) -> LiveLedger:
    """An early session that plants a detail, later sessions of filler, then ``question`` as input."""
    live = LiveLedger()
    _session(live, 0)
    # The detail is in the reply: an archived episode quotes what the operator asked, so a
    # detail in a request is in the prompt already, in the episodes section.
    _turn(live, "Hello, a note for the trip, please.", f"Noted: you said {PARKED}")
    for n in range(1, sessions):
        _session(live, n)
        for k in range(4):
            _turn(live, f"Session {n}, item {k}: {FILLER}", f"Reply {n}.{k}: {FILLER}")
    _session(live, sessions)
    live.start_turn("user", question)
    live.append(r.Message(role="user", text=question))
    return live


def _render(live: LiveLedger, config: RenderConfig | None = None) -> Prompt:
    return build_context(live.state, BUDGET, config, agent_id="a", history=live.evidence)


def _archived() -> tuple[LiveLedger, str, r.Record]:
    """A command's large output early on, a long run of filler, then a question about it:
    the ledger, the output and its result record."""
    live = LiveLedger()
    live.start_turn("user", "Archive the 2019 invoices.")
    live.append(r.Message(role="user", text="Archive the 2019 invoices."))
    live.append(r.ToolIntent(call_id="c1", tool="bash", args={"command": "archive --year 2019"}))
    output = "archived 4,812 invoices to s3://cold-store/invoices-2019.tar.zst\n" + "checksum ok\n" * 400
    result = live.append(r.ToolResult(call_id="c1", tool="bash", status="ok", output=output))
    live.end_turn()
    for k in range(60):
        _turn(live, f"Item {k}: {FILLER}", f"Reply {k}: {FILLER}")
    live.start_turn("user", "Which bucket holds the cold-store invoices archive?")
    live.append(r.Message(role="user", text="Which bucket holds the cold-store invoices archive?"))
    return live, output, result


def test_an_input_asking_about_an_old_session_brings_its_record_back_with_its_ref() -> None:
    live = _ledger("Quick question: where did I park the camper van?")
    prompt = _render(live)
    history = prompt.section("history")
    assert history is not None and PARKED not in history.text  # the history moved past it
    recalled = prompt.section("recalled")
    assert recalled is not None and recalled.text.startswith(RECALL_HEADER)
    seq = next(rec.seq for rec in live.records if isinstance(rec.body, r.Message) and PARKED in rec.body.text)
    assert f"[ledger:{seq}] assistant: Noted: you said {PARKED}" in recalled.text
    assert prompt.plan.recalled == (f"ledger:{seq}",)
    # Right before the input, so the model reads it with the question; TurnScoped, in the tail.
    names = [s.name for s in prompt.sections]
    assert names[-2:] == ["recalled", "current_input"] and recalled.stability == "turn"


def test_a_routine_continuation_recalls_nothing() -> None:
    for text in ("ok, continue", "Yes please, go ahead.", "thanks"):
        live = _ledger(text)
        assert recall_query(inputs_from_state(live.state, agent_id="a")) is None
        assert _render(live).section("recalled") is None


def test_a_wake_up_without_an_input_message_recalls_nothing() -> None:
    live = _ledger("where did I park the camper van?")
    live.end_turn()
    live.start_turn("wake", None)
    assert _render(live).section("recalled") is None


def test_nothing_is_recalled_that_the_history_shows() -> None:
    live = LiveLedger()
    _turn(live, f"Hello. {PARKED}", "Noted.")
    live.start_turn("user", "where did I park the camper van?")
    live.append(r.Message(role="user", text="where did I park the camper van?"))
    prompt = _render(live)
    history = prompt.section("history")
    assert history is not None and PARKED in history.text
    assert prompt.section("recalled") is None and prompt.plan.recalled == ()


def test_the_recall_never_moves_the_history_and_takes_at_most_its_share() -> None:
    live = _ledger("Quick question: where did I park the camper van?")
    on, off = _render(live), _render(live, RenderConfig(recall_share=0.0))
    assert off.section("recalled") is None
    assert on.section("history") == off.section("history")
    assert on.plan.history == off.plan.history
    recalled = on.section("recalled")
    assert recalled is not None and recalled.tokens <= int(BUDGET.available * RenderConfig().recall_share)
    assert on.total_tokens <= BUDGET.available


def test_a_recalled_tool_call_comes_with_its_result_preview() -> None:
    live, output, _ = _archived()
    prompt = _render(live)
    recalled = prompt.section("recalled")
    assert recalled is not None
    assert 'call c1 bash {"command":"archive --year 2019"}' in recalled.text
    assert "s3://cold-store/invoices-2019.tar.zst" in recalled.text
    # A preview, naming the ref that restores the whole output.
    assert output not in recalled.text and "restore with ref ledger:" in recalled.text


def test_the_sessions_own_requests_are_not_recalled() -> None:
    # The operator's requests and the history show each of them; recalled after its
    # correction, a superseded instruction would read as the newest word.
    live = LiveLedger()
    _turn(live, "Use tabs for indentation in the camper van planner.", "Will do.")
    for k in range(60):
        _turn(live, f"Item {k}: {FILLER}", f"Reply {k}: {FILLER}")
    correction = "Actually, use spaces for indentation in the camper van planner."
    live.start_turn("user", correction)
    live.append(r.Message(role="user", text=correction))
    assert _render(live).section("recalled") is None


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["where did I park the camper van?", "Alder Creek bay?", "ok continue"]))
def test_the_same_ledger_recalls_the_same_bytes(question: str) -> None:
    first, second = _ledger(question), _ledger(question)
    assert msgspec.json.encode(_render(first)) == msgspec.json.encode(_render(second))


def test_the_runtime_records_recalled_prompts_that_prompts_check_reproduces(tmp_path: Path) -> None:
    # The section is read from the ledger alone, so a recorded prompt that recalled is
    # rendered again byte for byte from the ledger, as every other prompt is.
    path = tmp_path / "ledger"
    config = AgentConfig(budget=BUDGET)
    with Agent.open(path, agent_id="a", config=config, clock=Tick(), policy=TEST_POLICY) as agent:
        with agent.turn(input="Remember where the van is, please.") as turn:
            turn.context()
            turn.record_message(f"Noted: {PARKED}")
        for k in range(40):
            with agent.turn(input=f"Item {k}: {FILLER}") as turn:
                turn.context()
                turn.record_message(f"Reply {k}: {FILLER}")
        with agent.turn(input="Quick question: where did I park the camper van?") as turn:
            prompt = turn.context()
            turn.record_message("At Alder Creek, bay 14.")
    recalled = prompt.section("recalled")
    assert recalled is not None and PARKED in recalled.text
    checked = CliRunner().invoke(holon_cli, ["prompts", str(path), "--check", "--json"])
    assert checked.exit_code == 0, checked.output
    statuses = {row["status"] for row in json.loads(checked.output)["prompts"]}
    assert statuses == {"reproduced"}


def test_a_recalled_preview_is_reported_as_shortened_with_the_ref_that_restores_it() -> None:
    live, _, result = _archived()
    plan = _render(live).plan
    cut = [o for o in plan.omitted if o.section == "recalled"]
    assert [o.ref for o in cut] == [f"ledger:{result.seq}"] and cut[0].tokens > 0
    assert f"ledger:{result.seq}" in plan.evicted_refs


def test_an_input_about_what_the_prompt_shows_recalls_nothing() -> None:
    # Older records match its words too, but every word is in the prompt already: the turn
    # is about what the model can read, and a recalled copy would only cost room.
    live = _ledger("Tell me more about the weather, the garden and the oven timer.")
    prompt = _render(live)
    history = prompt.section("history")
    assert history is not None and "the oven timer" in history.text
    assert prompt.section("recalled") is None


def test_a_call_that_declared_a_plan_is_not_recalled() -> None:
    # Working memory shows the plan in force; an older plan's steps, recalled, would read as
    # current (the history shows such a call as a stub for the same reason).
    live = LiveLedger()
    live.start_turn("user", "Plan the migration.")
    live.append(r.Message(role="user", text="Plan the migration."))
    steps = {"todos": [{"content": "Move the invoices archive to the glacier bucket"}]}
    live.append(r.ToolIntent(call_id="p1", tool="TodoWrite", args=steps))
    live.append(r.WorkPlan(work_item_id=None, steps=(r.PlanStep(id="1", text="Move the archive"),)))
    live.append(r.ToolResult(call_id="p1", tool="TodoWrite", status="ok", output="glacier bucket plan saved"))
    live.end_turn()
    for k in range(60):
        _turn(live, f"Item {k}: {FILLER}", f"Reply {k}: {FILLER}")
    live.start_turn("user", "Which glacier bucket holds the invoices archive?")
    live.append(r.Message(role="user", text="Which glacier bucket holds the invoices archive?"))
    recalled = _render(live).section("recalled")
    assert recalled is None or "p1" not in recalled.text
