"""Bugs found in a fifth review of the command line, each pinned by a test that failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon import records as r
from holon.audit import connect
from holon.cli import EXIT_OK
from holon.context.causes import omission_cause
from holon.ledger import Ledger
from holon.replay import append_evidence
from tests.cli_support import invoke
from tests.ledger_support import AGENT

# --------------------------------------------------------------------------- stats: evictions by cause


def _prompt(turn: int, omitted: tuple[r.Omission, ...]) -> r.Record:
    return r.Record(
        body=r.PromptRendered(
            working_memory_revision=0,
            compression_epoch=0,
            cache_key="k",
            prompt_hash=f"h{turn}",
            total_tokens=100,
            budget=8000,
            estimator="test",
            sections=(r.SectionTokens(section="working_memory", tokens=100),),
            omitted=omitted,
        ),
        ts=1000 + turn,
        turn=turn,
    )


def _ledger_naming_items(path: Path, items: int) -> None:
    """Prompts leaving out a decision, a file and plan steps each, another one every time."""
    with Ledger.create(path, agent_id=AGENT) as ledger:
        for i in range(items):
            ledger.append(
                _prompt(
                    i,
                    (
                        r.Omission(
                            section="working_memory", ref=f"ledger:{i}", reason=f"decision d{i} not shown"
                        ),
                        r.Omission(
                            section="working_memory", ref=f"ledger:{i}", reason=f"file src/m{i}.py not shown"
                        ),
                        r.Omission(
                            section="working_memory",
                            ref=f"ledger:{i}",
                            reason=f"{i + 1} finished plan steps collapsed",
                        ),
                    ),
                )
            )


def test_stats_counts_evictions_by_cause_not_a_row_per_item(tmp_path: Path) -> None:
    # Reasons name their item: `holon stats` printed a row per decision, file and step count
    # (120 rows here, one per item in a real agent's ledger), where the audit counts 3 causes.
    ledger = tmp_path / "L"
    _ledger_naming_items(ledger, 40)
    text = invoke("stats", ledger)
    assert text.exit_code == EXIT_OK, text.stderr
    table = text.stdout.split("evictions by cause", 1)[1].splitlines()[2:]
    assert [line.split()[-1] for line in table] == ["40", "40", "40"]
    assert "decision <id> not shown" in text.stdout
    assert "file <id> not shown" in text.stdout
    assert "N finished plan steps collapsed" in text.stdout
    assert "decision d7" not in text.stdout
    as_json = json.loads(invoke("stats", ledger, "--json").stdout)
    assert as_json["evictions_by_cause"] == {
        "N finished plan steps collapsed": 40,
        "decision <id> not shown": 40,
        "file <id> not shown": 40,
    }
    assert len(as_json["evictions_by_reason"]) == 120  # by reason still there, for scripts


@pytest.mark.parametrize(
    "reason",
    [
        "decision d1 not shown",
        "decision plain not shown",
        "file src/a.py not shown",
        "1,234 finished plan steps collapsed",
        "wait of wait q1 clipped",
        "arguments of c-1 over the cap",
        "result of call_7 without its call",
        "follow-up f-2 not shown",
        "work item W3 clipped",
        "episode 12 not shown (did not fit the episode budget)",
        "file a\u000bb1 not shown",
        "decision d\u00e91 not shown",
        "before the history anchor",
    ],
)
def test_stats_and_the_audit_agree_on_causes(tmp_path: Path, reason: str) -> None:
    # One pattern, two engines (Python's re for stats, DuckDB's RE2 for the audit).
    ledger = tmp_path / "L"
    with Ledger.create(ledger, agent_id=AGENT) as held:
        held.append(_prompt(1, (r.Omission(section="history", ref="ledger:0", reason=reason),)))
    con = connect([ledger])
    try:
        row = con.execute("SELECT cause FROM omissions").fetchone()
    finally:
        con.close()
    assert row is not None
    assert row[0] == omission_cause(reason)


# --------------------------------------------------------------------------- verify: one head


def _turn(turn: int) -> list[r.Record]:
    return [
        r.Record(body=r.TurnStarted(trigger="user", input="go"), ts=10 * turn, turn=turn),
        r.Record(body=r.Message(role="user", text=f"go {turn}"), ts=10 * turn + 1, turn=turn),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=10 * turn + 2, turn=turn),
    ]


def test_verify_checks_derivations_up_to_the_head_it_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent appends while `holon verify` runs: the derivation check read on past the head
    # whose frames, chain and blobs were verified, so the report mixed two ledgers (its
    # refreshes counted a turn the storage figures do not hold).
    ledger = tmp_path / "L"
    with Ledger.create(ledger, agent_id=AGENT) as held:
        append_evidence(held, _turn(1))
    original = Ledger.verify

    def verify_then_a_turn_is_appended(self: Ledger, **kwargs: Any) -> Any:
        report = original(self, **kwargs)
        with Ledger.open(ledger) as writer:
            append_evidence(writer, _turn(2))
        return report

    monkeypatch.setattr(Ledger, "verify", verify_then_a_turn_is_appended)
    result = invoke("verify", ledger, "--json")
    assert result.exit_code == EXIT_OK, result.stderr
    report = json.loads(result.stdout)
    with Ledger.open(ledger, readonly=True) as held:
        appended_after = held.head()[0] - report["storage"]["head_seq"]
    assert appended_after > 0
    assert report["derivations"]["refreshes"] == 1
