"""Recent history: pairs never split, results cleared in batches with restorable refs, and
the stable anchor — between two moves the history only grows at its end."""

from __future__ import annotations

import re

import blake3
import msgspec

import holon.records as r
from holon.context import Budget, RenderConfig, build_context, get_estimator, prompt_rendered
from holon.context.history import HistoryRules, clearing_cut, history_units, plan_history
from holon.projections import ToolExecution
from tests.context_inputs import execution, inputs, message

COUNT = get_estimator().count
BIG = Budget(context_window=200_000)


def _rules(**cfg: object) -> HistoryRules:
    settings: dict[str, object] = {
        "keep_tool_results": 2,
        "tool_result_max_tokens": 10_000,
        "clear_batch_tokens": 0,
        "protected_tools": frozenset(),
        "message_max_tokens": 10_000,
        "preview_chars": 50,
        "history_refill": 0.5,
    }
    settings.update(cfg)
    return HistoryRules(**settings)  # type: ignore[arg-type]


def _units(tools: tuple[ToolExecution, ...], *, previous: int = -1, **cfg: object):  # type: ignore[no-untyped-def]
    rules = _rules(**cfg)
    pairs = list(tools)
    out = {ex.result_seq: COUNT(ex.result.output) for ex in pairs if ex.result is not None}
    cut = clearing_cut(pairs, out, previous=previous, rules=rules, batch=rules.clear_batch_tokens)  # type: ignore[arg-type]
    return history_units(inputs(tools=tools), COUNT, rules, cleared_through=cut), cut


def test_results_older_than_k_are_cleared_with_a_restorable_placeholder() -> None:
    tools = tuple(execution(n, output=f"output of step {n} " * 20) for n in range(1, 6))
    units, _ = _units(tools)
    texts = [u.text for u in units]
    assert all("cleared" not in t for t in texts[-2:])
    for n, text in zip(range(1, 4), texts[:3], strict=True):
        size = len((f"output of step {n} " * 20).encode())
        assert (
            f"[tool result cleared: bash call c{n}, {size:,} bytes — restore with ref ledger:{10 * n + 1}]"
            in text
        )
    assert [o.ref for u in units for o in u.cleared] == ["ledger:11", "ledger:21", "ledger:31"]


def test_protected_tools_are_never_cleared() -> None:
    tools = tuple(execution(n, tool="read_file" if n == 1 else "bash", output="x " * 50) for n in range(1, 6))
    units, _ = _units(tools, protected_tools=frozenset({"read_file"}))
    assert "cleared" not in units[0].text
    assert "cleared" in units[1].text


def test_oversize_results_are_cleared_even_when_recent() -> None:
    tools = (execution(1, output="word " * 5000),)
    units, _ = _units(tools, tool_result_max_tokens=100)
    assert "[tool result cleared: bash call c1, 25,000 bytes" in units[0].text
    assert units[0].text.count("word") < 100  # only the preview is kept


def test_clearing_happens_in_batches_from_the_recorded_cut() -> None:
    # Each result is ~100 tokens; a batch needs 250, so clearing moves three results at a
    # time — and each render starts from the cut the previous one recorded.
    cut = -1
    counts = []
    for n_calls in range(1, 11):
        tools = tuple(execution(n, output="alpha beta " * 48) for n in range(1, n_calls + 1))
        units, cut = _units(tools, previous=cut, keep_tool_results=1, clear_batch_tokens=250)
        counts.append(sum(1 for u in units if "cleared" in u.text))
    assert counts == [0, 0, 0, 3, 3, 3, 6, 6, 6, 9]


def test_blob_results_point_at_their_blob_and_are_reported() -> None:
    data = b"line\n" * 3000
    units, _ = _units((execution(1, blob=data),))
    digest = blake3.blake3(data).hexdigest()
    assert f"restore with ref blob:{digest}" in units[0].text
    assert [(o.ref, o.reason) for o in units[0].cleared] == [
        (f"blob:{digest}", "tool result stored as a blob (preview shown)")
    ]


def test_pairs_are_never_split_and_orphans_are_named() -> None:
    orphan = ToolExecution(
        call_id="c9",
        tool="bash",
        command="bash",
        turn=1,
        ts=1,
        result_seq=91,
        result=r.ToolResult(call_id="c9", tool="bash", status="ok", output="x"),
    )
    in_flight = ToolExecution(
        call_id="c8",
        tool="bash",
        command="bash",
        turn=1,
        ts=1,
        intent_seq=80,
        intent=r.ToolIntent(call_id="c8", tool="bash"),
    )
    tools = (execution(1, output="one"), orphan, in_flight, execution(2, output="two"))
    prompt = build_context(inputs(tools=tools), BIG)
    history = prompt.section("history")
    assert history is not None
    assert (
        re.findall(r"\] call (\S+)", history.text)
        == re.findall(r"\] result (\S+)", history.text)
        == ["c1", "c2"]
    )
    # The call whose outcome is unknown is continuation context, not history.
    current = prompt.section("current_input")
    assert current is not None and "tool call c8" in current.text and "outcome is unknown" in current.text
    assert any(o.ref == "ledger:91" for o in prompt.plan.omitted)


def test_history_fills_newest_first_and_names_what_it_left_out() -> None:
    messages = tuple(message(100 + i, f"message number {i} " + "filler " * 30) for i in range(40))
    small = build_context(inputs(messages=messages), Budget(context_window=1_500), RenderConfig())
    history = small.section("history")
    assert history is not None
    shown = [int(s) for s in re.findall(r"message number (\d+)", history.text)]
    assert shown and shown == list(range(shown[0], 40))  # a contiguous newest suffix
    first = 100 + shown[0]
    assert f"[earlier history (before ledger:{first}) is not shown" in history.text
    refs = {o.ref for o in small.plan.omitted}
    assert {f"ledger:{100 + i}" for i in range(shown[0])} <= refs
    assert small.plan.history == r.HistoryAnchor(from_seq=first)
    assert small.total_tokens <= 1_500


