"""End-to-end review of the day's changes: what a user running the product hit.

Each test names the scenario a user reached it by (an agent's ledger, a CLI command) and
fails on the code before its fix.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

import holon.records as r
from holon.cli import main
from holon.ledger import Ledger
from holon.projections import ProjectionConfig
from holon.replay import append_evidence
from holon.runtime import Agent, AgentConfig
from holon.search import MemorySearch
from tests.cli_support import invoke, tree_bytes, write_jsonl
from tests.runtime_support import Tick

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"

# ------------------------------------------------- holon append of a prompt onto a ledger stating no config


def _quiet_turns(path: Path, *, turn_cap: int, turns: int, prompted: bool) -> None:
    """An agent's timer turns that change no working memory (they derive nothing under a high cap)."""
    config = AgentConfig(projection=ProjectionConfig(turn_cap=turn_cap))
    with Agent.open(path, agent_id="quiet", config=config, clock=Tick()) as agent:
        for _ in range(turns):
            with agent.turn(trigger="timer") as turn:
                if prompted:
                    turn.context()


def _prompted_turn(tmp_path: Path, *, turn_cap: int, turn: int, ts: int) -> Path:
    """A JSONL file of one turn whose prompt states ProjectionConfig(turn_cap=turn_cap), as
    another holon writer under that config recorded it: for `holon append`."""
    source = tmp_path / f"writer-{turn_cap}"
    _quiet_turns(source, turn_cap=turn_cap, turns=1, prompted=True)
    with Ledger.open(source, readonly=True) as ledger:
        evidence = [rec for rec in ledger.read(0) if rec.kind not in r.DERIVED_KINDS]
    assert [rec.kind for rec in evidence] == ["turn_started", "prompt_rendered", "turn_ended"]
    moved = [msgspec.structs.replace(rec, turn=turn, ts=ts + i * 1000) for i, rec in enumerate(evidence)]
    return write_jsonl(tmp_path / f"turn-{turn_cap}.jsonl", moved)


def test_append_refuses_a_prompt_whose_config_the_ledgers_quiet_turns_would_derive_under(
    tmp_path: Path,
) -> None:
    # Two quiet timer turns (no delta, no episode: the ledger states no config), then
    # `holon append` of a turn whose prompt states turn_cap=1: the ledger was folded
    # under turn_cap=1 and the append went through, but under turn_cap=1 turn 1 owes an
    # episode it lacks, so `holon verify` failed for good ("its writer appended evidence
    # without the post-turn refresh"). Agent.open refuses that reopen (_check_unstated);
    # holon append now does as well, naming the input line, and writes nothing.
    ledger = tmp_path / "ledger"
    _quiet_turns(ledger, turn_cap=12, turns=2, prompted=False)
    incoming = _prompted_turn(tmp_path, turn_cap=1, turn=3, ts=1_800_000_000_000)
    before = tree_bytes(ledger)

    result = invoke("append", ledger, incoming)

    assert result.exit_code == 2, result.output + result.stderr
    assert f"line 2 of {incoming}" in result.stderr, result.stderr
    assert "ProjectionConfig(turn_cap=1)" in result.stderr
    assert "after the turn_ended at seq 1" in result.stderr
    assert tree_bytes(ledger) == before
    verified = invoke("verify", ledger)
    assert verified.exit_code == 0, verified.output + verified.stderr


def test_append_takes_a_prompts_config_when_the_ledgers_turns_derive_nothing_under_it(tmp_path: Path) -> None:
    # The case the config scan is for: a ledger written elsewhere whose appended prompts
    # are the first to state its config. Under turn_cap=5 two quiet turns derive nothing.
    ledger = tmp_path / "ledger"
    _quiet_turns(ledger, turn_cap=12, turns=2, prompted=False)
    incoming = _prompted_turn(tmp_path, turn_cap=5, turn=3, ts=1_800_000_000_000)

    result = invoke("append", ledger, incoming)

    assert result.exit_code == 0, result.output + result.stderr
    verified = invoke("verify", ledger)
    assert verified.exit_code == 0, verified.output + verified.stderr
    audit = invoke("audit", ledger, "--json", "--sql", "select projection_label from agents")
    assert audit.exit_code == 0, audit.stderr
    assert "ProjectionConfig(turn_cap=5)" in audit.output


# --------------------------------------------------------------- library warnings, commands in threads


def test_a_library_warning_is_one_line_while_another_command_runs_in_another_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A program (a test harness, a notebook server) running two commands in-process at
    # once: each added its own handler to the `holon` logger, so the torn tail `holon
    # append` cut was reported twice, once per command running.
    searched = tmp_path / "searched"
    _quiet_turns(searched, turn_cap=12, turns=1, prompted=False)
    torn = tmp_path / "torn"
    _quiet_turns(torn, turn_cap=12, turns=1, prompted=False)
    segment = sorted((torn / "segments").iterdir())[-1]
    with segment.open("ab") as f:
        f.write(b"\x00\x01torn")
    turn = [
        r.Record(body=r.TurnStarted(trigger="timer"), ts=1_800_000_000_000, turn=5),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=1_800_000_001_000, turn=5),
    ]
    evidence = write_jsonl(tmp_path / "turn.jsonl", turn)

    searching, appended = threading.Event(), threading.Event()
    search = MemorySearch.search

    def held_search(self: MemorySearch, *args: Any, **kwargs: Any) -> list[Any]:
        searching.set()  # the search command is running, its warnings shown
        assert appended.wait(30)
        return search(self, *args, **kwargs)

    monkeypatch.setattr(MemorySearch, "search", held_search)

    def run(*args: str | Path) -> None:
        main.main([str(a) for a in args], standalone_mode=False)

    other = threading.Thread(target=run, args=("search", searched, "timer", "--json"))
    other.start()
    try:
        assert searching.wait(30)
        run("append", torn, evidence, "--json")
    finally:
        appended.set()
        other.join(30)
    warnings = [line for line in capsys.readouterr().err.splitlines() if "ledger recovery" in line]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("holon: warning: ledger recovery: ")
    assert not logging.getLogger("holon").handlers  # and none is left behind


