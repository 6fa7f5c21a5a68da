"""`holon simulate` and holon.simulate: any ledger's model calls replayed under holon, into a new ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import msgspec
import pytest

import holon.records as r
from holon.cli import main as holon_cli
from holon.context import Budget
from holon.context.sections import LAYOUTS
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.simulate import (
    SIMULATION_FILE,
    BreakpointCache,
    FullHistory,
    PrefixCache,
    PrefixHashes,
    TokenCounter,
    call_positions,
    cumulative,
    read_simulation,
    recorded_run,
    simulate_ledger,
    simulation_budget,
)
from tests.cli_support import ROOT, build_ledger, invoke, tree_bytes

SESSION = ROOT / "fixtures" / "importers" / "claude-code" / "session.jsonl"
# A longer run: its history outgrows the window at 8,000 tokens and moves its start.
LONG_SESSION = ROOT / "fixtures" / "importers" / "claude-code" / "long_request.jsonl"
BUDGET = "8000"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Claude Code session imported into a ledger, as a newcomer does first."""
    path = tmp_path_factory.mktemp("imported") / "l"
    assert invoke("init", path, "--agent-id", "newcomer").exit_code == 0
    done = invoke("import", path, SESSION, "--from", "claude-code")
    assert done.exit_code == 0, done.output
    return path


@pytest.fixture(scope="module")
def simulated(imported: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("simulated") / "out"
    result = invoke("simulate", imported, "-o", out, "--budget", BUDGET)
    assert result.exit_code == 0, result.output
    return out


def _budget(window: int, reserve: int) -> dict[str, object]:
    return msgspec.to_builtins(Budget(context_window=window, output_reserve=reserve))  # type: ignore[no-any-return]


def _records(path: Path) -> list[r.Record]:
    with Ledger.open(path, readonly=True) as ledger:
        return list(ledger.read())


def test_an_imported_run_gets_a_prompt_per_call_that_prompts_check_reproduces(
    imported: Path, simulated: Path
) -> None:
    # The imported ledger has no prompt to check; the simulated one has holon's.
    assert not [x for x in _records(imported) if isinstance(x.body, r.PromptRendered)]
    prompts = [x for x in _records(simulated) if isinstance(x.body, r.PromptRendered)]
    assert prompts
    checked = invoke("prompts", simulated, "--check", "--json")
    assert checked.exit_code == 0, checked.output
    document = json.loads(checked.output)
    assert document["summary"]["by_status"] == {"reproduced": len(prompts)}
    # The window given, an eighth of it kept for the answer.
    budgets = {(p.body.budget, json.dumps(p.body.render_config["budget"], sort_keys=True)) for p in prompts}
    assert budgets == {(8000, json.dumps(_budget(8000, 1000), sort_keys=True))}


def test_the_simulated_ledger_holds_the_evidence_as_the_runtime_writes_it(
    imported: Path, simulated: Path
) -> None:
    source = recorded_run(_records(imported)).records
    out = _records(simulated)
    evidence = recorded_run(out).records
    # The same evidence, in order, with its timestamps and turns (the ledger gives new seqs).
    assert [(x.kind, x.ts, x.turn, x.body) for x in evidence] == [
        (x.kind, x.ts, x.turn, x.body) for x in source
    ]
    # Derived records and prompts are checked like any ledger's: the refresh re-runs equal.
    verified = invoke("verify", simulated)
    assert verified.exit_code == 0, verified.output
    # Every prompt is inside an open turn, as the runtime records them.
    assert all(x.turn is not None for x in out if isinstance(x.body, r.PromptRendered))


def test_audit_and_stats_read_the_simulated_prompts(simulated: Path) -> None:
    tokens = invoke("audit", simulated, "--report", "tokens", "--json")
    assert tokens.exit_code == 0, tokens.output
    rows = json.loads(tokens.output)
    assert {row["section"] for row in rows} >= {"history", "(total)"}
    assert _cache_rows_are_the_calls_breaks(simulated)
    stats = invoke("stats", simulated)
    assert stats.exit_code == 0
    assert "no recorded prompts" not in stats.output
    assert "prompt_rendered" in stats.output


def _report(path: Path, name: str) -> list[dict[str, Any]]:
    result = invoke("audit", path, "--report", name, "--json")
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.output)
    return rows


