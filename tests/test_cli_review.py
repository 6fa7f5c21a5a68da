"""Bugs found reviewing the command line, each pinned by a test that failed before its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import blake3
import pytest

import holon.cli
import holon.replay
from holon import records as r
from holon.cli import EXIT_CHECK_FAILED, EXIT_CORRUPT, EXIT_INTERRUPTED
from holon.ledger import Ledger
from holon.runtime import Agent
from tests.cli_support import build_ledger, divergent_ledger, invoke, write_jsonl
from tests.ledger_support import child_env
from tests.runtime_support import Tick

# A tool output as a terminal program writes it: ANSI colour codes around the text.
_COLOURED = "\x1b[32m5 passed\x1b[0m in 0.1s"


def _turn_with_output(output: str) -> list[r.Record]:
    return [
        r.Record(body=r.TurnStarted(trigger="user", input="run the tests"), ts=1, turn=1),
        r.Record(body=r.Message(role="user", text="run the tests"), ts=2, turn=1),
        r.Record(body=r.ToolIntent(call_id="c1", tool="bash", args={"command": "pytest"}), ts=3, turn=1),
        r.Record(body=r.ToolResult(call_id="c1", tool="bash", status="ok", output=output), ts=4, turn=1),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=5, turn=1),
    ]


@pytest.fixture
def coloured(tmp_path: Path) -> Path:
    """A ledger whose one tool output carries ANSI escape codes."""
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    source = write_jsonl(tmp_path / "in.jsonl", _turn_with_output(_COLOURED))
    assert invoke("append", ledger, source).exit_code == 0
    return ledger


def test_render_text_keeps_ansi_escapes_so_the_bytes_hash_to_the_prompt(coloured: Path) -> None:
    # click strips ANSI codes from text it writes to a pipe: the prompt bytes changed and
    # `holon render L | b3sum` no longer gave the prompt_hash.
    doc = invoke("render", coloured, "--json")
    assert doc.exit_code == 0, doc.stderr
    prompt_hash = json.loads(doc.stdout)["prompt_hash"]
    text = invoke("render", coloured)
    assert text.exit_code == 0, text.stderr
    assert _COLOURED.encode() in text.stdout_bytes
    assert blake3.blake3(text.stdout_bytes).hexdigest() == prompt_hash


# --------------------------------------------------------------------------- a reader that leaves early


def _with_closed_stdout(*args: str | Path, stderr_too: bool = False) -> subprocess.CompletedProcess[bytes]:
    """Run ``holon`` in a child whose stdout is a pipe nobody reads (`holon ... | head` once head
    exited); with ``stderr_too`` its stderr as well (`holon ... 2>&1 | head`)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "holon.cli", *map(str, args)],
            stdout=write,
            stderr=write if stderr_too else subprocess.PIPE,
            env=child_env(),
            check=False,
            timeout=120,
        )
    finally:
        os.close(write)


def _corrupt(target: Path) -> Path:
    build_ledger(target, "boundary_turn_cap")
    segment = sorted((target / "segments").glob("*.seg"))[-1]
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    return target


def _divergent(target: Path) -> Path:
    return divergent_ledger(target)[0]


def test_a_reader_leaving_early_does_not_turn_a_failed_check_into_success(tmp_path: Path) -> None:
    # The report is printed before the verdict: a broken pipe while printing it ended the
    # command with exit code 0, so `set -o pipefail; holon verify L | head` passed a corrupt ledger.
    corrupt = _corrupt(tmp_path / "C")
    divergent = _divergent(tmp_path / "D")
    cases = [
        (("verify", corrupt), EXIT_CORRUPT, "is corrupt"),
        (("verify", corrupt, "--json"), EXIT_CORRUPT, "is corrupt"),
        (("verify", divergent), EXIT_CHECK_FAILED, "derived records diverge"),
        (("replay", divergent, "--check"), EXIT_CHECK_FAILED, "derived records diverge"),
        (("replay", divergent, "--check", "--json"), EXIT_CHECK_FAILED, "derived records diverge"),
    ]
    for args, code, says in cases:
        done = _with_closed_stdout(*args)
        stderr = done.stderr.decode()
        assert done.returncode == code, (args, stderr)
        assert "Traceback" not in stderr and says in stderr, (args, stderr)
    # A command that succeeds still ends quietly with 0 when its reader has gone.
    done = _with_closed_stdout("replay", divergent)
    assert (done.returncode, done.stderr) == (0, b"")


