"""Recent history: filled by tokens from a view of the ledger, sent whole when it fits,
cleared only when the budget needs the room (oldest first, never with a placeholder
longer than the result), pairs never split, and the stable anchor — between two moves
the history only grows at its end, and each move frees at least a step."""

from __future__ import annotations

import itertools
import re

import blake3
import msgspec

import holon.records as r
from holon.context import (
    Budget,
    CurrentInput,
    RecordsView,
    RenderConfig,
    build_context,
    get_estimator,
    prompt_rendered,
    restore_bytes,
)
from holon.context.history import HistoryRules, history_units, plan_history
from holon.projections import BriefEntry, ToolExecution
from tests.context_inputs import execution, inputs, message
from tests.live import RecordsSource

COUNT = get_estimator().count
BIG = Budget(context_window=200_000)


def _rules(**cfg: object) -> HistoryRules:
    settings: dict[str, object] = {
        "keep_tool_results": 2,
        "tool_result_max_tokens": 10_000,
        "clear_at_least": 0,
        "protected_tools": frozenset(),
        "message_max_tokens": 10_000,
        "preview_chars": 50,
        "history_refill": 0.5,
    }
    settings.update(cfg)
    return HistoryRules(**settings)  # type: ignore[arg-type]


def _call(n: int, output: str = "", *, tool: str = "bash", turn: int | None = None) -> list[r.Record]:
    """Tool call ``c<n>``: its intent at seq 10n, its result at 10n + 1."""
    turn = n if turn is None else turn
    return [
        r.Record(
            body=r.ToolIntent(call_id=f"c{n}", tool=tool, args={"command": f"step {n}"}),
            ts=n,
            turn=turn,
            seq=10 * n,
        ),
        r.Record(
            body=r.ToolResult(call_id=f"c{n}", tool=tool, status="ok", output=output, exit_code=0),
            ts=n,
            turn=turn,
            seq=10 * n + 1,
        ),
    ]


def _calls(outputs: list[str], **kw: object) -> list[r.Record]:
    return [rec for n, out in enumerate(outputs, start=1) for rec in _call(n, out, **kw)]  # type: ignore[arg-type]


def _render(
    records: list[r.Record], budget: Budget, config: RenderConfig, previous: r.PromptRendered | None = None
):  # type: ignore[no-untyped-def]
    view = RecordsView(records, first_seq=0)
    position = records[-1].seq + 1 if records else 0
    current = CurrentInput(text="carry on")  # no seq: every unit is history, none the turn's own work
    prompt = build_context(
        inputs(previous=previous, position=position, current_input=current), budget, config, history=view
    )
    return prompt, prompt_rendered(prompt)


def _history(prompt) -> str:  # type: ignore[no-untyped-def]
    section = prompt.section("history")
    assert section is not None
    return section.text  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- units


def test_a_cleared_result_keeps_a_short_placeholder_naming_its_size_and_ref() -> None:
    records = _calls([f"output of step {n} " * 20 for n in range(1, 6)])
    units, _ = history_units(records, inputs(), COUNT, _rules(), cleared_through=31, capped=True)
    for n, unit in zip(range(1, 4), units[:3], strict=True):
        size = len((f"output of step {n} " * 20).encode())
        assert unit.text.endswith(f"\n[cleared: {size:,} bytes — restore with ref ledger:{10 * n + 1}]")
    assert all("cleared" not in u.text for u in units[3:])
    assert [o.ref for u in units for o in u.cleared] == ["ledger:11", "ledger:21", "ledger:31"]


def test_no_placeholder_replaces_fewer_bytes_than_its_own_length() -> None:
    # An empty output, a few words and a line: each shorter than "[cleared: … — restore with ref …]".
    records = _calls(["", "ok", "9 bytes\n", "x" * 200])
    units, _ = history_units(
        records, inputs(), COUNT, _rules(keep_tool_results=0), cleared_through=10**6, capped=True
    )
    for unit in units[:3]:
        assert "[cleared:" not in unit.text and not unit.cleared and unit.clearable == 0
    assert units[3].text.endswith("[cleared: 200 bytes — restore with ref ledger:41]")


def test_protected_tools_and_the_newest_results_are_never_cleared() -> None:
    records = _calls(["x " * 50] * 5, tool="bash")
    records[0:2] = _call(1, "x " * 50, tool="read_file")
    units, _ = history_units(
        records,
        inputs(),
        COUNT,
        _rules(protected_tools=frozenset({"read_file"})),
        cleared_through=10**6,
        capped=True,
    )
    assert [("[cleared:" in u.text) for u in units] == [False, True, True, False, False]