def _cache_rows_are_the_calls_breaks(path: Path) -> list[dict[str, Any]]:
    """The cache report's rows, checked against the calls report: the first call (the cache
    starts cold), then one per call that broke the prefix."""
    cache = _report(path, "cache")
    calls = {row["seq"]: row for row in _report(path, "calls")}
    wanted = [seq for seq, row in calls.items() if row["prefix_break"] or row["call"] == 1]
    assert [row["seq"] for row in cache] == wanted
    assert cache[0]["break_why"] == "first call" and cache[0]["lost_tokens"] == cache[0]["total_tokens"]
    for row in cache:
        call = calls[row["seq"]]
        assert (row["break_section"], row["break_why"]) == (call["break_section"], call["break_why"])
        assert row["lost_tokens"] == call["total_tokens"] - call["shared_tokens"]
    return cache


def test_the_cache_report_finds_where_a_simulated_run_lost_its_cached_prefix(tmp_path: Path) -> None:
    source = tmp_path / "l"
    assert invoke("init", source, "--agent-id", "long").exit_code == 0
    assert invoke("import", source, LONG_SESSION, "--from", "claude-code").exit_code == 0
    out = tmp_path / "out"
    result = invoke("simulate", source, "-o", out, "--budget", BUDGET)
    assert result.exit_code == 0, result.output
    rows = _cache_rows_are_the_calls_breaks(out)
    assert rows
    # The default layout's key holds while the history moves: a key-only view has no row here.
    held = [row for row in rows if row["previous_key"] == row["cache_key"]]
    assert held and {row["changed"] for row in held} == {None}
    assert "history step" in {row["break_why"] for row in held}