def test_an_error_line_nobody_reads_keeps_the_exit_code(tmp_path: Path) -> None:
    # `holon verify L 2>&1 | head -1`: writing the error line to a closed stderr raised out of
    # click, and the process ended with 1 ("a check failed") for a corrupt ledger or a usage error.
    corrupt = _corrupt(tmp_path / "C")
    cases = [
        (("verify", corrupt), EXIT_CORRUPT),
        (("verify", corrupt, "--json"), EXIT_CORRUPT),
        (("stats", tmp_path / "missing"), 2),
        (("stats", corrupt, "--no-such-option"), 2),
        (("stats", _divergent(tmp_path / "D")), 0),
    ]
    for args, code in cases:
        assert _with_closed_stdout(*args, stderr_too=True).returncode == code, args


# --------------------------------------------------------------------------- file names that are not UTF-8


def test_json_output_and_json_errors_take_paths_that_are_not_utf8(tmp_path: Path) -> None:
    # A str for such a name holds lone surrogates, which msgspec refuses: `init --json` created
    # the ledger and then failed as an internal error (70), a JSON error line was a traceback.
    name = os.fsdecode(b"run-\xff")
    ledger = tmp_path / name
    created = invoke("init", ledger, "--agent-id", "a", "--json")
    assert created.exit_code == 0, created.stderr
    assert json.loads(created.stdout)["path"] == str(tmp_path / "run-\\xff")
    exported = invoke("export", ledger, tmp_path / f"{name}.jsonl", "--json")
    assert exported.exit_code == 0, exported.stderr
    assert json.loads(exported.stdout)["path"].endswith("run-\\xff.jsonl")
    missing = invoke("stats", tmp_path / f"{name}-missing", "--json")
    assert missing.exit_code == 2 and "Traceback" not in missing.stderr
    error = json.loads(missing.stderr)["error"]
    assert error["type"] == "NotALedger" and "run-\\xff-missing does not exist" in error["message"]
    text = invoke("stats", tmp_path / f"{name}-missing")
    assert f"holon: error: {tmp_path}/run-\\xff-missing does not exist" in text.stderr
    corrupt = _corrupt(tmp_path / f"{name}-corrupt")
    verified = invoke("verify", corrupt, "--json")
    assert verified.exit_code == EXIT_CORRUPT, verified.stderr
    (problem,) = json.loads(verified.stdout)["storage"]["problems"]
    assert "run-\\xff-corrupt/segments/" in problem["file"]


# --------------------------------------------------------------------------- JSON error types


def test_json_errors_name_the_public_error_class_never_a_private_one(tmp_path: Path) -> None:
    # `type` is documented to name the error (LedgerCorrupt, BudgetExceeded, ...): verify's
    # corruption said "_Corrupt" and a budget too small said "_Failure".
    corrupt = _corrupt(tmp_path / "C")
    for args, expected in [
        (("verify", corrupt, "--json"), "LedgerCorrupt"),
        (("stats", corrupt, "--json"), "LedgerCorrupt"),
        (("render", _divergent(tmp_path / "D"), "--budget", "1", "--json"), "BudgetExceeded"),
    ]:
        result = invoke(*args)
        error = json.loads(result.stderr.strip().splitlines()[-1])["error"]
        assert error["type"] == expected, (args, error)


# --------------------------------------------------------------------------- options that were ignored


def test_render_json_keeps_a_provider_format(tmp_path: Path) -> None:
    # `--json --format anthropic` printed holon's own JSON document, not the request body asked for.
    ledger = build_ledger(tmp_path / "L", "boundary_turn_cap")
    both = invoke("render", ledger, "--format", "anthropic", "--json")
    assert both.exit_code == 0, both.stderr
    assert both.stdout == invoke("render", ledger, "--format", "anthropic").stdout
    assert json.loads(both.stdout)["model"] == "claude-sonnet-5-5"
    # With the default text format, --json still means --format json.
    assert invoke("render", ledger, "--json").stdout == invoke("render", ledger, "--format", "json").stdout


