"""Recent history: newest-first fill, pairs never split, results cleared in batches with restorable refs."""

from __future__ import annotations

import re

import blake3

import holon.records as r
from holon.context import Budget, RenderConfig, build_context, get_estimator
from holon.context.sections import history_units, render_history
from holon.projections import ToolExecution
from tests.context_inputs import execution, inputs, message

COUNT = get_estimator().count
BIG = Budget(context_window=200_000)


def _units(tools: tuple[ToolExecution, ...], **cfg: object):  # type: ignore[no-untyped-def]
    settings = {
        "keep_tool_results": 2,
        "tool_result_max_tokens": 10_000,
        "clear_batch_tokens": 0,
        "protected_tools": frozenset(),
        "message_max_tokens": 10_000,
        "preview_chars": 50,
    }
    settings.update(cfg)
    return history_units(inputs(tools=tools), COUNT, **settings)  # type: ignore[arg-type]


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


def test_clearing_happens_in_batches() -> None:
    # Each result is ~100 tokens; a batch needs 250, so clearing moves three results at a time.
    def cleared_count(n_calls: int) -> int:
        tools = tuple(execution(n, output="alpha beta " * 48) for n in range(1, n_calls + 1))
        units, _ = _units(tools, keep_tool_results=1, clear_batch_tokens=250)
        return sum(1 for u in units if "cleared" in u.text)

    counts = [cleared_count(n) for n in range(1, 11)]
    assert counts == [0, 0, 0, 3, 3, 3, 6, 6, 6, 9]


def test_blob_results_point_at_their_blob() -> None:
    data = b"line\n" * 3000
    units, _ = _units((execution(1, blob=data),))
    digest = blake3.blake3(data).hexdigest()
    assert f"restore with ref blob:{digest}" in units[0].text


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
    assert (
        f"[{shown[0]} earlier history items omitted (ledger:100 … ledger:{100 + shown[0] - 1})"
        in history.text
    )
    refs = {o.ref for o in small.plan.omitted}
    assert {f"ledger:{100 + i}" for i in range(shown[0])} <= refs
    assert small.total_tokens <= 1_500


def test_render_history_returns_nothing_when_nothing_fits() -> None:
    units, _ = _units((execution(1, output="a " * 300),))
    form, omissions = render_history(units, 10, COUNT)
    assert form is None and {o.ref for o in omissions} == {"ledger:10", "ledger:11"}