def test_a_source_s_prompts_and_its_simulation_s_break_apart(tmp_path: Path) -> None:
    # Audited together, each ledger's prompts are compared with its own only (one agent
    # each): the same rows as each audited alone.
    source = build_ledger(tmp_path / "live", "session_multi_work")
    out = tmp_path / "out"
    assert invoke("simulate", source, "-o", out, "--budget", "16000", "--agent-id", "sim").exit_code == 0
    both = _report(source, "cache"), _report(out, "cache")
    assert all(both)
    result = invoke("audit", source, out, "--report", "cache", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [*both[0], *both[1]]  # by agent: session_multi_work, sim


def test_audit_loads_both_series_and_the_report_compares_them(imported: Path, simulated: Path) -> None:
    simulation = read_simulation(simulated)
    rows = json.loads(invoke("audit", simulated, "--sql", "SELECT * FROM simulated_calls", "--json").output)
    assert len(rows) == 2 * len(simulation.calls)
    first = simulation.calls[0]
    assert [(row["series"], row["tokens"], row["cached_prefix"], row["prompt_seq"]) for row in rows[:2]] == [
        ("holon", first.holon.tokens, first.holon.cached_prefix, first.prompt_seq),
        ("tool", first.tool.tokens, first.tool.cached_prefix, first.prompt_seq),
    ]
    report = json.loads(invoke("audit", simulated, "--report", "simulation", "--json").output)
    by_series = {row["series"]: row for row in report}
    for series, totals in (("holon", simulation.holon), ("tool", simulation.tool)):
        assert by_series[series]["tokens"] == totals.tokens
        assert by_series[series]["cost_prefix"] == pytest.approx(totals.cost_prefix, abs=0.05)
    assert by_series["holon"]["cost_prefix_vs_tool"] == pytest.approx(
        simulation.holon.cost_prefix / simulation.tool.cost_prefix, abs=0.0005
    )
    # A ledger simulate did not write has none.
    none = invoke("audit", imported, "--report", "simulation", "--json")
    assert none.exit_code == 0 and json.loads(none.output) == []


def test_another_agent_id_lets_one_audit_load_the_source_and_its_simulation(
    imported: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert (
        invoke("simulate", imported, "-o", out, "--budget", BUDGET, "--agent-id", "newcomer-sim").exit_code
        == 0
    )
    assert read_simulation(out).agent_id == "newcomer-sim"
    assert invoke("prompts", out, "--check").exit_code == 0  # rendered for the agent OUT belongs to
    both = invoke(
        "audit", imported, out, "--sql", "SELECT agent_id, count(*) AS n FROM prompts GROUP BY 1", "--json"
    )
    assert both.exit_code == 0, both.output
    assert [row["agent_id"] for row in json.loads(both.output)] == ["newcomer-sim"]
    bad = invoke("simulate", imported, "-o", tmp_path / "bad", "--agent-id", "")
    assert bad.exit_code == 2 and "must be 1-256 printable characters" in bad.stderr
    assert not (tmp_path / "bad").exists()


def test_the_comparison_has_both_series_for_every_call(imported: Path, simulated: Path) -> None:
    simulation = read_simulation(simulated)
    source = _records(imported)
    run = recorded_run(source)
    assert len(simulation.calls) == len(run.calls) == len(call_positions(run.records))
    assert [c.call for c in simulation.calls] == list(range(1, len(run.calls) + 1))
    assert [c.source_seq for c in simulation.calls] == [run.records[p].seq for p in run.calls]
    out = _records(simulated)
    for call in simulation.calls:
        assert isinstance(out[call.prompt_seq].body, r.PromptRendered)
    assert sum(c.rendered for c in simulation.calls) == simulation.prompts_rendered
    for series, totals in ((lambda c: c.holon, simulation.holon), (lambda c: c.tool, simulation.tool)):
        costs = [series(c) for c in simulation.calls]
        assert totals.tokens == sum(c.tokens for c in costs)
        assert totals.cached_prefix == sum(c.cached_prefix for c in costs)
        assert totals.written_breakpoints == sum(c.written_breakpoints for c in costs)
        assert all(c.cached_prefix + c.written_prefix <= c.tokens for c in costs)
    assert simulation.holon.max_tokens <= simulation.context_window - simulation.output_reserve
    assert (simulation.source_head_seq, simulation.agent_id) == (source[-1].seq, "newcomer")


def test_the_tool_series_is_full_history_under_the_same_cache_models(imported: Path, simulated: Path) -> None:
    # The stand-in for what the tool sent, counted call by call, as an independent reader would.
    run = recorded_run(_records(imported))
    prefix, marks, hashes = PrefixCache(), BreakpointCache(), PrefixHashes()
    expected = []
    for prompt in FullHistory(
        run, Budget(context_window=8000, output_reserve=1000), TokenCounter()
    ).prompts():
        cum, chain = cumulative(prompt.costs), hashes.of(prompt.lines)
        expected.append((cum[-1], prefix.call(prompt, cum, chain), marks.call(prompt, cum, chain)))
    got = [
        (c.tool.tokens, c.tool.cached_prefix, c.tool.cached_breakpoints)
        for c in read_simulation(simulated).calls
    ]
    assert got == expected


def test_the_tool_sent_a_large_output_whole_and_holon_has_it_in_its_blob_store(tmp_path: Path) -> None:
    # The ledger keeps a large output as a blob ref and a preview; the tool sent all of it.
    output = "\n".join(f"line {i}: migrated table t{i} with {i * 7} rows" for i in range(600))
    source = tmp_path / "l"
    with Ledger.create(source, agent_id="x", fsync="never") as ledger:
        for ts, body in enumerate(
            (
                r.TurnStarted(trigger="operator", input="migrate the tables"),
                r.Message(role="user", text="migrate the tables"),
                r.ToolIntent(call_id="c1", tool="shell", args={"cmd": "migrate"}),
                r.ToolResult(call_id="c1", tool="shell", status="ok", output=output),
                r.Message(role="assistant", text="all 600 tables migrated"),
                r.TurnEnded(outcome="completed"),
            ),
            1,
        ):
            ledger.append(r.Record(body=body, ts=ts, turn=0))
    held = _records(source)[3].body
    assert isinstance(held, r.ToolResult) and held.blob is not None
    out = tmp_path / "out"
    assert invoke("simulate", source, "-o", out, "--budget", "200000").exit_code == 0
    answer = read_simulation(out).calls[-1]  # the call the assistant's answer came from
    assert answer.tool.tokens > TokenCounter().count(output)
    assert invoke("get", out, f"blob:{held.blob.hash}").stdout == output
    assert invoke("verify", out).exit_code == 0


def test_the_source_ledger_is_never_changed(imported: Path, tmp_path: Path) -> None:
    before = tree_bytes(imported)
    assert invoke("simulate", imported, "-o", tmp_path / "a", "--budget", BUDGET).exit_code == 0
    assert invoke("simulate", imported, "-o", tmp_path / "a", "--budget", BUDGET).exit_code == 2
    assert invoke("simulate", imported, "-o", tmp_path / "b", "--budget", "10").exit_code == 2
    assert tree_bytes(imported) == before


def test_same_ledger_same_simulation(imported: Path, simulated: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    assert invoke("simulate", imported, "-o", again, "--budget", BUDGET).exit_code == 0

    # Byte for byte: the ledger (segments, blobs, header) and the comparison.
    def written(path: Path) -> dict[str, bytes]:
        return {name: data for name, data in tree_bytes(path).items() if not name.endswith(".lock")}

    assert written(again) == written(simulated)


@pytest.mark.slow
def test_a_holon_ledger_is_simulated_with_its_own_prompts_replaced(tmp_path: Path) -> None:
    source = build_ledger(tmp_path / "live", "session_multi_work")
    recorded = [x for x in _records(source) if isinstance(x.body, r.PromptRendered)]
    out = tmp_path / "out"
    result = invoke("simulate", source, "-o", out, "--budget", "16000", "--layout", "rfc", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    prompts = [x for x in _records(out) if isinstance(x.body, r.PromptRendered)]
    assert summary["prompts_rendered"] == len(prompts) and recorded
    # Rendered anew with the budget given, not copied from the source.
    assert {json.dumps(p.body.render_config["budget"]) for p in prompts} == {json.dumps(_budget(16000, 2000))}
    assert {p.body.render_config["layout"] for p in prompts} == {"rfc"}
    assert invoke("prompts", out, "--check").exit_code == 0


def test_an_existing_out_is_refused_and_left_alone(imported: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = invoke("simulate", imported, "-o", out)
    assert result.exit_code == 2
    assert f"{out} exists" in result.stderr and "choose another path" in result.stderr
    assert tree_bytes(out) == {"keep.txt": b"mine"}


def test_a_bad_budget_is_a_clear_error_and_writes_nothing(imported: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    reserve = invoke("simulate", imported, "-o", out, "--budget", "4000", "--output-reserve", "4000")
    assert reserve.exit_code == 2
    assert "leaves nothing of a 4,000-token window" in reserve.stderr
    tiny = invoke("simulate", imported, "-o", out, "--budget", "40")
    assert tiny.exit_code == 2
    assert "model call 1 of" in tiny.stderr and "--budget" in tiny.stderr
    assert not out.exists()
    with pytest.raises(UsageError, match="not a budget"):
        simulation_budget(0)


def test_a_ledger_without_model_calls_is_a_clear_error(tmp_path: Path) -> None:
    source = tmp_path / "l"
    with Ledger.create(source, agent_id="x", fsync="never") as ledger:
        ledger.append(r.Record(body=r.TurnStarted(trigger="operator", input="hello"), ts=1, turn=0))
        ledger.append(r.Record(body=r.Message(role="user", text="hello"), ts=2, turn=0))
    result = invoke("simulate", source, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "holds no model calls" in result.stderr
    assert not (tmp_path / "out").exists()
    with Ledger.open(source, readonly=True) as ledger, pytest.raises(UsageError, match="no model calls"):
        simulate_ledger(ledger, tmp_path / "out", simulation_budget(8000))


def test_a_ledger_simulate_did_not_write_has_no_comparison(imported: Path) -> None:
    with pytest.raises(UsageError, match=f"no {SIMULATION_FILE}"):
        read_simulation(imported)


def test_the_layout_choices_are_the_renderers() -> None:
    command = holon_cli.commands["simulate"]  # type: ignore[attr-defined]
    option = next(p for p in command.params if p.name == "layout")
    assert isinstance(option.type, click.Choice)
    assert sorted(option.type.choices) == sorted(LAYOUTS)


def test_a_run_s_recorded_model_calls_are_not_evidence() -> None:
    # A model_call states what a provider reported for a call of the recorded run; a
    # simulation makes no call, so the record would name usage and a prompt it never had.
    usage = r.ModelCall(provider="anthropic", model="m", prompt_seq=9, round=1, input_tokens=100)
    records = [
        r.Record(body=r.TurnStarted(trigger="user"), ts=1, turn=1, seq=0),
        r.Record(body=r.Message(role="user", text="go"), ts=1, turn=1, seq=1),
        r.Record(body=usage, ts=2, turn=1, seq=2),
        r.Record(body=r.Message(role="assistant", text="done"), ts=3, turn=1, seq=3),
    ]
    assert [rec.kind for rec in recorded_run(records).records] == ["turn_started", "message", "message"]
