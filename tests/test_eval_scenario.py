"""Evaluation scenarios: the call rule, the seeded generator's ground truth, the samples loader."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

import holon.records as r
from benchmarks.eval.scenario import CONSTRAINT, Scenario, generate, load_samples
from benchmarks.eval.trace import call_positions, transcript_text
from benchmarks.eval.unstructured import (
    CONVERSATION_DETAILS,
    SUBAGENT_RECORDS,
    generate_coding,
    generate_conversation,
    generate_tasks,
)

#: The kinds the structured generator plants.
STRUCTURED_LIVE = ("constraint", "objective", "plan", "waiting", "decision")
STRUCTURED_STALE = ("abandoned", "superseded_plan", "superseded_decision")


def _rec(body: r.Body, turn: int | None = 1) -> r.Record:
    return r.Record(body=body, ts=0, turn=turn)


def test_a_call_precedes_each_run_of_model_output() -> None:
    records = [
        _rec(r.SystemPolicy(text="sys"), None),
        _rec(r.TurnStarted(trigger="user", input="hi")),
        _rec(r.Message(role="assistant", text="looking")),  # call 0: answers the input
        _rec(r.ToolIntent(call_id="a", tool="bash")),  # same response
        _rec(r.ToolIntent(call_id="b", tool="bash")),  # parallel call, same response
        _rec(r.ToolResult(call_id="a", tool="bash", status="ok")),
        _rec(r.ExecutionEnvironment(cwd="/x")),  # neutral
        _rec(r.ToolResult(call_id="b", tool="bash", status="ok")),
        _rec(r.WorkPlan(work_item_id=None, steps=())),  # call 1: after the results
        _rec(r.Message(role="assistant", text="done")),
        _rec(r.TurnEnded(outcome="completed")),
        _rec(r.TurnStarted(trigger="user", input="more"), 2),
        _rec(r.Message(role="assistant", text="ok"), 2),  # call 2
    ]
    assert call_positions(records) == (2, 8, 12)


def test_generation_is_deterministic_per_seed() -> None:
    a, b, c = generate("g", 60, seed=4), generate("g", 60, seed=4), generate("g", 60, seed=5)
    encode = msgspec.msgpack.encode
    assert [encode(x) for x in a.records] == [encode(x) for x in b.records]
    assert (a.calls, a.live, a.stale, a.facts) == (b.calls, b.live, b.stale, b.facts)
    assert [encode(x) for x in a.records] != [encode(x) for x in c.records]


def test_planted_facts_have_lifetimes_grounded_in_the_records() -> None:
    scenario = generate("g", 400, seed=8)
    assert scenario.turns == 400 and len(scenario.calls) > 800
    kinds = {f.kind for f in scenario.facts}
    assert set(STRUCTURED_LIVE) <= kinds and set(STRUCTURED_STALE) <= kinds
    constraint = next(f.id for f in scenario.facts if f.kind == "constraint")
    assert constraint == next(f.id for f in scenario.facts if f.text == CONSTRAINT)
    # Every call after the first turn's input must carry the constraint.
    assert all(constraint in live for live in scenario.live)
    texts = [transcript_text(rec.body) or "" for rec in scenario.records]
    for call, position in enumerate(scenario.calls[:: max(1, len(scenario.calls) // 60)]):
        k = scenario.calls.index(position)
        before = "\n".join(texts[:position])
        for fid in scenario.live[k] | scenario.stale[k]:
            # A live or stale fact was written by an earlier record; never by chatter alone.
            assert scenario.facts[fid].text in before, (call, scenario.facts[fid])
        assert not scenario.live[k] & scenario.stale[k]
    # A fact once stale stays stale.
    for earlier, later in zip(scenario.stale, scenario.stale[1:], strict=False):
        assert earlier <= later


def test_stale_facts_never_occur_in_operator_messages_or_tool_output() -> None:
    scenario = generate("g", 300, seed=8)
    stale = [f.text for f in scenario.facts if f.kind in STRUCTURED_STALE]
    for rec in scenario.records:
        body = rec.body
        if isinstance(body, r.TurnStarted | r.Message | r.ToolResult | r.ToolIntent):
            text = transcript_text(body) or ""
            assert not any(s in text for s in stale), body


def test_samples_are_optional(tmp_path: Path) -> None:
    assert list(load_samples(tmp_path / "absent")) == []
    assert list(load_samples(tmp_path)) == []


def test_samples_are_imported_with_holons_importers(tmp_path: Path) -> None:
    run = [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": "Change my flight."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "get_user", "arguments": '{"id": "u1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": '{"name": "Ann"}'},
        {"role": "assistant", "content": "Done."},
    ]
    path = tmp_path / "tau-bench" / "gpt-4o-airline__top3_longest.json"
    path.parent.mkdir()
    path.write_bytes(msgspec.json.encode([{"traj": run}]))
    (scenario,) = load_samples(tmp_path)
    assert scenario.name == "gpt-4o-airline__top3_longest"
    assert len(scenario.calls) == 2 and not scenario.facts


# --------------------------------------------------------------------------- unstructured runs
#
# The ground truth of each generator is derived again here from the records alone (what a
# reader of the ledger sees), and compared with what the generator planted at every call.


@pytest.fixture(scope="module")
def coding() -> Scenario:
    return generate_coding("c", 160, seed=3)


@pytest.fixture(scope="module")
def conversation() -> Scenario:
    return generate_conversation("v", 24, seed=3)


@pytest.fixture(scope="module")
def tasks() -> Scenario:
    return generate_tasks("t", 160, seed=3)


def _texts(scenario: Scenario) -> list[str]:
    return [transcript_text(rec.body) or "" for rec in scenario.records]


def _live_texts(scenario: Scenario, k: int, kind: str) -> set[str]:
    return {scenario.facts[f].text for f in scenario.live[k] if scenario.facts[f].kind == kind}


def _stale_texts(scenario: Scenario, k: int, kind: str) -> set[str]:
    return {scenario.facts[f].text for f in scenario.stale[k] if scenario.facts[f].kind == kind}


def _first_with(texts: list[str], text: str) -> int:
    return next(i for i, t in enumerate(texts) if text in t)


_DECLARED = (r.WorkItem, r.WorkItemState, r.WorkPlan, r.Decision, r.WaitingIntent)


@pytest.mark.parametrize(
    "make",
    [
        lambda seed: generate_coding("c", 40, seed=seed),
        lambda seed: generate_conversation("v", 8, seed=seed),
        lambda seed: generate_tasks("t", 40, seed=seed),
    ],
    ids=["coding", "conversation", "tasks"],
)
def test_unstructured_generation_is_deterministic_per_seed(make: Callable[[int], Scenario]) -> None:
    a, b, c = make(4), make(4), make(5)
    encode = msgspec.msgpack.encode
    assert [encode(x) for x in a.records] == [encode(x) for x in b.records]
    assert (a.calls, a.live, a.stale, a.evidence, a.facts) == (b.calls, b.live, b.stale, b.evidence, b.facts)
    assert [encode(x) for x in a.records] != [encode(x) for x in c.records]


def _establishes(kind: str, body: r.Body) -> bool:
    """Whether ``body`` is a record a fact of ``kind`` may occur in (the one that plants it)."""
    if kind in ("constraint", "instruction", "correction", "superseded_instruction"):
        return isinstance(body, r.Message) and body.role == "operator"
    if kind == "last_edit":
        edit = isinstance(body, r.ToolIntent | r.ToolResult) and body.tool in ("edit_file", "write_file")
        return edit and (not isinstance(body, r.ToolResult) or body.status == "ok")
    if kind == "failing_test":
        return isinstance(body, r.ToolResult) and body.status == "error" and body.exit_code == 1
    if kind in ("task_result", "superseded_task"):
        return isinstance(body, r.TaskResult)
    if kind == "evidence":
        return isinstance(body, r.Message) and body.role == "user"
    raise AssertionError(kind)


@pytest.mark.parametrize("name", ["coding", "conversation", "tasks"])
def test_unstructured_facts_occur_only_in_the_records_that_plant_them(
    name: str, request: pytest.FixtureRequest
) -> None:
    scenario: Scenario = request.getfixturevalue(name)
    texts = _texts(scenario)
    assert scenario.facts
    for fact in scenario.facts:
        holders = [rec.body for rec, text in zip(scenario.records, texts, strict=True) if fact.text in text]
        assert holders, fact
        assert all(_establishes(fact.kind, body) for body in holders), fact
    # No run declares work: the state is only in requests, tool calls and what came back.
    assert not any(isinstance(rec.body, _DECLARED) for rec in scenario.records)
    for live, stale in zip(scenario.live, scenario.stale, strict=True):
        assert not live & stale


def test_coding_constraints_are_live_from_their_request_to_the_end(coding: Scenario) -> None:
    texts = _texts(coding)
    constraints = [f for f in coding.facts if f.kind == "constraint"]
    first = next(rec.body for rec in coding.records if isinstance(rec.body, r.Message))
    assert isinstance(first, r.Message) and first.role == "operator"
    assert 2 <= sum(f.text in first.text for f in constraints) <= 3, "the first request has 2-3"
    assert len({_first_with(texts, f.text) for f in constraints}) > 2, "later requests add some"
    for fact in constraints:
        planted = _first_with(texts, fact.text)
        for k, position in enumerate(coding.calls):
            assert (fact.id in coding.live[k]) == (position > planted), (fact, k)


def test_coding_instruction_is_live_until_its_correction_then_stale(coding: Scenario) -> None:
    texts = _texts(coding)
    superseded = [f for f in coding.facts if f.kind == "superseded_instruction"]
    assert superseded, "the run corrects an earlier instruction"
    for stale in superseded:
        assert stale.superseded_by is not None
        correction = coding.facts[stale.superseded_by]
        assert correction.kind == "correction" and stale.text not in correction.text
        instruction = next(f for f in coding.facts if f.kind == "instruction" and f.text == stale.text)
        given, corrected = _first_with(texts, stale.text), _first_with(texts, correction.text)
        assert given < corrected
        for k, position in enumerate(coding.calls):
            assert (instruction.id in coding.live[k]) == (given < position <= corrected), k
            assert (stale.id in coding.stale[k]) == (position > corrected), k
            assert (correction.id in coding.live[k]) == (position > corrected), k


def test_coding_last_edit_is_the_newest_successful_edits_path(coding: Scenario) -> None:
    newest: str | None = None
    at: list[str | None] = []  # the newest edited path before each record
    for rec in coding.records:
        at.append(newest)
        body = rec.body
        if isinstance(body, r.ToolResult) and body.touched_files and body.status == "ok":
            assert body.tool in ("edit_file", "write_file")
            newest = body.touched_files[-1]
    seen = set()
    for k, position in enumerate(coding.calls):
        expected = at[position]
        assert _live_texts(coding, k, "last_edit") == ({expected} if expected else set()), k
        seen.add(expected)
    assert len(seen) > 3, "the last edited file changes over the run"


def test_coding_failing_test_is_live_until_the_same_command_passes(coding: Scenario) -> None:
    commands: dict[str, str] = {}
    failing: dict[str, str] = {}  # command -> test id
    at: list[set[str]] = []
    recovered = 0
    for rec in coding.records:
        at.append(set(failing.values()))
        body = rec.body
        if isinstance(body, r.ToolIntent) and body.tool == "bash":
            commands[body.call_id] = str(body.args["command"])
        if isinstance(body, r.ToolResult) and commands.get(body.call_id, "").startswith("pytest "):
            command = commands[body.call_id]
            if body.status == "error":
                summary = body.output.split("\n")[-2]  # pytest's short summary, last but one line
                match = re.fullmatch(r"FAILED (\S+) - AssertionError: .*", summary)
                assert match is not None and body.exit_code == 1, body.output[-300:]
                failing[command] = match.group(1)
            elif command in failing:
                del failing[command]
                recovered += 1
    assert recovered > 2
    for k, position in enumerate(coding.calls):
        assert _live_texts(coding, k, "failing_test") == at[position], k


def test_coding_turns_are_a_request_or_a_continuation_with_one_to_six_tool_rounds(coding: Scenario) -> None:
    starts = [i for i, rec in enumerate(coding.records) if isinstance(rec.body, r.TurnStarted)]
    triggers = {coding.records[i].body.trigger for i in starts}  # type: ignore[union-attr]
    assert triggers == {"operator", "continue"}
    for start, end in zip(starts, [*starts[1:], len(coding.records)], strict=True):
        body = coding.records[start].body
        assert isinstance(body, r.TurnStarted)
        intents = sum(isinstance(rec.body, r.ToolIntent) for rec in coding.records[start:end])
        assert 1 <= intents <= 6
        follows = coding.records[start + 1].body
        is_request = isinstance(follows, r.Message) and follows.role == "operator"
        assert is_request == (body.trigger == "operator")


def test_conversation_sessions_start_with_their_session_id(conversation: Scenario) -> None:
    envs = [rec for rec in conversation.records if isinstance(rec.body, r.ExecutionEnvironment)]
    assert [rec.body.extra for rec in envs] == [{"session_id": f"s{n}"} for n in range(1, 25)]  # type: ignore[union-attr]
    assert all(rec.turn is None for rec in envs)
    for i, rec in enumerate(conversation.records[1:], 1):
        if isinstance(rec.body, r.ExecutionEnvironment):
            assert isinstance(conversation.records[i - 1].body, r.SystemPolicy | r.TurnEnded)


def test_conversation_evidence_is_asked_about_only_in_the_closing_session(conversation: Scenario) -> None:
    records = conversation.records
    closing = max(i for i, rec in enumerate(records) if isinstance(rec.body, r.ExecutionEnvironment))
    questions = dict((q, d) for d, q in CONVERSATION_DETAILS)
    asked = 0
    for k, position in enumerate(conversation.calls):
        evidence = {conversation.facts[f].text for f in conversation.evidence[k]}
        if position < closing:
            assert not evidence, k
            continue
        message = next(rec.body for rec in reversed(records[:position]) if isinstance(rec.body, r.Message))
        assert isinstance(message, r.Message) and message.role == "user"
        question = message.text.removeprefix("Quick question before we start: ")
        (detail,) = evidence
        assert questions[question] == detail and detail not in message.text
        # The evidence was given in an earlier session's user message sharing words with the question.
        (given,) = [
            i for i, rec in enumerate(records) if isinstance(rec.body, r.Message) and detail in rec.body.text
        ]
        assert given < closing
        said = records[given].body
        assert isinstance(said, r.Message) and said.role == "user"
        words = {w.strip("?,.").lower() for w in question.split()} - {"what", "is", "the", "my", "i", "a"}
        assert len(words & {w.strip("?,.").lower() for w in said.text.split()}) >= 2, (question, said.text)
        asked += 1
    planted = [f for f in conversation.facts if f.kind == "evidence"]
    assert len(planted) >= 6
    assert asked >= len(planted), "every planted detail is asked about (a tool round asks again)"


def _task_truth(scenario: Scenario) -> tuple[list[tuple[set[str], set[str]]], dict[str, int]]:
    """Live and stale task phrases at every call, derived from the records; and how results arrived."""
    jobs: dict[str, str] = {}
    started: dict[str, int] = {}
    arrived: list[tuple[int, int, str, str]] = []  # record index, turn, job, phrase
    how = {"turn start": 0, "between rounds": 0}
    for i, rec in enumerate(scenario.records):
        body = rec.body
        if isinstance(body, r.TaskStarted):
            jobs[body.id] = body.description
            started[body.id] = rec.turn or 0
        elif isinstance(body, r.TaskResult):
            assert rec.turn is not None and 1 <= rec.turn - started[body.id] <= 10
            phrase = body.summary.split(": ", 1)[1]
            arrived.append((i, rec.turn, jobs[body.id], phrase))
            back = i - 1
            while isinstance(scenario.records[back].body, r.TaskResult):
                back -= 1
            before = scenario.records[back].body
            if isinstance(before, r.TurnStarted) and before.trigger == "task":
                how["turn start"] += 1
            elif isinstance(before, r.ToolResult):
                how["between rounds"] += 1
    truth = []
    for position in scenario.calls:
        turn = scenario.records[position].turn
        assert turn is not None
        now = [a for a in arrived if a[0] < position]
        newest = {a[3] for a in now[-4:]}
        live, stale = set(), set()
        for n, (_i, at, job, phrase) in enumerate(now):
            if any(later[2] == job for later in now[n + 1 :]):
                stale.add(phrase)
            elif turn <= at + 1 or phrase in newest:
                live.add(phrase)
        truth.append((live, stale))
    return truth, how


def test_task_results_are_live_through_the_next_turn_and_while_among_the_newest_four(tasks: Scenario) -> None:
    truth, how = _task_truth(tasks)
    assert how["turn start"] > 2 and how["between rounds"] > 2
    for k, (live, stale) in enumerate(truth):
        assert _live_texts(tasks, k, "task_result") == live, k
        assert _stale_texts(tasks, k, "superseded_task") == stale, k
    # At least the next call after a result arrived has it live.
    for k, position in enumerate(tasks.calls):
        body = tasks.records[position - 1].body
        if isinstance(body, r.TaskResult):
            assert body.summary.split(": ", 1)[1] in _live_texts(tasks, k, "task_result")
    assert any(stale for _live, stale in truth), "some job ran again and superseded its older result"


def test_a_superseded_task_names_the_newer_result_of_the_same_job(tasks: Scenario) -> None:
    texts = _texts(tasks)
    superseded = [f for f in tasks.facts if f.kind == "superseded_task"]
    assert superseded
    for fact in superseded:
        assert fact.superseded_by is not None
        newer = tasks.facts[fact.superseded_by]
        assert newer.kind == "task_result"
        old, new = _first_with(texts, fact.text), _first_with(texts, newer.text)
        assert old < new
        job = {
            rec.body.id: rec.body.description for rec in tasks.records if isinstance(rec.body, r.TaskStarted)
        }
        ids = [tasks.records[i].body.id for i in (old, new)]  # type: ignore[union-attr]
        assert job[ids[0]] == job[ids[1]]


def test_sub_agent_work_is_in_task_output_until_records_carry_task_id(tasks: Scenario) -> None:
    subagents = {
        rec.body.id
        for rec in tasks.records
        if isinstance(rec.body, r.TaskStarted) and "sub-agent" in rec.body.description
    }
    assert subagents
    results = [
        rec.body for rec in tasks.records if isinstance(rec.body, r.TaskResult) and rec.body.id in subagents
    ]
    if SUBAGENT_RECORDS:
        # Each sub-agent's work is records of its own, which no call of the run answers.
        own = [i for i, rec in enumerate(tasks.records) if getattr(rec.body, "task_id", None) in subagents]
        assert own and not set(own) & set(tasks.calls)
    else:
        assert all("sub-agent call" in body.output for body in results)
        with pytest.raises(ValueError, match="task_id field"):
            generate_tasks("t", 10, seed=1, subagent_records=True)
