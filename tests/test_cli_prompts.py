"""`holon prompts` and holon.replay's prompt check: every recorded prompt rendered again and compared."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.context import Budget
from holon.context.estimator import get_estimator
from holon.context.prompt import AssemblyPlan, CacheIdentity, Prompt, PromptSection
from holon.context.render import RENDER_VERSION
from holon.ledger import Ledger
from holon.replay import APPENDED, PromptsSummary, check_prompts, prompt_at, shared_prefix
from holon.runtime import Agent, AgentConfig
from tests.cli_support import build_ledger, invoke, live_records, write_jsonl
from tests.runtime_support import ledger_records

FIXTURE = "session_multi_work"


def _write(path: Path, records: list[r.Record]) -> Path:
    with Ledger.create(path, agent_id=FIXTURE, fsync="never") as ledger:
        ledger.append_many(records)
    return path


def _with_prompt(records: tuple[r.Record, ...], nth: int, **changes: object) -> list[r.Record]:
    """``records`` with the ``nth`` prompt_rendered body changed (the ledger's bytes, not the evidence)."""
    out = list(records)
    prompts = [i for i, x in enumerate(out) if isinstance(x.body, r.PromptRendered)]
    index = prompts[nth]
    out[index] = msgspec.structs.replace(out[index], body=msgspec.structs.replace(out[index].body, **changes))
    return out


def _summary(output: str) -> dict[str, object]:
    summary = json.loads(output)["summary"]
    assert isinstance(summary, dict)
    return summary


@pytest.mark.slow
def test_every_recorded_prompt_of_a_live_ledger_reproduces(tmp_path: Path) -> None:
    path = build_ledger(tmp_path / "l", FIXTURE)
    recorded = [x for x in live_records(FIXTURE) if isinstance(x.body, r.PromptRendered)]
    result = invoke("prompts", path, "--check", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert [p["seq"] for p in document["prompts"]] == [x.seq for x in recorded]
    assert {p["status"] for p in document["prompts"]} == {"reproduced"}
    assert document["summary"]["by_status"] == {"reproduced": len(recorded)}
    # Every prompt after the first is compared with the one before it.
    assert document["summary"]["compared"] == len(recorded) - 1
    text = invoke("prompts", path)
    assert text.exit_code == 0
    assert f"{len(recorded)} recorded prompts rendered again" in text.output
    assert f"reproduced {len(recorded)} · DIFFERS 0" in text.output


def test_the_rendered_hash_is_what_render_at_turn_gives(tmp_path: Path) -> None:
    # The same rendering as `holon render --at-turn N`, one fold for all of them.
    records = live_records("boundary_turn_cap")
    checks = list(check_prompts(records, agent_id="boundary_turn_cap"))
    assert len(checks) == 13
    for check in checks:
        assert check.turn is not None
        again = prompt_at(records, check.turn, agent_id="boundary_turn_cap", call=check.call)
        assert again.prompt.prompt_hash == check.rendered_hash == check.recorded_hash


@pytest.mark.slow
def test_a_prompt_whose_bytes_differ_fails_the_check_naming_its_seq(tmp_path: Path) -> None:
    records = _with_prompt(live_records(FIXTURE), 5, prompt_hash="0" * 64)
    seq = [x.seq for x in records if isinstance(x.body, r.PromptRendered)][5]
    path = _write(tmp_path / "l", records)
    listed = invoke("prompts", path)
    assert listed.exit_code == 0  # without --check it reports, and succeeds
    assert "DIFFERS 1" in listed.output
    assert f"seq {seq} · " in listed.output.split("prompts that differ")[1]
    failed = invoke("prompts", path, "--check")
    assert failed.exit_code == 1
    assert f"the prompt at seq {seq} " in failed.stderr
    assert "0" * 64 in failed.stderr
    assert "--at-turn" in failed.stderr


def test_a_prompt_from_another_renderer_version_is_not_comparable_not_a_failure(tmp_path: Path) -> None:
    records = live_records(FIXTURE)
    first = next(x.body for x in records if isinstance(x.body, r.PromptRendered))
    older = {**first.render_config, "version": RENDER_VERSION - 1}
    path = _write(tmp_path / "l", _with_prompt(records, 0, render_config=older, prompt_hash="1" * 64))
    result = invoke("prompts", path, "--check")
    assert result.exit_code == 0, result.output
    assert "not comparable 1" in result.output
    assert f"1 prompt: recorded by renderer version {RENDER_VERSION - 1}" in result.output


def test_a_prompt_without_a_render_config_is_counted_not_rendered(tmp_path: Path) -> None:
    path = _write(tmp_path / "l", _with_prompt(live_records(FIXTURE), 2, render_config={}))
    document = json.loads(invoke("prompts", path, "--json").output)
    third = document["prompts"][2]
    assert third["status"] == "unconfigured"
    assert third["rendered_hash"] is None
    # The prompt after it has nothing rendered to compare with.
    assert document["prompts"][3]["shared"] is None
    assert document["summary"]["compared"] == len(document["prompts"]) - 3


def test_a_turn_range_compares_its_first_prompt_with_the_one_before_it(tmp_path: Path) -> None:
    path = build_ledger(tmp_path / "l", FIXTURE)
    everything = json.loads(invoke("prompts", path, "--json").output)["prompts"]
    ranged = json.loads(invoke("prompts", path, "--json", "--from-turn", "10", "--until-turn", "12").output)
    # Each row as the whole ledger's check has it: the first one compared with turn 9's prompt.
    assert ranged["prompts"] == [p for p in everything if 10 <= p["turn"] <= 12]
    assert len(ranged["prompts"]) >= 2 and ranged["prompts"][0]["shared"] is not None
    refused = invoke("prompts", path, "--from-turn", "12", "--until-turn", "10")
    assert refused.exit_code == 2
    assert "--from-turn 12 is after --until-turn 10" in refused.stderr
    # A turn past the ledger's last is a mistyped number, not "nothing to check" (exit 0):
    # the turn-range tests below have the cases.
    none = invoke("prompts", path, "--from-turn", "100000")
    assert none.exit_code == 2
    assert "it holds turns" in none.stderr


def test_calls_rendered_again_within_a_turn_are_numbered_and_compared(tmp_path: Path) -> None:
    # A round that no longer fits after the turn's prompt makes the next call render again
    # (Turn.context); that prompt is the turn's call 2, compared with call 1.
    clock = itertools.count(1_000)
    config = AgentConfig(budget=Budget(context_window=2_000, output_reserve=500))
    with Agent.open(tmp_path / "a", agent_id="a", config=config, clock=lambda: next(clock)) as agent:
        for n in range(3):
            with agent.turn(input=f"step {n}") as turn:
                turn.context()
                with turn.tool("bash", {"command": f"ls {n}"}) as call:
                    call.finish(f"file-{n}.txt is here\n" * 150)
                turn.context()
    with Ledger.open(tmp_path / "a") as ledger:
        records = list(ledger.read())
    checks = list(check_prompts(records, agent_id="a"))
    turns = [x.turn for x in records if isinstance(x.body, r.PromptRendered)]
    calls = [sum(1 for u in turns[: i + 1] if u == t) for i, t in enumerate(turns)]
    assert [(c.turn, c.call, c.first_in_turn) for c in checks] == [
        (t, k, k == 1) for t, k in zip(turns, calls, strict=True)
    ]
    assert calls.count(2) >= 2  # the tool output outgrew the budget in at least two turns
    assert {c.status for c in checks} == {"reproduced"}
    assert checks[0].shared is None and all(c.shared is not None for c in checks[1:])
    summary = PromptsSummary()
    for check in checks:
        summary.add(check)
    assert summary.compared == len(checks) - 1
    assert summary.shared_tokens == sum(c.shared or 0 for c in checks)
    # The unshared tokens, split by section and by turn start / later, add up to the rest.
    assert sum(first + later for first, later in summary.unshared.values()) == (
        summary.compared_tokens - summary.shared_tokens
    )
    assert sum(later for _, later in summary.unshared.values()) == sum(
        (c.tokens or 0) - (c.shared or 0) for c in checks if not c.first_in_turn
    )


def _count(text: str) -> int:
    return get_estimator("holon-heuristic").count(text)


def _prompt(*sections: tuple[str, str, int]) -> Prompt:
    identity = CacheIdentity(
        agent_id="a", prompt_cache_key="", working_memory_revision=1, compression_epoch=0, block_hashes={}
    )
    parts = tuple(PromptSection(name=n, stability="turn", text=t, tokens=k) for n, t, k in sections)
    total = sum(s.tokens for s in parts) + max(len(parts) - 1, 0)
    plan = AssemblyPlan(budget=1_000, available=1_000, total_tokens=total, sections=(), omitted=())
    return Prompt(sections=parts, identity=identity, plan=plan, estimator="holon-heuristic", render_config={})


def test_shared_prefix_counts_equal_sections_and_the_whole_lines_of_the_first_that_differs() -> None:
    system = ("system", "You are an agent.", 5)
    same = _prompt(system, ("history", "one\ntwo\n", 4))
    assert shared_prefix(same, same) == (5 + 1 + 4, APPENDED)
    # The previous prompt's last section went on: appended.
    longer = _prompt(system, ("history", "one\ntwo\nthree\n", 6))
    shared, place = shared_prefix(same, longer)
    assert place == APPENDED
    assert shared == 5 + 1 + _count("one\ntwo\n")
    # Without a closing line break, the previous text is whole lines only where a break follows it.
    ends = _prompt(system, ("history", "one\ntwo", 4))
    assert shared_prefix(ends, _prompt(system, ("history", "one\ntwo\nthree", 6))) == (
        5 + 1 + _count("one\ntwo"),
        APPENDED,
    )
    assert shared_prefix(ends, _prompt(system, ("history", "one\ntwofold", 6)))[0] == 5 + 1 + _count("one\n")
    # A section in the middle changed: only its common whole lines count.
    changed = _prompt(system, ("history", "one\ntwX\n", 4), ("input", "go", 1))
    shared, place = shared_prefix(_prompt(system, ("history", "one\ntwo\n", 4), ("input", "go", 1)), changed)
    assert place == "history"
    assert shared == 5 + 1 + _count("one\n")  # a half-shared line is not shared
    # A new section after everything the previous prompt had.
    assert shared_prefix(_prompt(system), _prompt(system, ("input", "go", 1))) == (5, APPENDED)
    # Fewer sections: the break is where the previous prompt's next one was.
    assert shared_prefix(_prompt(system, ("input", "go", 1)), _prompt(system)) == (5, "input")
    # Another name at the same place never counts as appended.
    assert shared_prefix(_prompt(("a", "x", 1)), _prompt(("b", "xy", 1)))[1] == "b"


@pytest.mark.parametrize("status", ["reproduced", "differs"])
def test_summary_counts_by_status_and_remembers_the_first_difference(status: str) -> None:
    records = live_records("boundary_turn_cap")
    if status == "differs":
        records = tuple(_with_prompt(records, 3, prompt_hash="2" * 64))
    summary = PromptsSummary()
    for check in check_prompts(records, agent_id="boundary_turn_cap"):
        summary.add(check)
    assert summary.prompts == 13
    if status == "differs":
        assert summary.by_status == {"reproduced": 12, "differs": 1}
        assert summary.first_difference == [x.seq for x in records if isinstance(x.body, r.PromptRendered)][3]
    else:
        assert summary.by_status == {"reproduced": 13}
        assert summary.first_difference is None


# --------------------------------------------------------------------------- turn ranges outside the ledger
# A range that selects no turn of the ledger is a usage error naming the turns it holds,
# raised before any output, so `--json` leaves stdout empty rather than an opened document.


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_ledger(tmp_path_factory.mktemp("ranges") / "l", FIXTURE)


def _turns(path: Path) -> tuple[int, int]:
    records = ledger_records(path)
    started = [x.turn for x in records if isinstance(x.body, r.TurnStarted) and x.turn is not None]
    return min(started), max(started)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--from-turn", "100000"), "--from-turn 100000 is after the ledger's last turn"),
        (("--until-turn", "-5"), "--until-turn -5 is before the ledger's first turn"),
        (("--from-turn", "100000", "--until-turn", "200000"), "--from-turn 100000 is after"),
    ],
)
def test_prompts_refuses_a_turn_range_past_the_ledger(ledger: Path, args: tuple[str, ...], said: str) -> None:
    # Before: exit 0, "nothing to check": the operator who mistyped a turn was told all is well.
    first, last = _turns(ledger)
    result = invoke("prompts", ledger, *args)
    assert result.exit_code == 2, result.output
    assert said in result.stderr
    assert f"it holds turns {first}..{last}" in result.stderr
    assert result.stdout == ""