@pytest.mark.parametrize(
    "args",
    [("render", "--call", "2"), ("explain", "--call", "2"), ("episodes", "--limit", "3")],
    ids=["render-call", "explain-call", "episodes-limit"],
)
def test_an_option_that_does_not_apply_is_a_usage_error_not_ignored(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    # --call without --at-turn rendered the next prompt as if it were absent; --limit without
    # --search listed every episode: the user got something other than what was asked, with exit 0.
    ledger = build_ledger(tmp_path / "L", "session_multi_work")
    result = invoke(args[0], ledger, *args[1:])
    assert result.exit_code == 2, result.stdout[:200]
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"holon: usage error: {args[1]} applies to ")
    assert line.endswith(f"(see holon {args[0]} --help)")
    # With the option it belongs to, it works.
    paired = (
        ("--call", "1", "--at-turn", "217") if args[1] == "--call" else ("--limit", "3", "--search", "W3")
    )
    assert invoke(args[0], ledger, *paired).exit_code == 0


# --------------------------------------------------------------------------- import from a pipe


def _holon_with_stdin(data: bytes, *args: str | Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "holon.cli", *map(str, args)],
        input=data,
        capture_output=True,
        env=child_env(),
        check=False,
        timeout=120,
    )


def test_import_jsonl_reads_an_export_from_a_pipe(tmp_path: Path) -> None:
    # `zcat run.jsonl.gz | holon import L /dev/stdin --from jsonl` said "cannot read /dev/stdin:
    # no such file": the check wanted a regular file, though every other format reads a pipe.
    source = build_ledger(tmp_path / "S", "boundary_turn_cap")
    export = tmp_path / "run.jsonl"
    assert invoke("export", source, export).exit_code == 0
    target = tmp_path / "T"
    assert invoke("init", target, "--agent-id", "boundary_turn_cap").exit_code == 0
    done = _holon_with_stdin(export.read_bytes(), "import", target, "/dev/stdin", "--from", "jsonl")
    assert done.returncode == 0, done.stderr
    with Ledger.open(source, readonly=True) as a, Ledger.open(target, readonly=True) as b:
        assert a.head() == b.head()
    # A pipe holding nothing is refused like an empty file, and writes nothing.
    empty = tmp_path / "E"
    assert invoke("init", empty, "--agent-id", "e").exit_code == 0
    done = _holon_with_stdin(b"", "import", empty, "/dev/stdin", "--from", "jsonl")
    assert done.returncode == 2
    assert done.stderr.decode().strip() == (
        "holon: error: /dev/stdin is empty: there is no holon export in it to import"
    )
    with Ledger.open(empty, readonly=True) as ledger:
        assert ledger.head()[0] == -1


# --------------------------------------------------------------------------- Ctrl-C


def test_an_interrupt_exits_130_not_the_code_of_a_failed_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C became click's Abort: "Aborted!" and exit code 1, which holon documents as
    # "a check failed" (a script would report a divergent ledger).
    ledger = build_ledger(tmp_path / "L", "boundary_turn_cap")

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(holon.replay, "ledger_stats", interrupted)  # what `holon stats` calls
    result = invoke("stats", ledger)
    assert result.exit_code == EXIT_INTERRUPTED == 130
    assert result.stderr == "holon: error: interrupted\n"
    error = json.loads(invoke("stats", ledger, "--json").stderr)["error"]
    assert (error["exit_code"], error["type"]) == (130, "KeyboardInterrupt")


# --------------------------------------------------------------------------- importing several transcripts


def test_a_second_transcript_imported_into_a_ledger_continues_its_turn_numbers(tmp_path: Path) -> None:
    # Every import counted its turns from 0 again: two sessions imported into one agent's
    # ledger both had a turn 0, and `--at-turn 0` could only ever reach the first one.
    importers = Path(__file__).resolve().parent.parent / "fixtures" / "importers"
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    first = importers / "openai-chat" / "tau-bench-runs.json"
    second = importers / "swe-agent" / "thought-action.traj"
    assert invoke("import", ledger, first, "--from", "openai-chat").exit_code == 0
    result = invoke("import", ledger, second, "--from", "swe-agent")
    assert result.exit_code == 0, result.stderr
    with Ledger.open(ledger, readonly=True) as opened:
        started = [(rec.turn, rec.body.input) for rec in opened.read() if isinstance(rec.body, r.TurnStarted)]
    turns = [turn for turn, _ in started]
    assert turns == list(range(len(turns))) and len(turns) == 3
    last_turn, last_input = started[-1]
    assert last_input is not None and last_input.startswith("ISSUE:")
    rendered = invoke("render", ledger, "--at-turn", str(last_turn))
    assert rendered.exit_code == 0, rendered.stderr
    assert last_input.encode() in rendered.stdout_bytes
    assert invoke("verify", ledger).exit_code == 0


