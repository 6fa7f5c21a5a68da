"""Evaluation policies: budgets, what each keeps and drops, holon's restorations, determinism."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

import holon.records as r
from benchmarks.eval.doc import write_doc
from benchmarks.eval.metrics import evaluate
from benchmarks.eval.policies import (
    PLACEHOLDER,
    POLICIES,
    FullHistory,
    HolonPolicy,
    HolonRfcLayout,
    RollingWindow,
    ToolClearing,
)
from benchmarks.eval.report import verdicts
from benchmarks.eval.run import budget_for, docs_withheld, fingerprint, main, run_scenario
from benchmarks.eval.scenario import CONSTRAINT, Scenario, generate
from benchmarks.eval.trace import TokenCounter, call_positions, transcript_text
from benchmarks.eval.unstructured import generate_coding, generate_conversation, generate_tasks
from holon.context import Prompt, build_context
from holon.context.adapters import MAX_ANTHROPIC_BREAKPOINTS, to_anthropic_messages
from holon.simulate import renderer

BUDGET = budget_for(8_000)


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return generate("small", 40, seed=11)


def test_every_policy_fits_the_budget_at_every_call(scenario: Scenario) -> None:
    for policy in POLICIES:
        prompts = list(policy(scenario, BUDGET, TokenCounter()).prompts())
        assert len(prompts) == len(scenario.calls), policy.name
        assert max(p.tokens for p in prompts) <= BUDGET.available, policy.name
        assert all(p.text == "\n".join(p.lines) for p in prompts)


def test_full_history_drops_the_oldest_items_first(scenario: Scenario) -> None:
    prompts = list(FullHistory(scenario, BUDGET, TokenCounter()).prompts())
    for position, prompt in zip(scenario.calls, prompts, strict=True):
        # The newest transcript item is always the end of the prompt.
        newest = next(
            t for rec in reversed(scenario.records[:position]) if (t := transcript_text(rec.body)) is not None
        )
        assert prompt.text.endswith(newest.split("\n")[-1])
    evicted = [key for p in prompts for key in p.evicted]
    assert evicted == sorted(evicted, key=lambda k: int(k.split(":")[1])), "oldest first"
    assert CONSTRAINT in prompts[0].text and CONSTRAINT not in prompts[-1].text


def test_rolling_window_fills_the_window_by_cutting_inside_an_item(scenario: Scenario) -> None:
    prompts = list(RollingWindow(scenario, BUDGET, TokenCounter()).prompts())
    full = [p for p in prompts if p.evicted or CONSTRAINT not in p.text]
    assert full, "the run outgrows the window"
    # Once the transcript outgrows the window, every prompt is filled to within a line of it.
    assert min(p.tokens for p in full[5:]) > BUDGET.available - 200


def test_tool_clearing_keeps_the_newest_tool_results(scenario: Scenario) -> None:
    policy = ToolClearing(scenario, BUDGET, TokenCounter(), keep=3)
    cleared_any = False
    for prompt in policy.prompts():
        lines = prompt.lines
        cleared = [
            i + 1 < len(lines) and lines[i + 1] == PLACEHOLDER
            for i, line in enumerate(lines)
            if line.startswith("result c")
        ]
        cleared_any |= any(cleared)
        assert not any(cleared[-3:]), "the newest 3 tool results are never cleared"
    assert cleared_any


def test_holon_renders_per_turn_appends_rounds_and_every_eviction_restores(scenario: Scenario) -> None:
    policy = HolonPolicy(scenario, BUDGET, TokenCounter())
    run = evaluate(policy, scenario, window=8_000, available=BUDGET.available)
    rendered = [rec for rec in policy.records if rec.kind == r.PromptRendered.KIND]
    turns_with_calls = {scenario.records[p - 1].turn for p in scenario.calls}
    # At least one render per turn with a model call, more when rounds outgrew the budget.
    assert len(turns_with_calls) <= len(rendered) < len(scenario.calls) == run.calls
    assert max(policy.prompt_tokens) <= BUDGET.available
    assert run.over_budget == 0  # what each call is sent, rounds included, fits the budget
    assert run.evictions > 0 and run.restores["restored"] == run.evictions
    assert any(rec.kind == r.ContextEpisodeRecord.KIND for rec in policy.records)
    assert policy.blobs, "large outputs were moved to the blob store"


def test_holon_restoration_detects_damaged_bytes(scenario: Scenario) -> None:
    policy = HolonPolicy(scenario, BUDGET, TokenCounter())
    blob_refs = [key for p in policy.prompts() for key in p.evicted if key.startswith("blob:")]
    assert blob_refs
    digest = blob_refs[0].removeprefix("blob:")
    assert policy.restore(blob_refs[0]) == "restored"
    policy.blobs[digest] = policy.blobs[digest] + b"!"
    assert policy.restore(blob_refs[0]) == "mismatch"
    assert policy.restore("ledger:999999999") == "mismatch"


def test_baseline_evictions_leave_no_reference(scenario: Scenario) -> None:
    for policy in POLICIES[:3]:
        bound = policy(scenario, BUDGET, TokenCounter())
        keys = [key for p in bound.prompts() for key in p.evicted]
        assert keys and {bound.restore(k) for k in keys} == {"no ref"}


def test_same_seed_same_figures() -> None:
    first = run_scenario(generate("d", 15, seed=2), windows=(8_000,))
    again = run_scenario(generate("d", 15, seed=2), windows=(8_000,))
    other = run_scenario(generate("d", 15, seed=3), windows=(8_000,))
    assert fingerprint(first) == fingerprint(again) != fingerprint(other)


def test_main_says_when_the_samples_are_absent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--turns", "8", "--no-docs", "--samples", str(tmp_path / "absent")]) == 0
    out = capsys.readouterr().out
    assert "absent does not exist — samples skipped" in out
    assert "holon" in out and "fingerprint" in out


def test_the_docs_are_left_alone_by_a_run_without_every_real_transcript(tmp_path: Path) -> None:
    # `make bench` in a clone without ../shared/samples rewrote docs/evaluation.md with no
    # real-transcript figures and a fingerprint no full run gives.
    assert docs_withheld([], tmp_path) is None
    why = docs_withheld(["claude-code/session.jsonl", "swe-agent/run.traj"], tmp_path / "absent")
    assert why is not None
    assert why.startswith("docs/evaluation.md and .svg not written: 2 of the ")
    assert "pass --samples DIR" in why and "--no-docs" in why


def test_holon_calls_in_a_turn_extend_the_previous_call_until_it_renders_again(scenario: Scenario) -> None:
    policy = HolonPolicy(scenario, BUDGET, TokenCounter())
    previous: list[str] = []
    renders = 0
    extended = 0
    for prompt in policy.prompts():
        if prompt.sections[-1][0] == "rounds":
            assert prompt.lines[: len(previous)] == previous  # append-only within the turn
            extended += 1
        else:
            renders += 1
        previous = prompt.lines
    assert renders and extended > renders


def _tool_run(outputs: list[str], *, prelude: str) -> Scenario:
    """One turn: a long operator input, then one tool round per output, then an answer."""
    bodies: list[r.Body] = [
        r.SystemPolicy(text="sys"),
        r.TurnStarted(trigger="operator"),
        r.Message(role="operator", text=prelude),
    ]
    for i, output in enumerate(outputs, 1):
        bodies.append(r.ToolIntent(call_id=f"c{i}", tool="bash", args={"command": f"step {i}"}))
        bodies.append(r.ToolResult(call_id=f"c{i}", tool="bash", status="ok", output=output))
    bodies += [r.Message(role="assistant", text="done"), r.TurnEnded(outcome="completed")]
    records = tuple(r.Record(body=b, ts=i, turn=None if i == 0 else 1) for i, b in enumerate(bodies))
    return Scenario(name="clearing", description="hand-made", records=records, calls=call_positions(records))


def test_tool_clearing_is_not_applied_when_it_cannot_clear_at_least_its_minimum() -> None:
    # Anthropic's clear_at_least: "If the API can't clear at least the specified amount,
    # the strategy will not be applied" — a clearing that reclaims less is not worth
    # breaking the prompt cache for.
    small = "\n".join(f"{i:04d} replica lag" for i in range(3))  # a few tokens
    large = "\n".join(f"{i:04d} replica lag vacuum index" for i in range(150))  # over 700 tokens
    scenario = _tool_run([small, small, large, small, small, small], prelude="lorem ipsum " * 1800)
    budget = budget_for(8_000)  # 7,000 available: trigger 3,500, clear_at_least 700
    policy = ToolClearing(scenario, budget, TokenCounter(), keep=1)
    assert policy.trigger < TokenCounter().count("lorem ipsum " * 1800) < budget.available
    prompts = list(policy.prompts())
    cleared = [sum(line == PLACEHOLDER for line in p.lines) for p in prompts]
    # Calls 1-3 have only small results to clear (c1, c2): nothing is cleared. Call 4 can
    # reach the minimum with c3, and clears c1, c2 and c3, oldest first; c4 and c5 are
    # again too small on their own.
    assert cleared == [0, 0, 0, 0, 3, 3, 3]
    assert [p.evicted for p in prompts][4] == ("record:4", "record:6", "record:8")


def test_holon_blocks_are_the_content_blocks_its_adapter_sends(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The breakpoint cache reads only at block boundaries: holon's must be those of the
    # Anthropic request its adapter builds (one system block per Stable and AgentScoped
    # section but the tools, which travel structured; the TurnScoped text cut after each
    # breakpoint and before each turn in the history), and each round appended in a turn
    # is a block of its own.
    rendered: list[Prompt] = []

    def capture(*args: Any, **kwargs: Any) -> Prompt:
        prompt = build_context(*args, **kwargs)
        rendered.append(prompt)
        return prompt

    # The holon policy is the library's simulation (holon.simulate), which renders there.
    monkeypatch.setattr(renderer, "build_context", capture)
    calls = list(HolonPolicy(scenario, BUDGET, TokenCounter()).prompts())
    renders = [call for call in calls if call.sections[-1][0] != "rounds"]
    assert len(renders) == len(rendered) and len(calls) > len(renders)
    for call, prompt in zip(renders, rendered, strict=True):
        # The text blocks the adapter sends without tool definitions. With them, the
        # history's calls are tool_use / tool_result blocks between these texts: every
        # boundary here is one there too, so the model reads at no more than Anthropic
        # would (tests/test_context_adapters.py checks the native blocks come back).
        request = to_anthropic_messages(msgspec.structs.replace(prompt, tools=()), model="m", max_tokens=1)
        sent = [block["text"] for block in request["system"]]
        # A block starts with the blank line between two sections, or the line break at a
        # cut, where the model's lines have none.
        sent += [re.sub(r"^\n\n?", "", block["text"]) for block in request["messages"][0]["content"]]
        tools = prompt.section("tools")
        ours = [
            "\n".join(call.lines[start:end]).removeprefix("\n")
            for start, end in zip((0, *call.blocks), call.blocks, strict=False)
        ]
        assert [text for text in ours if tools is None or text != tools.text] == sent
    for call in calls:
        assert call.blocks[-1] == len(call.lines) and list(call.blocks) == sorted(set(call.blocks))


def test_holon_rounds_move_the_prompts_last_breakpoint_to_their_end(scenario: Scenario) -> None:
    # What cache_last_block does to the request: the prompt's last breakpoint (its end)
    # moves to the newest round, so no call has more than Anthropic's four.
    # Both layouts: the rfc one's working-memory block makes calls with all four.
    moved = 0
    for policy in (HolonPolicy, HolonRfcLayout):
        base = None
        for call in policy(scenario, BUDGET, TokenCounter()).prompts():
            assert len(call.breakpoints) <= MAX_ANTHROPIC_BREAKPOINTS
            if call.sections[-1][0] != "rounds":
                base = call
                continue
            assert base is not None
            assert call.breakpoints == (*base.breakpoints[:-1], len(call.lines))
            moved += len(base.breakpoints) == MAX_ANTHROPIC_BREAKPOINTS
    assert moved, "some prompts use all four breakpoints"


def test_holon_counts_each_evicted_record_once_whichever_refs_name_it(scenario: Scenario) -> None:
    # A large tool output is shown as a preview with its blob ref, and later the whole
    # result is omitted with its ledger ref: one record evicted, as a baseline counts an
    # item it cut and later dropped once.
    policy = HolonPolicy(scenario, BUDGET, TokenCounter())
    keys = [key for p in policy.prompts() for key in p.evicted]
    refs = set(policy._seen)  # every ref any prompt left

    def record_of(ref: str) -> str:
        scheme, _, value = ref.partition(":")
        origin = policy.evidence_of.get(int(value)) if scheme == "ledger" else policy.blob_origin.get(value)
        return f"record:{origin}" if origin is not None else ref

    counted = [record_of(key) for key in keys]
    assert len(counted) == len(set(counted)), "a record counted twice"
    assert set(counted) == {record_of(ref) for ref in refs}, "every evicted record counted"
    assert len(refs) > len(keys), "some record was named by two refs"
    assert {policy.restore(key) for key in keys} == {"restored"}


@pytest.mark.parametrize(
    "scenario",
    [
        generate_coding("c", 30, seed=1),
        generate_conversation("v", 6, seed=1),
        generate_tasks("t", 30, seed=1),
    ],
    ids=["coding", "conversation", "tasks"],
)
def test_every_policy_runs_the_unstructured_scenarios_within_the_budget(scenario: Scenario) -> None:
    for policy in POLICIES:
        bound = policy(scenario, BUDGET, TokenCounter())
        run = evaluate(bound, scenario, window=8_000, available=BUDGET.available)
        assert run.calls == len(scenario.calls) and run.over_budget == 0, policy.name
        assert run.family == scenario.family
        assert sum(run.required.values()) or run.evidence_required, "something is scored"
        if policy is HolonPolicy:
            assert run.restores["restored"] == run.evictions


def test_the_evaluation_page_renders_from_its_template(tmp_path: Path) -> None:
    # template.md is str.format-ted: a brace in its prose broke the page's writing at the
    # end of a full run, after all of its figures were computed.
    runs = [
        *run_scenario(generate_conversation("conversation-sessions-4", 4, seed=1), windows=(8_000,)),
        *run_scenario(generate_coding("coding-unstructured-8", 8, seed=1), windows=(8_000,)),
    ]
    page = tmp_path / "evaluation.md"
    write_doc(
        page,
        generated=runs,
        samples=[],
        sample_note="no real transcripts",
        checks=verdicts(runs),
        digest="0123456789abcdef",
        chart=runs[0].scenario,
        elapsed=90.0,
        command="python -m benchmarks.eval",
    )
    text = page.read_text(encoding="utf-8")
    assert 'with `extra={"session_id": "s<n>"}`' in text and "`0123456789abcdef`" in text
    assert "## Answer evidence in the prompt" in text and "| conversation-sessions-4 @ 8k | " in text
    assert "coding-unstructured-8 @ 8k: holon keeps 100% of live facts in every call" in text
    assert "{" not in text.split("## Targets")[0].replace('{"session_id"', "")