def test_prompts_takes_a_range_that_overlaps_the_ledger(ledger: Path) -> None:
    _first, last = _turns(ledger)
    result = invoke(
        "prompts", ledger, "--from-turn", str(last - 5), "--until-turn", str(last + 100), "--json"
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["prompts"] > 0


@pytest.mark.parametrize("args", [("--from-turn", "5", "--until-turn", "3"), ("--from-turn", "100000")])
def test_a_refused_prompts_range_leaves_json_stdout_empty(ledger: Path, args: tuple[str, ...]) -> None:
    # Before: the refusal came from the generator, once `{"agent_id": ..., "prompts": [` was
    # printed: a script read a truncated document on stdout.
    result = invoke("prompts", ledger, *args, "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    error = json.loads(result.stderr)["error"]
    assert error["type"] == "UsageError" and error["exit_code"] == 2


def test_prompts_range_on_a_ledger_without_turns(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    Ledger.create(path, agent_id="a").close()
    refused = invoke("prompts", path, "--from-turn", "1")
    assert refused.exit_code == 2
    assert "this ledger has no turns yet" in refused.stderr
    # Without a range there is nothing wrong with the question: the answer names the ledger.
    plain = invoke("prompts", path)
    assert plain.exit_code == 0
    assert "no prompt_rendered record in this ledger" in plain.stdout


# --------------------------------------------------------------------------- holon prompts --check


def test_a_prompt_outside_any_turn_that_differs_is_not_named_at_turn_none(tmp_path: Path) -> None:
    # `holon append` takes a prompt_rendered outside any turn (a writer other than the
    # runtime); when it does not reproduce, --check's hint was `holon explain L --at-turn None
    # --call 1`, a command click refuses ('None' is not a valid integer).
    path = build_ledger(tmp_path / "l", "boundary_turn_cap")
    records = live_records("boundary_turn_cap")
    last = next(x for x in reversed(records) if isinstance(x.body, r.PromptRendered))
    stray = msgspec.structs.replace(
        last,
        turn=None,
        ts=records[-1].ts + 1_000,
        body=msgspec.structs.replace(last.body, prompt_hash="0" * 64),
    )
    appended = invoke("append", path, write_jsonl(tmp_path / "stray.jsonl", [stray]))
    assert appended.exit_code == 0, appended.output + appended.stderr
    listed = invoke("prompts", path, "--each")
    assert "no turn call 1" in listed.output and "DIFFERS 1" in listed.output
    failed = invoke("prompts", path, "--check")
    assert failed.exit_code == 1, failed.output
    assert "outside any turn" in failed.stderr
    assert "None" not in failed.stderr, failed.stderr