def _turn(index: int, ts: int) -> list[r.Record]:
    return [
        r.Record(body=r.TurnStarted(trigger="user", input=f"go {index}"), ts=ts, turn=index),
        r.Record(body=r.Message(role="user", text=f"go {index}"), ts=ts + 1, turn=index),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=ts + 2, turn=index),
    ]


def test_append_refuses_a_turn_number_that_does_not_go_up(tmp_path: Path) -> None:
    # The runtime numbers each turn one above the last. `holon append` took a second batch
    # numbered from 1 again: the ledger then held two turn 1s and `--at-turn 1` found only one.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    first = write_jsonl(tmp_path / "one.jsonl", [*_turn(1, 10), *_turn(2, 20)])
    assert invoke("append", ledger, first).exit_code == 0
    with Ledger.open(ledger, readonly=True) as opened:
        head = opened.head()
    again = write_jsonl(tmp_path / "again.jsonl", [*_turn(3, 30), *_turn(2, 40)])
    result = invoke("append", ledger, again)
    assert result.exit_code == 2
    assert (
        f"line 4 of {again}, field `turn`: turn_started for turn 2 after turn 3: turn numbers only go up"
        in result.stderr
    )
    with Ledger.open(ledger, readonly=True) as opened:
        assert opened.head() == head  # nothing appended
    assert invoke("append", ledger, write_jsonl(tmp_path / "next.jsonl", _turn(3, 30))).exit_code == 0


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


# --------------------------------------------------------------------------- budgets too small


@pytest.mark.parametrize("window", ["1", "5"])
def test_a_window_too_small_for_any_prompt_does_not_blame_a_zero_output_reserve(
    window: str, tmp_path: Path
) -> None:
    # "the output reserve (0 tokens) leaves no room ...; lower the output reserve": it was 0.
    ledger = build_ledger(tmp_path / "L", "boundary_turn_cap")
    result = invoke("render", ledger, "--budget", window, "--output-reserve", "0")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"a context window of {window} token" in line and "leaves no room for a prompt" in line
    assert "raise the context window" in line and "lower the output reserve" not in line


def test_holon_search_leaves_out_recall_calls_as_agent_search_does(tmp_path: Path) -> None:
    # The model restored a text with holon_get: the CLI found it twice (the original and
    # the recall result), and the model's own search queries as hits.
    path = tmp_path / "agent"
    with Agent.open(path, agent_id="a", clock=Tick()) as agent:
        with agent.turn(input="look at the schema") as turn:
            turn.record_message("the xylophone table holds the invoices")
            seq = agent.seq
        with agent.turn(input="what was that table?") as turn:
            assert turn.recall("holon_get", {"ref": f"ledger:{seq}"}).output is not None
            turn.recall("holon_search", {"query": "xylophone"})
        expected = [hit.ref for hit in agent.search("xylophone")]
    result = invoke("search", path, "xylophone", "--json")
    assert result.exit_code == 0, result.stderr
    assert [hit["ref"] for hit in json.loads(result.stdout)] == expected == [f"ledger:{seq}"]


def test_a_terminal_that_cannot_encode_a_record_gets_escapes_not_an_internal_error(tmp_path: Path) -> None:
    # Under a latin-1 locale, printing an arrow from a record ended `holon replay` and
    # `holon search` with exit 70 ("a bug in holon").
    path = tmp_path / "agent"
    with Agent.open(path, agent_id="a", clock=Tick()) as agent, agent.turn(input="move x → y") as turn:
        turn.record_message("moved x → y")
    for args in (("replay", path), ("search", path, "moved")):
        done = subprocess.run(
            [sys.executable, "-m", "holon.cli", *map(str, args)],
            capture_output=True,
            env={**child_env(), "PYTHONIOENCODING": "latin-1"},
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, (args, done.stderr)
        assert b"x \\u2192 y" in done.stdout
