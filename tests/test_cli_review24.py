"""The CLI as an operator meets it on a bad day: wrong numbers, long ledgers, broken pipes.

- `holon prompts` with a turn range that selects no turn of the ledger is a usage error
  naming the turns it holds (it said "nothing to check" and exited 0), raised before any
  output, so `--json` leaves stdout empty rather than an opened document.
- `holon append` takes the ledger's projection config from its newest verified checkpoint,
  as the whole-ledger reads do, instead of reading every record first; an incoming prompt
  stating another config is refused naming its input line (it named "seq -1").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import holon.records as r
from holon.ledger import Ledger
from holon.projections import ProjectionConfig
from tests.cli_support import build_ledger, checkpoint_at_head, invoke, write_jsonl
from tests.runtime_support import ledger_records, prompted_turns

FIXTURE = "session_multi_work"
SHORT = ProjectionConfig(turn_cap=2)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_ledger(tmp_path_factory.mktemp("review24") / "l", FIXTURE)


def _turns(path: Path) -> tuple[int, int]:
    records = ledger_records(path)
    started = [x.turn for x in records if isinstance(x.body, r.TurnStarted) and x.turn is not None]
    return min(started), max(started)


# --------------------------------------------------------------------------- prompts ranges


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


# --------------------------------------------------------------------------- append from a checkpoint


def _next_turn(path: Path, turn_offset: int = 1) -> list[r.Record]:
    records = ledger_records(path)
    ts, turn = records[-1].ts, max(x.turn for x in records if x.turn is not None) + turn_offset
    return [
        r.Record(body=r.TurnStarted(trigger="user", input="next"), ts=ts + 1, turn=turn),
        r.Record(body=r.Message(role="user", text="next"), ts=ts + 2, turn=turn),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=ts + 3, turn=turn),
    ]


def test_append_onto_a_checkpointed_ledger_reads_only_the_records_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: every `holon append` read the whole ledger for its projection config (8.6-9.1 s
    # on a 1M-record ledger checkpointed at its head; now 0.9-1.3 s).
    checkpointed = build_ledger(tmp_path / "c", FIXTURE)
    with Ledger.open(checkpointed) as writer:
        checkpoint_at_head(writer)
    plain = build_ledger(tmp_path / "p", FIXTURE)
    evidence = write_jsonl(tmp_path / "turn.jsonl", _next_turn(plain))
    read = Ledger.read
    counted: list[int] = []

    def counting(self: Ledger, from_seq: int = 0, to_seq: int | None = None) -> Iterator[r.Record]:
        for record in read(self, from_seq, to_seq):
            counted.append(record.seq)
            yield record

    monkeypatch.setattr(Ledger, "read", counting)
    appended = invoke("append", checkpointed, evidence, "--json")
    assert appended.exit_code == 0, appended.stderr
    assert counted == []
    monkeypatch.undo()
    # The same records as the full fold appends onto the same ledger without a checkpoint.
    assert invoke("append", plain, evidence).exit_code == 0
    assert ledger_records(checkpointed) == ledger_records(plain)
    assert json.loads(appended.stdout)["head_hash"] == Ledger.open(plain, readonly=True).head()[1]
    assert invoke("verify", checkpointed).exit_code == 0


def _prompt_stating(path: Path, projection: ProjectionConfig) -> list[r.Record]:
    """The next turn of the agent ledger at ``path``, with a prompt recording ``projection``."""
    records = ledger_records(path)
    body = [x.body for x in records if isinstance(x.body, r.PromptRendered)][-1]
    config = dict(body.render_config, projection=msgspec.to_builtins(projection))
    turn = _next_turn(path)
    prompt = r.Record(
        body=msgspec.structs.replace(body, render_config=config), ts=turn[1].ts, turn=turn[1].turn
    )
    return [turn[0], prompt, *turn[1:]]


def test_append_of_a_prompt_stating_the_ledgers_config_is_derived_under_it(tmp_path: Path) -> None:
    path = tmp_path / "agent"
    prompted_turns(path, SHORT, range(4), agent_id="pc", checkpoint_every=2)
    appended = invoke("append", path, write_jsonl(tmp_path / "t.jsonl", _prompt_stating(path, SHORT)))
    assert appended.exit_code == 0, appended.stderr
    assert invoke("verify", path).exit_code == 0


def test_append_of_a_prompt_stating_another_config_names_its_line(tmp_path: Path) -> None:
    # Before: "invalid record at seq -1" (the seq an input record is decoded with), which
    # names nothing in the file or the ledger.
    path = tmp_path / "agent"
    prompted_turns(path, SHORT, range(4), agent_id="pc", checkpoint_every=2)
    before = ledger_records(path)
    other = ProjectionConfig(turn_cap=3)
    source = write_jsonl(tmp_path / "t.jsonl", _prompt_stating(path, other))
    refused = invoke("append", path, source)
    assert refused.exit_code == 2
    assert f"line 2 of {source}" in refused.stderr
    assert (
        "ProjectionConfig(turn_cap=3)" in refused.stderr and "ProjectionConfig(turn_cap=2)" in refused.stderr
    )
    assert "seq -1" not in refused.stderr
    assert ledger_records(path) == before


# --------------------------------------------------------------------------- library warnings


def test_a_torn_tail_cut_by_a_writing_command_is_a_warning_line(tmp_path: Path) -> None:
    # Before: Python's last-resort logging printed the ledger's bare message ("ledger recovery:
    # truncated_torn_tail ..."), not the `holon: warning:` line docs/cli.md promises.
    path = build_ledger(tmp_path / "l", FIXTURE)
    segment = sorted((path / "segments").iterdir())[-1]
    with segment.open("r+b") as f:
        f.truncate(segment.stat().st_size - 7)
    evidence = write_jsonl(tmp_path / "turn.jsonl", _next_turn(path))
    appended = invoke("append", path, evidence, "--json")
    assert appended.exit_code == 0, appended.stderr
    lines = appended.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("holon: warning: ledger recovery: truncated_torn_tail ")
    assert segment.name in lines[0]
    json.loads(appended.stdout)
    assert invoke("verify", path).exit_code == 0
