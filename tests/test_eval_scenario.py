"""Evaluation scenarios: the call rule, the seeded generator's ground truth, the samples loader."""

from __future__ import annotations

from pathlib import Path

import msgspec

import holon.records as r
from benchmarks.eval.scenario import CONSTRAINT, generate, load_samples
from benchmarks.eval.trace import call_positions, transcript_text

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