# ------------------------------------------------------- search over a blob that is not UTF-8


def test_a_blob_stored_output_that_is_not_utf8_is_searched_by_its_text_without_a_damage_warning(
    tmp_path: Path,
) -> None:
    # A build log holding one Latin-1 byte (a file name), stored by a program writing the
    # ledger through the library: `holon search` said it "could not be read (missing or
    # damaged) ... `holon verify` names them", verify found every blob intact, and the
    # error at the end of the log was "nothing matches". `holon get` shows that text.
    path = tmp_path / "ledger"
    log = ("compiling caf\xe9.c\n" * 400 + "error: zorgblat undefined\n").encode("latin-1")
    with Ledger.create(path, agent_id="builder") as ledger:
        blob = ledger.put_blob(log, preview="compiling caf\ufffd.c")
        ts = 1_700_000_000_000
        append_evidence(
            ledger,
            [
                r.Record(body=r.TurnStarted(trigger="user", input="build it"), ts=ts, turn=1),
                r.Record(body=r.ToolIntent(call_id="c1", tool="bash", args={"cmd": "make"}), ts=ts, turn=1),
                r.Record(
                    body=r.ToolResult(call_id="c1", tool="bash", status="error", blob=blob, exit_code=2),
                    ts=ts + 1,
                    turn=1,
                ),
                r.Record(body=r.TurnEnded(outcome="failed"), ts=ts + 2, turn=1),
            ],
        )
    assert invoke("verify", path).exit_code == 0

    found = invoke("search", path, "zorgblat", "--json")

    assert found.exit_code == 0, found.stderr
    assert found.stderr == ""
    hits = json.loads(found.stdout)
    assert [(hit["ref"], hit["snippet"]) for hit in hits] == [("ledger:2", "error: zorgblat undefined")]
    with Agent.open(path, clock=Tick(start=1_800_000_000_000)) as agent:
        assert [hit.ref for hit in agent.search("zorgblat")] == ["ledger:2"]


# ------------------------------------------------ an OpenHands V1 conversation with an index twice


def test_an_openhands_conversation_holding_two_files_of_one_event_names_both(tmp_path: Path) -> None:
    # A conversation directory with a copy merged into it: two files numbered 00003. The
    # import said "has no event 00004 (the next file is event-00003-...)", naming a gap
    # that is not there and not the file that does not belong.
    conversation = tmp_path / "conversation"
    shutil.copytree(FIXTURES / "openhands" / "v1-conversation", conversation)
    events = conversation / "events"
    first = next(events.glob("event-00003-*.json"))
    copy = events / "event-00003-0b000000-0000-4000-8000-000000000003.json"
    shutil.copyfile(first, copy)
    ledger = tmp_path / "ledger"
    assert invoke("init", ledger, "--agent-id", "oh").exit_code == 0

    result = invoke("import", ledger, conversation, "--from", "openhands")

    assert result.exit_code == 2, result.stdout + result.stderr
    assert f"holds two files for event 00003, {first.name} and {copy.name}" in result.stderr, result.stderr
    assert "no event 00004" not in result.stderr


def test_holon_get_shows_a_log_with_a_few_bytes_that_are_not_utf8_as_text(tmp_path: Path) -> None:
    # The same log: memory search finds "zorgblat" in it, but the model's holon_get said
    # "bytes of binary data, not text; it is not shown", so the hit could not be read.
    log = ("compiling caf\xe9.c\n" * 400 + "error: zorgblat undefined\n").encode("latin-1")
    data = {"log": log, "random": bytes(range(128, 256)) * 4, "nul": b"text\0with a NUL \xff"}
    with Ledger.create(tmp_path / "ledger", agent_id="builder") as ledger:
        refs = {name: "blob:" + ledger.put_blob(blob, preview="-").hash for name, blob in data.items()}
    with (
        Agent.open(tmp_path / "ledger", clock=Tick(start=1_700_000_000_000)) as agent,
        agent.turn(input="build it", trigger="user") as turn,
    ):
        got = {name: turn.recall("holon_get", {"ref": ref}).output for name, ref in refs.items()}
    text = got["log"]
    assert text.startswith("compiling caf\ufffd.c\ncompiling caf\ufffd.c\n")
    assert "error: zorgblat undefined\n" in text
    assert text.endswith(f"[{refs['log']} is not all UTF-8: 400 byte sequences show as U+FFFD]")
    # Mostly undecodable bytes, or any NUL, stay binary data.
    for name in ("random", "nul"):
        size = len(data[name])
        assert got[name] == f"[{refs[name]} is {size:,} bytes of binary data, not text; it is not shown]"
