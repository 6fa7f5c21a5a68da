"""`holon render` and `holon explain`: past prompts reproduced byte for byte, or a loud failure."""

from __future__ import annotations

import json
from pathlib import Path

import blake3
import msgspec
import pytest

from holon import records as r
from holon.ledger import Ledger
from holon.replay import prompt_at
from holon.runtime import Agent
from tests.cli_support import build_ledger, invoke, live_records, tree_bytes
from tests.golden import read_fixture
from tests.live import replay_live


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("render")
    return {
        name: build_ledger(base / name, name) for name in ("session_multi_work", "boundary_wait_boundary")
    }


def _prompts(path: Path) -> list[r.Record]:
    with Ledger.open(path, readonly=True) as ledger:
        return [rec for rec in ledger.read() if isinstance(rec.body, r.PromptRendered)]


def test_render_at_turn_writes_exactly_the_recorded_prompt(ledgers: dict[str, Path]) -> None:
    path = ledgers["session_multi_work"]
    by_turn = {rec.turn: rec.body for rec in _prompts(path)}
    assert {3, 50, 217, 220} <= set(by_turn)
    for turn in (3, 50, 217, 220):
        result = invoke("render", path, "--at-turn", str(turn))
        assert result.exit_code == 0, result.stderr
        recorded = by_turn[turn]
        assert isinstance(recorded, r.PromptRendered)
        assert blake3.blake3(result.stdout_bytes).hexdigest() == recorded.prompt_hash
        assert result.stdout_bytes.startswith(b"You are holon's long-session test agent.")
        doc = json.loads(invoke("render", path, "--at-turn", str(turn), "--json").stdout)
        assert doc["checked"] is True and doc["matches"] is True
        assert doc["recorded_prompt_hash"] == doc["prompt_hash"] == recorded.prompt_hash
        assert doc["prompt"]["identity"]["working_memory_revision"] == recorded.working_memory_revision


def test_a_ledger_edited_before_a_prompt_fails_the_check(tmp_path: Path) -> None:
    records = list(live_records("boundary_wait_boundary"))
    first_message = next(i for i, rec in enumerate(records) if isinstance(rec.body, r.Message))
    body = records[first_message].body
    assert isinstance(body, r.Message)
    records[first_message] = msgspec.structs.replace(
        records[first_message], body=msgspec.structs.replace(body, text="Rotate the API keys. (edited)")
    )
    with Ledger.create(tmp_path / "L", agent_id="boundary_wait_boundary", fsync="never") as ledger:
        ledger.append_many(records)
    turn = next(rec.turn for rec in records if isinstance(rec.body, r.PromptRendered))
    result = invoke("render", tmp_path / "L", "--at-turn", str(turn))
    assert result.exit_code == 1
    assert result.stdout == ""
    line = result.stderr.strip()
    assert line.startswith(f"holon: check failed: turn {turn} call 1:") and "prompt_hash" in line
    assert "--no-check" in line
    shown = invoke("render", tmp_path / "L", "--at-turn", str(turn), "--no-check")
    assert shown.exit_code == 0 and b"(edited)" in shown.stdout_bytes
    assert invoke("explain", tmp_path / "L", "--at-turn", str(turn)).exit_code == 1


def test_a_prompt_not_rendered_by_holon_cannot_be_reproduced(tmp_path: Path) -> None:
    # The fixtures' own prompt_rendered records are placeholders without a render_config.
    name = "boundary_wait_boundary"
    with Ledger.create(tmp_path / "L", agent_id=name, fsync="never") as ledger:
        ledger.append_many(
            replay_live(
                read_fixture(Path(__file__).parent.parent / "fixtures" / "ledgers" / f"{name}.jsonl")
            ).records
        )
    result = invoke("render", tmp_path / "L", "--at-turn", "2")
    assert result.exit_code == 1
    assert "cannot be reproduced" in result.stderr and "'chars/4'" in result.stderr
    assert invoke("render", tmp_path / "L", "--at-turn", "2", "--no-check").exit_code == 0
    assert invoke("render", tmp_path / "L", "--at-turn", "2", "--budget", "9000").exit_code == 0