def test_oversize_results_are_previewed_only_when_the_history_is_capped() -> None:
    records = _call(1, "word " * 5000)
    whole, _ = history_units(
        records, inputs(), COUNT, _rules(tool_result_max_tokens=100), cleared_through=-1, capped=False
    )
    assert whole[0].text.count("word") == 5000
    capped, _ = history_units(
        records, inputs(), COUNT, _rules(tool_result_max_tokens=100), cleared_through=-1, capped=True
    )
    assert "[cleared: 25,000 bytes — restore with ref ledger:11]" in capped[0].text
    assert capped[0].text.count("word") < 100  # only the preview is kept


def test_a_blob_output_is_shown_whole_when_the_view_reads_it_and_as_its_preview_otherwise() -> None:
    data = b"line\n" * 3000
    digest = blake3.blake3(data).hexdigest()
    blob = r.BlobRef(hash=digest, size=len(data), preview="line\nline\n")
    records = [
        r.Record(body=r.ToolIntent(call_id="c1", tool="bash", args={}), ts=1, turn=1, seq=10),
        r.Record(body=r.ToolResult(call_id="c1", tool="bash", status="ok", blob=blob), ts=1, turn=1, seq=11),
    ]
    read, _ = history_units(
        records,
        inputs(),
        COUNT,
        _rules(),
        cleared_through=-1,
        capped=True,
        blob_text={digest: data.decode()}.get,
    )
    assert read[0].text.count("line") == 3000 and not read[0].cleared
    unread, _ = history_units(records, inputs(), COUNT, _rules(), cleared_through=-1, capped=True)
    assert f"restore with ref blob:{digest}" in unread[0].text
    assert [(o.ref, o.reason) for o in unread[0].cleared] == [
        (f"blob:{digest}", "tool result stored as a blob (preview shown)")
    ]


def test_a_call_that_declared_a_plan_shows_a_stub_not_the_steps() -> None:
    steps = [{"content": "port the parser to rust", "status": "completed"}]
    records = [
        r.Record(
            body=r.ToolIntent(call_id="t1", tool="TodoWrite", args={"todos": steps}), ts=1, turn=1, seq=10
        ),
        r.Record(
            body=r.WorkPlan(
                work_item_id=None, steps=(r.PlanStep(id="1", text="port the parser to rust", status="done"),)
            ),
            ts=1,
            turn=1,
            seq=11,
        ),
        r.Record(
            body=r.ToolResult(call_id="t1", tool="TodoWrite", status="ok", output="ok"), ts=1, turn=1, seq=12
        ),
    ]
    units, _ = history_units(records, inputs(), COUNT, _rules(), cleared_through=-1, capped=False)
    (unit,) = units
    assert "port the parser" not in unit.text
    assert (
        "[declares plan ledger:11: 1 step; working memory shows the current plan"
        " — restore with ref ledger:10]"
        in unit.text
    )


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


# --------------------------------------------------------------------------- filled by the budget


def test_a_history_that_fits_is_sent_whole_however_old_and_large_its_units() -> None:
    # More than any projection window holds, results older than the newest K, a message
    # over the message cap and a result over the result cap: all of it fits, so all of it
    # is shown as written.
    records = _calls(["result " * 300] * 60)
    records.append(r.Record(body=r.Message(role="user", text="long " * 3000), ts=99, turn=99, seq=10_000))
    config = RenderConfig(keep_tool_results=1, tool_result_max_tokens=100, message_max_tokens=100)
    prompt, record = _render(records, BIG, config)
    text = _history(prompt)
    assert text.count("] call c") == 60 and "[cleared:" not in text and "truncated" not in text
    assert "earlier history" not in text and text.count("long ") == 3000
    assert record.history == r.HistoryAnchor(from_seq=0)
    assert not [o for o in prompt.plan.omitted if o.section == "history"]


def test_the_history_reaches_back_past_the_projection_windows() -> None:
    # 80 calls: the fold's tool window holds 24; the history is read from the view.
    records = _calls([f"out {n}" for n in range(1, 81)])
    prompt, _ = _render(records, BIG, RenderConfig())
    assert _history(prompt).count("] call c") == 80


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


