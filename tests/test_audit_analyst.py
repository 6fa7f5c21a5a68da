"""The offline audit as an analyst uses it: its figures against the ledger's, its output clean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from holon import records as r
from holon.audit import connect, export_parquet, load, run_report
from holon.cli import main
from holon.ledger import Ledger
from holon.projections.config import DEFAULT_CONFIG
from tests.runtime_support import ledger_records, prompted_turns
from tests.test_audit_reports import planted
from tests.test_audit_support import write_ledger


@pytest.fixture
def eager_progress_bar(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Audit connections that would draw DuckDB's progress bar at once, not after 2 s.

    DuckDB draws it on the process's stdout (fd 1), a pipe as much as a terminal, for a
    statement running past ``progress_bar_time`` (2 s): a big ledger's load does. Setting
    the time turns the bar on again, so it is set as the connection opens; what the
    connection's own setup statements draw under it is dropped when the tables start
    being built (at 2 s, those take microseconds and draw nothing).
    """
    real_connect, real_build = duckdb.connect, load._build

    def eager(*args: Any, **kwargs: Any) -> duckdb.DuckDBPyConnection:
        con = real_connect(*args, **kwargs)
        con.execute("SET progress_bar_time = 0")
        return con

    def build(*args: Any, **kwargs: Any) -> None:
        capfd.readouterr()
        real_build(*args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", eager)
    monkeypatch.setattr(load, "_build", build)


def test_the_audit_writes_no_duckdb_progress_bar_into_its_output(
    tmp_path: Path, eager_progress_bar: None, capfd: pytest.CaptureFixture[str]
) -> None:
    records, _ = planted()
    write_ledger(tmp_path / "a", "planted-a", records)
    result = CliRunner().invoke(
        main, ["audit", str(tmp_path / "a"), "--sql", "SELECT agent_id, records FROM agents", "--csv"]
    )
    written = capfd.readouterr()
    assert result.exit_code == 0, result.output
    assert result.stdout == f"agent_id,records\nplanted-a,{len(records)}\n"
    # What DuckDB wrote to the file descriptors themselves, past click's streams.
    assert (written.out, written.err) == ("", "")


def test_connect_and_export_leave_the_callers_stdout_alone(
    tmp_path: Path, eager_progress_bar: None, capfd: pytest.CaptureFixture[str]
) -> None:
    records, _ = planted()
    write_ledger(tmp_path / "a", "planted-a", records)
    con = connect(tmp_path / "a", workers=1)
    assert con.execute("SELECT count(*) FROM records").fetchall() == [(len(records),)]
    con.close()
    export_parquet(tmp_path / "a", tmp_path / "out", workers=1)
    assert capfd.readouterr() == ("", "")


def _prompt(seq_hint: int, turn: int | None, sections: list[tuple[str, int]]) -> r.Record:
    return r.Record(
        body=r.PromptRendered(
            cache_key=f"k{seq_hint}",
            prompt_hash=f"h{seq_hint}",
            working_memory_revision=0,
            compression_epoch=0,
            sections=tuple(r.SectionTokens(section=name, tokens=n) for name, n in sections),
            total_tokens=sum(n for _, n in sections),
            budget=1000,
            estimator="holon-heuristic",
        ),
        ts=seq_hint,
        turn=turn,
    )


def _turn(number: int, *prompts: r.Record) -> list[r.Record]:
    return [
        r.Record(
            body=r.TurnStarted(trigger="user_message", input=f"turn {number}"), ts=prompts[0].ts, turn=number
        ),
        *prompts,
        r.Record(body=r.TurnEnded(outcome="completed"), ts=prompts[-1].ts, turn=number),
    ]


def _tokens_rows(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = run_report(connect(path, workers=1), "tokens").as_dicts()
    return {(row["scope"], row["section"]): row for row in rows}


def test_the_tokens_report_counts_prompts_outside_a_turn_each_on_its_own(tmp_path: Path) -> None:
    # Two turns (the second renders twice), then three prompts outside any turn, as a
    # program that renders before opening a turn records them. Grouped on their NULL turn,
    # the three were one "turn" of 3 x 100 system tokens: max 300, and 3 turns in all.
    write_ledger(
        tmp_path / "l",
        "outside",
        [
            *_turn(0, _prompt(1, 0, [("system", 100), ("history", 10)])),
            *_turn(1, _prompt(2, 1, [("system", 100), ("history", 20)]), _prompt(3, 1, [("system", 100)])),
            _prompt(4, None, [("system", 100), ("history", 30)]),
            _prompt(5, None, [("system", 100)]),
            _prompt(6, None, [("system", 100)]),
        ],
    )
    system = [
        (row["turns"], row["max"])
        for row in run_report(connect(tmp_path / "l", workers=1), "tokens").as_dicts()
        if row["section"] == "system"
    ]
    assert system == [(2, 200), (0, 100)]  # was [(3, 300)]: a third turn, of 300 tokens
    rows = _tokens_rows(tmp_path / "l")
    assert list(rows) == [
        ("turn", "system"),
        ("turn", "history"),
        ("turn", "(total)"),
        ("outside a turn", "system"),
        ("outside a turn", "history"),
        ("outside a turn", "(total)"),
    ]
    figures = {key: (row["turns"], row["prompts"], row["max"], row["total"]) for key, row in rows.items()}
    assert figures == {
        ("turn", "system"): (2, 3, 200, 300),  # turn 1's two prompts summed
        ("turn", "history"): (2, 2, 20, 30),
        ("turn", "(total)"): (2, 3, 220, 330),
        ("outside a turn", "system"): (0, 3, 100, 300),  # each prompt on its own
        ("outside a turn", "history"): (0, 1, 30, 30),
        ("outside a turn", "(total)"): (0, 3, 130, 330),
    }
    assert rows[("outside a turn", "system")]["p50"] == 100


def test_the_tokens_reports_prompts_are_the_ones_holon_stats_counts(tmp_path: Path) -> None:
    # An agent's turns, then prompts a program recorded outside a turn: per section, the
    # report's prompts over both scopes are holon stats' prompts, and its totals add up.
    path = tmp_path / "agent"
    prompted_turns(path, DEFAULT_CONFIG, range(5), agent_id="agent")
    written = ledger_records(path)
    last = [rec for rec in written if isinstance(rec.body, r.PromptRendered)][-1]
    with Ledger.open(path) as ledger:
        for step in range(1, 3):
            ledger.append(r.Record(body=last.body, ts=written[-1].ts + step, turn=None))
    stats = CliRunner().invoke(main, ["stats", str(path), "--json"])
    assert stats.exit_code == 0, stats.output
    by_section = {row["section"]: row["prompts"] for row in json.loads(stats.stdout)["sections"]}
    got: dict[str, int] = {}
    for (_scope, section), row in _tokens_rows(path).items():
        name = "total" if section == "(total)" else section
        got[name] = got.get(name, 0) + row["prompts"]
    assert got == {**by_section, "total": json.loads(stats.stdout)["prompts"]}


def test_a_turns_input_is_the_one_the_runtime_records_as_its_first_message(tmp_path: Path) -> None:
    # Agent.turn(input=...) appends a bare turn_started and the input as a message: the
    # turns table read turn_started alone, so every turn holon ran had no input.
    prompted_turns(tmp_path / "agent", DEFAULT_CONFIG, range(3), agent_id="agent")
    messages = {
        rec.turn: rec.seq
        for rec in reversed(ledger_records(tmp_path / "agent"))
        if isinstance(rec.body, r.Message) and rec.body.role == "user"
    }
    con = connect(tmp_path / "agent", workers=1)
    turns = sorted(messages)
    assert con.execute("SELECT turn, input FROM turns").fetchall() == [
        (turn, f"step {i}") for i, turn in enumerate(turns)
    ]
    assert con.execute("SELECT input_seq FROM turns").fetchall() == [(messages[turn],) for turn in turns]


def test_a_turns_input_stated_on_turn_started_is_kept(tmp_path: Path) -> None:
    def turn(
        number: int, ts: int, *bodies: r.Body, input: str | None = None, trigger: str = "user"
    ) -> list[r.Record]:
        return [
            r.Record(body=r.TurnStarted(trigger=trigger, input=input), ts=ts, turn=number),
            *(r.Record(body=body, ts=ts, turn=number) for body in bodies),
            r.Record(body=r.TurnEnded(outcome="completed"), ts=ts, turn=number),
        ]

    write_ledger(
        tmp_path / "l",
        "mixed",
        [
            # An importer's turn: the input on turn_started and as the turn's message.
            *turn(0, 1, r.Message(role="user", text="fix the bug"), input="fix the bug"),  # seqs 0-2
            # On turn_started only (another program), a later message is not the input.
            *turn(
                1,
                2,
                r.Message(role="assistant", text="on it"),
                r.Message(role="user", text="also"),
                input="go",
            ),
            # A timer's turn: no input, its assistant words are none.
            *turn(2, 3, r.Message(role="assistant", text="tick"), trigger="timer"),  # seqs 7-9
            # A wake-up whose operator message is what it answers (the second one is not).
            *turn(
                3,
                4,
                r.Message(role="operator", text="status?"),
                r.Message(role="operator", text="now"),
                trigger="operator",
            ),
        ],
    )
    got = (
        connect(tmp_path / "l", workers=1)
        .execute("SELECT turn, trigger, input, input_seq FROM turns")
        .fetchall()
    )
    assert got == [
        (0, "user", "fix the bug", 1),
        (1, "user", "go", 3),
        (2, "timer", None, None),
        (3, "operator", "status?", 11),
    ]