def test_a_turn_without_a_recorded_prompt_renders_its_first_call(ledgers: dict[str, Path]) -> None:
    path = ledgers["boundary_wait_boundary"]
    assert all(rec.turn != 1 for rec in _prompts(path))
    result = invoke("render", path, "--at-turn", "1", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["recorded_seq"] is None and doc["checked"] is False
    sections = {s["name"]: s["text"] for s in doc["prompt"]["sections"]}
    assert "Rotate the API keys." in sections["current_input"]
    # Rendered before the model acted in turn 1: no tool call of that turn is in the history.
    assert "vault list keys" not in doc["prompt"]["sections"][-1]["text"]
    assert all("vault" not in text for text in sections.values())
    assert invoke("render", path, "--at-turn", "1", "--call", "2").exit_code == 2


def test_provider_formats(ledgers: dict[str, Path]) -> None:
    path = ledgers["session_multi_work"]
    anthropic = json.loads(invoke("render", path, "--at-turn", "217", "--format", "anthropic").stdout)
    assert anthropic["model"] == "claude-sonnet-5-5" and anthropic["max_tokens"] == 1000
    assert sum("cache_control" in block for block in anthropic["system"]) == 2
    openai = json.loads(invoke("render", path, "--format", "openai", "--model", "gpt-x").stdout)
    assert openai["model"] == "gpt-x" and openai["prompt_cache_key"] == "holon:session_multi_work:golden"
    responses = json.loads(invoke("render", path, "--format", "openai-responses").stdout)
    assert responses["prompt_cache_key"] == openai["prompt_cache_key"]


def test_next_prompt_uses_the_newest_recorded_config_unless_overridden(ledgers: dict[str, Path]) -> None:
    path = ledgers["session_multi_work"]
    doc = json.loads(invoke("render", path, "--json").stdout)
    assert doc["turn"] is None and doc["recorded_seq"] is None
    assert doc["prompt"]["render_config"]["budget"]["context_window"] == 8000
    assert doc["prompt"]["identity"]["prompt_cache_key"] == "golden"
    doc = json.loads(invoke("render", path, "--json", "--budget", "4000", "--cache-key", "k").stdout)
    assert doc["prompt"]["render_config"]["budget"]["context_window"] == 4000
    assert doc["prompt"]["identity"]["prompt_cache_key"] == "k"


def test_explain_lists_every_eviction_with_a_ref_that_restores(ledgers: dict[str, Path]) -> None:
    path = ledgers["session_multi_work"]
    args = ("--at-turn", "217", "--budget", "1500", "--output-reserve", "100")
    doc = json.loads(invoke("explain", path, *args, "--json").stdout)
    assert doc["checked"] is False and doc["omitted"]
    assert {s["section"] for s in doc["sections"]} >= {"system", "working_memory", "history", "current_input"}
    assert doc["total_tokens"] <= doc["available"]
    text = invoke("explain", path, *args).stdout
    assert f"omitted or shortened ({len(doc['omitted'])})" in text
    with Ledger.open(path, readonly=True) as ledger:
        for ref in doc["evicted_refs"][:10]:
            assert ref in text
            restored = invoke("get", path, ref)
            assert restored.exit_code == 0 and restored.stdout_bytes, ref
            if ref.startswith("ledger:"):
                body = ledger.get(int(ref.split(":")[1])).body
                if isinstance(body, r.ToolResult):
                    assert restored.stdout_bytes == body.output.encode()


def test_explain_at_a_checked_turn(ledgers: dict[str, Path]) -> None:
    result = invoke("explain", ledgers["session_multi_work"], "--at-turn", "217")
    assert result.exit_code == 0
    out = result.stdout
    assert out.startswith("prompt of turn 217, recorded at seq 1994: reproduced byte for byte")
    assert "episodes ◆" in out and "system ◆" in out
    assert "budget 8,000 - output reserve 1,000 = 7,000 available" in out


def test_explain_says_when_the_delta_shown_was_already_confirmed(ledgers: dict[str, Path]) -> None:
    path = ledgers["session_multi_work"]
    with Ledger.open(path, readonly=True) as ledger:
        records = list(ledger.read())
    shown: dict[bool, int] = {}
    for turn in sorted({rec.turn for rec in _prompts(path)}):
        found = prompt_at(records, turn, agent_id="session_multi_work")
        forms = {s.section: s.form for s in found.prompt.plan.sections}
        if forms.get("pending_delta", "omitted") != "omitted":
            shown.setdefault(found.delta_confirmed, turn)
        if len(shown) == 2:
            break
    # The fixture has both: a delta shown pinned (news) and one shown again once confirmed.
    assert set(shown) == {True, False}

    def why(turn: int) -> str:
        doc = json.loads(invoke("explain", path, "--at-turn", str(turn), "--json").stdout)
        return next(s["why"] for s in doc["sections"] if s["section"] == "pending_delta")

    assert why(shown[True]).startswith("already confirmed: revision ")
    assert "already confirmed" not in why(shown[False])
    assert "already confirmed: revision " in invoke("explain", path, "--at-turn", str(shown[True])).stdout


def test_render_input_is_the_agents_preview_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "L"
    policy = r.SystemPolicy(text="You are a test agent.")
    with Agent.open(path, agent_id="a", clock=lambda: 1_700_000_000_000, policy=policy) as agent:
        for i in range(3):
            with agent.turn(input=f"look at step {i}") as turn:
                turn.context()
                turn.record_message(f"step {i} looked at")
        expected = agent.preview(input="what did step 1 show?").text
    before = tree_bytes(path)
    rendered = invoke("render", path, "--input", "what did step 1 show?")
    assert rendered.exit_code == 0, rendered.stderr
    assert rendered.stdout_bytes == expected.encode() and "what did step 1 show?" in rendered.stdout
    assert tree_bytes(path) == before
    assert invoke("render", path).stdout != rendered.stdout  # the next call without that input
    clash = invoke("render", path, "--input", "x", "--at-turn", "2")
    assert clash.exit_code == 2 and "cannot be given with --at-turn" in clash.stderr


# --------------------------------------------------------------------------- a provider format under --json


def test_render_json_keeps_a_provider_format(tmp_path: Path) -> None:
    # `--json --format anthropic` printed holon's own JSON document, not the request body asked for.
    ledger = build_ledger(tmp_path / "L", "boundary_turn_cap")
    both = invoke("render", ledger, "--format", "anthropic", "--json")
    assert both.exit_code == 0, both.stderr
    assert both.stdout == invoke("render", ledger, "--format", "anthropic").stdout
    assert json.loads(both.stdout)["model"] == "claude-sonnet-5-5"
    # With the default text format, --json still means --format json.
    assert invoke("render", ledger, "--json").stdout == invoke("render", ledger, "--format", "json").stdout


# --------------------------------------------------------------------------- an estimator holon lacks


def test_a_recorded_estimator_this_holon_cannot_load_is_bad_input_not_a_bug(tmp_path: Path) -> None:
    # A ledger rendered with an estimator this holon cannot load (written by a newer holon,
    # or an exact one without the tokenizer extra) made render and explain exit 70, "this is
    # a bug in holon".
    source = build_ledger(tmp_path / "S", "boundary_turn_cap")
    export = tmp_path / "run.jsonl"
    assert invoke("export", source, export).exit_code == 0
    edited = export.read_bytes().replace(b'"estimator":"holon-heuristic"', b'"estimator":"future-bpe"')
    assert edited != export.read_bytes()
    export.write_bytes(edited)
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "boundary_turn_cap").exit_code == 0
    assert invoke("import", ledger, export, "--from", "jsonl").exit_code == 0
    for args in (("render",), ("render", "--at-turn", "3"), ("explain", "--at-turn", "3")):
        result = invoke(*args[:1], ledger, *args[1:])
        assert result.exit_code == 2, (args, result.stderr)
        (line,) = result.stderr.strip().splitlines()
        assert "field `body.render_config.estimator`" in line and "'future-bpe'" in line, line
        assert "--estimator" in line and "internal error" not in line
    # Naming an estimator renders anyway.
    assert invoke("render", ledger, "--at-turn", "3", "--estimator", "holon-heuristic").exit_code == 0