def test_a_history_is_placed_with_a_step_to_grow_into_and_grows_until_it_must_move() -> None:
    budget = Budget(context_window=6_000, output_reserve=500)
    records = [
        r.Record(
            body=r.Message(role="user", text=f"message number {i} " + "filler " * 30), ts=i, turn=i, seq=i
        )
        for i in range(300)
    ]
    config = RenderConfig(history_refill=0.5)
    first, record = _render(records[:200], budget, config)
    room = budget.available - (first.plan.total_tokens - first.section("history").tokens)  # type: ignore[union-attr]
    # A first history that does not fit whole takes half the room, leaving the rest to grow into.
    assert 0.4 * room < first.section("history").tokens <= 0.5 * room  # type: ignore[union-attr]
    # It grows at its end, with the same start, until it no longer fits; then it moves, and
    # frees at least half the room again.
    n, fullest = 201, 0
    while True:
        grown, next_record = _render(records[:n], budget, config, previous=record)
        assert grown.plan.history is not None and record.history is not None
        if grown.plan.history.from_seq != record.history.from_seq:
            break
        fullest = max(fullest, grown.section("history").tokens)  # type: ignore[union-attr]
        record, n = next_record, n + 1
    assert fullest > 0.9 * room
    assert grown.plan.history.from_seq > record.history.from_seq
    assert grown.section("history").tokens <= 0.5 * room + 40  # type: ignore[union-attr]


def test_a_history_not_sent_whole_leaves_the_rounds_the_room_one_turn_took() -> None:
    budget = Budget(context_window=6_000, output_reserve=500)
    records = _calls([f"output of step {n}: " + "line of output " * 60 for n in range(1, 90)])
    turn = COUNT(_history_unit_text(records[0], records[1])) + 1
    fullest: dict[float, int] = {}
    for reserve in (0.0, 0.3):
        config = RenderConfig(rounds_reserve=reserve)
        prompt, record = _render(records[:80], budget, config)  # more than fits whole
        most = 0
        for n in range(82, len(records) + 1, 2):
            prompt, record = _render(records[:n], budget, config, previous=record)
            most = max(most, prompt.plan.total_tokens)
        fullest[reserve] = most
    # Without a reserve the history grows into the whole budget; with one, it stops a
    # turn's work short of it (each turn here is one call of the same size).
    assert fullest[0.0] > budget.available - turn
    assert budget.available - 2 * turn < fullest[0.3] <= budget.available - turn
    # A history sent whole is sent whole, whatever room it leaves.
    few = records[:46]  # 23 turns: whole, within a turn of the budget
    whole, _ = _render(few, budget, RenderConfig())
    assert whole.plan.total_tokens > budget.available - turn
    assert "earlier history" not in _history(whole) and "[cleared" not in _history(whole)


def _history_unit_text(intent: r.Record, result: r.Record) -> str:
    units, _ = history_units(
        [intent, result], inputs(), COUNT, _rules(), cleared_through=-1, capped=False
    )
    return units[0].text


def test_clear_at_least_sets_the_least_a_move_frees() -> None:
    budget = Budget(context_window=6_000, output_reserve=500)
    records = [
        r.Record(
            body=r.Message(role="user", text=f"message number {i} " + "filler " * 30), ts=i, turn=i, seq=i
        )
        for i in range(300)
    ]
    sizes = []
    for clear_at_least in (200, 3_000):
        config = RenderConfig(history_refill=1.0, clear_at_least=clear_at_least)
        _, record = _render(records[:200], budget, config)
        moved, _ = _render(records[:201], budget, config, previous=record)
        sizes.append(moved.section("history").tokens)  # type: ignore[union-attr]
    small_step, big_step = sizes
    assert big_step < small_step - 2_000


def test_the_history_keeps_its_start_and_grows_at_its_end() -> None:
    budget = Budget(context_window=4_000, output_reserve=500)
    records = [
        r.Record(
            body=r.Message(role="user", text=f"message number {i} " + "filler " * 30),
            ts=i,
            turn=i,
            seq=100 + i,
        )
        for i in range(200)
    ]
    prompt, record = _render(records[:5], budget, RenderConfig())
    first = _history(prompt)
    moves = 0
    for n in range(6, 200):
        prompt, next_record = _render(records[:n], budget, RenderConfig(), previous=record)
        text = _history(prompt)
        assert record.history is not None and next_record.history is not None
        if next_record.history == record.history:
            # Unmoved: the previous history is a prefix of this one, the new unit after it.
            body = records[n - 1].body
            assert isinstance(body, r.Message)
            assert text.startswith(first + "\n") and text.endswith(body.text)
        else:
            # Moved only because it no longer fitted: it starts later, with room to grow.
            moves += 1
            assert next_record.history.from_seq > record.history.from_seq
            assert len(text) < len(first)
        first, record = text, next_record
    assert 3 <= moves <= 20  # 194 renders, a handful of moves


