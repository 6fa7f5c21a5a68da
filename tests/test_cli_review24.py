"""The CLI as an operator meets it on a bad day: wrong numbers, long ledgers, broken pipes.

- `holon prompts` with a turn range that selects no turn of the ledger is a usage error
  naming the turns it holds (it said "nothing to check" and exited 0), raised before any
  output, so `--json` leaves stdout empty rather than an opened document.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import holon.records as r
from holon.ledger import Ledger
from tests.cli_support import build_ledger, invoke
from tests.runtime_support import ledger_records

FIXTURE = "session_multi_work"


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