# --------------------------------------------------------------------------- an empty ledger


def test_explain_of_an_empty_ledger_does_not_name_a_seq_range_backwards(tmp_path: Path) -> None:
    # The header said "rendered from seq 0..-1".
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    result = invoke("explain", ledger)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "prompt for the next model call, rendered from an empty ledger"
    assert "0..-1" not in result.stdout


# --------------------------------------------------------------------- explain: a shared blob, long why cells


def _shared_blob_ledger(path: Path) -> Path:
    """Two calls in one turn returning the same large output: one blob, two results."""
    output = "same listing line\n" * 3000  # over the result cap: both are previews in a small window
    bodies: list[r.Body] = [r.TurnStarted(trigger="user", input="go")]
    for call in ("c1", "c2"):
        bodies.append(r.ToolIntent(call_id=call, tool="bash", args={"command": "ls"}))
        bodies.append(r.ToolResult(call_id=call, tool="bash", status="ok", output=output))
    bodies.append(r.TurnEnded(outcome="completed"))
    with Ledger.create(path, agent_id="a", fsync="never", blob_threshold=1024) as ledger:
        ledger.append_many([r.Record(body=b, ts=i, turn=1) for i, b in enumerate(bodies)])
    return path


def test_explain_shows_two_results_stored_in_one_blob_as_one_row_with_a_count(tmp_path: Path) -> None:
    # Both rows read "history  blob:<h>  …  tool result over the size cap", which looked
    # like a mistake. One row says two items share the ref; --json keeps both (and the
    # reasons stay categories: the audit's evictions report groups by them).
    path = _shared_blob_ledger(tmp_path / "L")
    result = invoke("explain", path, "--budget", "8000", "--output-reserve", "1000")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if "blob:" in line]
    assert len(rows) == 1, rows
    assert rows[0].endswith("tool result over the size cap (2 items share this ref)"), rows
    doc = msgspec.json.decode(
        invoke("explain", path, "--budget", "8000", "--output-reserve", "1000", "--json").stdout
    )
    reasons = [o["reason"] for o in doc["omitted"]]
    assert reasons == ["tool result over the size cap"] * 2, reasons