def test_results_are_cleared_oldest_first_and_only_when_the_room_is_needed() -> None:
    # Results of ~100 tokens: the first few fit uncleared and nothing is cleared; as more
    # arrive, the oldest are cleared (never the newest two), in steps of at least
    # `clear_at_least`, while the history keeps its start; only once nothing more may be
    # cleared does the start move.
    budget = Budget(context_window=4_000, output_reserve=500)
    config = RenderConfig(keep_tool_results=2, clear_at_least=300, history_refill=1.0)
    outputs = ["alpha beta " * 48] * 90
    record = None
    seen: list[tuple[int, int]] = []  # (history start, results cleared) per render
    for n in range(1, 91):
        prompt, record = _render(_calls(outputs[:n]), budget, config, previous=record)
        text = _history(prompt)
        cleared = [int(c) for c in re.findall(r"\] result c(\d+) ok, exit 0:\n\[cleared", text)]
        shown = [int(c) for c in re.findall(r"\] call c(\d+)", text)]
        # Cleared ones are the oldest shown, and never one of the newest two.
        assert cleared == shown[: len(cleared)] and not set(cleared) & {n - 1, n}
        assert prompt.plan.total_tokens <= budget.available
        assert record.history is not None
        seen.append((record.history.from_seq, len(cleared)))
    assert seen[:5] == [(0, 0)] * 5  # whole, nothing cleared while the room was not needed
    steps = []
    for (start, before), (next_start, after) in itertools.pairwise(seen):
        if next_start == start:
            assert after >= before  # cleared once, stays cleared while the start holds
            if after > before:
                steps.append(after - before)
    assert steps and min(steps) >= 3  # each clearing step freed at least 300 tokens
    assert len({start for start, _ in seen}) >= 2


def test_nothing_shown_when_nothing_fits() -> None:
    plan = plan_history(inputs(tools=(execution(1, output="a " * 300),)), COUNT, _rules(), allowance=10)
    assert plan.form is None and plan.anchor is None
    assert {o.ref for o in plan.omissions} == {"ledger:10", "ledger:11"}


def test_an_anchor_the_windows_no_longer_reach_is_moved() -> None:
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
    kept = build_context(inputs(previous=anchored, tools=tools, history_floor=40), budget)
    assert kept.plan.history == r.HistoryAnchor(from_seq=50)
    # They dropped what came before seq 60: the history starts where they do.
    moved = build_context(inputs(previous=anchored, tools=tools, history_floor=60), budget)
    assert moved.plan.history is not None and moved.plan.history.from_seq == 60
    assert "[earlier history (before ledger:60) is not shown" in _history(moved)


def test_the_anchor_is_recorded_in_prompt_rendered_and_round_trips() -> None:
    prompt = build_context(inputs(tools=(execution(1, output="x"),)), BIG)
    record = prompt_rendered(prompt)
    assert record.history == r.HistoryAnchor(from_seq=0)
    wire = r.encode_msgpack_record(r.Record(body=record, ts=1, seq=0))
    assert r.decode_msgpack_record(wire).body == record
    # A record written before the anchor existed (no field) decodes with none.
    old = msgspec.structs.replace(record, history=None)
    decoded = r.decode_msgpack_record(r.encode_msgpack_record(r.Record(body=old, ts=1, seq=0))).body
    assert isinstance(decoded, r.PromptRendered) and decoded.history is None



# --------------------------------------------------------------------------- a brief over the room

def test_a_brief_larger_than_the_history_room_is_cut_instead_of_emptying_the_history() -> None:
    # Briefs had no cap (messages, arguments and tool outputs do). The history is a run of
    # units ending at the newest, so one pasted 260 KB report left out all twenty messages
    # before it too: the prompt had no history at all, only "history over budget".

    report = "verified row\n" * 20_000
    brief = r.Brief(status="result", text=report, work_item_id="w1")
    messages = tuple(message(100 + i, f"message {i}") for i in range(20))
    source = inputs(messages=messages, briefs=(BriefEntry(seq=200, ts=200, turn=200, brief=brief),))
    prompt = build_context(source, Budget(context_window=16_000))

    history = prompt.section("history")
    assert history is not None
    assert "[ledger:119] user: message 19" in history.text
    assert "[brief truncated: 260,000 chars — restore with ref ledger:200]" in history.text
    assert prompt.total_tokens <= 16_000
    [omission] = [o for o in prompt.plan.omitted if o.ref == "ledger:200"]
    assert omission.reason == "brief over its cap"
    source = RecordsSource([r.Record(seq=200, ts=200, body=brief)])
    assert restore_bytes("ledger:200", source) == report.encode()