def test_nothing_shown_when_nothing_fits() -> None:
    plan = plan_history(inputs(tools=(execution(1, output="a " * 300),)), COUNT, _rules(), allowance=10)
    assert plan.form is None and plan.anchor is None
    assert {o.ref for o in plan.omissions} == {"ledger:10", "ledger:11"}


# --------------------------------------------------------------------------- the anchor


def _render(budget: Budget, previous: r.PromptRendered | None, **fields: object):  # type: ignore[no-untyped-def]
    config = RenderConfig(clear_batch_tokens=10_000)
    prompt = build_context(inputs(previous=previous, **fields), budget, config)
    return prompt, prompt_rendered(prompt)


def _history(prompt) -> str:  # type: ignore[no-untyped-def]
    section = prompt.section("history")
    assert section is not None
    return section.text  # type: ignore[no-any-return]


def test_the_history_keeps_its_start_and_grows_at_its_end() -> None:
    budget = Budget(context_window=4_000, output_reserve=500)
    messages = [message(100 + i, f"message number {i} " + "filler " * 30) for i in range(200)]
    prompt, record = _render(budget, None, messages=tuple(messages[:5]))
    first = _history(prompt)
    moves = 0
    for n in range(6, 200):
        prompt, next_record = _render(budget, record, messages=tuple(messages[:n]))
        text = _history(prompt)
        assert record.history is not None and next_record.history is not None
        if next_record.history == record.history:
            # Unmoved: the previous history is a prefix of this one, the new unit after it.
            assert text.startswith(first + "\n") and text.endswith(messages[n - 1].message.text)
        else:
            # Moved only because it no longer fitted: it starts later, refilled to part of its room.
            moves += 1
            assert next_record.history.from_seq > record.history.from_seq
            assert len(text) < len(first)
        first, record = text, next_record
    assert 3 <= moves <= 20  # 194 renders, a handful of moves


def test_a_moved_history_refills_only_part_of_its_room() -> None:
    budget = Budget(context_window=6_000, output_reserve=500)
    messages = tuple(message(100 + i, f"message number {i} " + "filler " * 30) for i in range(300))
    grown = build_context(inputs(messages=messages), budget, RenderConfig(history_refill=1.0))
    refilled = build_context(inputs(messages=messages), budget, RenderConfig(history_refill=0.4))
    full = grown.section("history")
    part = refilled.section("history")
    assert full is not None and part is not None
    assert part.tokens < 0.5 * full.tokens  # room left to grow into
    assert full.text.endswith(part.text.split("\n", 2)[2])  # the same newest units


def test_tool_results_cleared_once_stay_cleared_and_new_ones_are_appended_whole() -> None:
    rules_config = RenderConfig(keep_tool_results=1, clear_batch_tokens=400)
    budget = Budget(context_window=50_000)
    tools = [execution(n, output="alpha beta " * 48) for n in range(1, 12)]
    record = None
    cuts = []
    for n in range(1, 12):
        prompt = build_context(inputs(previous=record, tools=tuple(tools[:n])), budget, rules_config)
        record = prompt_rendered(prompt)
        assert record.history is not None
        cuts.append(record.history.cleared_through)
        text = _history(prompt)
        cleared = re.findall(r"tool result cleared: bash call c(\d+)", text)
        assert [int(c) for c in cleared] == [k for k in range(1, n + 1) if 10 * k + 1 <= cuts[-1]]
    # The cut moves in steps of at least the batch (~4 results of ~100 tokens), never back.
    assert cuts == sorted(cuts) and len(set(cuts)) <= 4


def test_an_anchor_the_windows_no_longer_reach_is_moved_into_their_newer_half() -> None:
    budget = Budget(context_window=50_000)
    tools = tuple(execution(n, output=f"out {n}") for n in range(1, 25))
    anchored = r.PromptRendered(
        working_memory_revision=2,
        compression_epoch=0,
        cache_key="k",
        prompt_hash="h",
        total_tokens=1,
        budget=50_000,
        estimator="holon-heuristic",
        history=r.HistoryAnchor(from_seq=50),
    )
    # The windows still reach back to seq 50: the anchor holds.
    kept = build_context(inputs(previous=anchored, tools=tools, history_floor=40, history_slack=130), budget)
    assert kept.plan.history == r.HistoryAnchor(from_seq=50)
    # They dropped what came before seq 60: the history starts again at or after the slack.
    moved = build_context(inputs(previous=anchored, tools=tools, history_floor=60, history_slack=130), budget)
    assert moved.plan.history is not None and moved.plan.history.from_seq == 130
    assert "[earlier history (before ledger:130) is not shown" in _history(moved)


def test_the_anchor_is_recorded_in_prompt_rendered_and_round_trips() -> None:
    prompt = build_context(inputs(tools=(execution(1, output="x"),)), BIG)
    record = prompt_rendered(prompt)
    assert record.history == r.HistoryAnchor(from_seq=10)
    wire = r.encode_msgpack_record(r.Record(body=record, ts=1, seq=0))
    assert r.decode_msgpack_record(wire).body == record
    # A record written before the anchor existed (no field) decodes with none.
    old = msgspec.structs.replace(record, history=None)
    decoded = r.decode_msgpack_record(r.encode_msgpack_record(r.Record(body=old, ts=1, seq=0))).body
    assert isinstance(decoded, r.PromptRendered) and decoded.history is None