def test_explain_keeps_a_sections_why_cell_short_when_it_left_out_many_items(tmp_path: Path) -> None:
    # Reasons that name their item (a call's arguments over the cap) made one cell of
    # them all: dozens of calls made one line of the table wider than any terminal. The
    # list below has them all.
    bodies: list[r.Body] = [r.TurnStarted(trigger="user", input="go")]
    words = " ".join(f"w{i}" for i in range(3000))  # over the message cap
    for n in range(6):
        bodies.append(r.ToolIntent(call_id=f"c{n}", tool="bash", args={"command": f"echo {n} {words}"}))
        bodies.append(r.ToolResult(call_id=f"c{n}", tool="bash", status="ok", output="done"))
    bodies += [r.TurnEnded(outcome="completed"), r.TurnStarted(trigger="user", input="next")]
    path = tmp_path / "L"
    with Ledger.create(path, agent_id="a", fsync="never", blob_threshold=1024) as ledger:
        ledger.append_many([r.Record(body=b, ts=i, turn=1 if i < 14 else 2) for i, b in enumerate(bodies)])
    # A window the history does not fit whole: its units are capped.
    doc = msgspec.json.decode(
        invoke("explain", path, "--budget", "8000", "--output-reserve", "1000", "--json").stdout
    )
    history = next(row for row in doc["sections"] if row["section"] == "history")
    distinct = list(dict.fromkeys(o["reason"] for o in doc["omitted"] if o["section"] == "history"))
    assert sum(reason.startswith("arguments of c") for reason in distinct) == 6, distinct
    # The first three, then how many more.
    assert history["why"] == "; ".join(distinct[:3]) + f"; +{len(distinct) - 3} more (listed below)"
