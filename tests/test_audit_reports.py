"""Canned reports on a planted ledger whose answers are known by construction.

The planted agent runs 12 turns (prompts in turns 1-11; turn 12 fails before rendering):

- tools: ``make test`` with the same arguments (keys in another order) at turns 2 and 4
  (a duplicate within 3 turns, not within 1) and again at turn 9 (5 turns later: not a
  duplicate); ``read_file a.py`` twice in turn 3 (a duplicate even within 0 turns);
  ``deploy`` fails after 5000 ms at turn 6 (the slowest call), ``lint`` fails at turn 7;
  ``migrate`` at turn 10 has an intent and no result (unknown outcome; the turn ends
  interrupted);
- tokens: each prompt has ``system`` = 100 tokens and ``history`` = 10 x turn tokens
  (history truncated at turn 5);
- evictions: turns 5 and 6 omit ``ledger:3`` from history (40 tokens each); turn 6 also
  leaves a decision out of working memory, and turns 7 and 8 collapse 3 and 5 finished
  plan steps (one cause);
- cache: the key changes at turn 4 (a delta after turn 3: revision), turn 8 (a delta
  and an episode after turn 7: revision + epoch) and turn 11 (a new system policy in
  turn 10: prefix), so 3 changes in 12 turns = 25 per 100 turns; the truncated history of
  turn 5, and turn 6's whole one again, break the prefix too: 5 breaks = 41.67 per 100 turns;
- episodes: turns 1-7 closed by ``active_work_switched``, turns 8-11 by ``wait_boundary``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from holon import records as r
from holon.audit import (
    REPORTS,
    TABLES,
    AuditError,
    QueryResult,
    connect,
    open_query,
    report_query,
    run_report,
    run_sql,
)
from holon.ledger import Ledger
from tests.test_audit_support import fixture_records, write_ledger

TURNS = 12
HISTORY_EVICTION = r.Omission(section="history", ref="ledger:3", reason="history over budget", tokens=40)
DECISION_EVICTION = r.Omission(section="working_memory", ref="ledger:2", reason="decision d1 not shown")


class Planter:
    """Appends hand-made records turn by turn, remembering the seq of each."""

    def __init__(self) -> None:
        self.records: list[r.Record] = []
        self.turn: int | None = None
        self.ts = 1_700_000_000_000

    def add(self, body: r.Body, *, ms: int = 10) -> int:
        self.ts += ms
        self.records.append(r.Record(body=body, ts=self.ts, turn=self.turn, seq=len(self.records)))
        return len(self.records) - 1

    def call(self, call_id: str, tool: str, args: dict[str, Any], status: str | None, ms: int = 0) -> None:
        self.add(r.ToolIntent(call_id=call_id, tool=tool, args=args, idempotency_key=f"key-{call_id}"))
        if status is not None:
            self.add(r.ToolResult(call_id=call_id, tool=tool, status=status, output="out", duration_ms=ms))  # type: ignore[arg-type]


def planted() -> tuple[list[r.Record], dict[str, Any]]:
    """The planted ledger and the seqs of the records that caused each cache change."""
    p = Planter()
    causes: dict[int, list[str]] = {}
    revision = epoch = policy = 0
    p.add(r.SystemPolicy(text="policy v0"))
    for turn in range(1, TURNS + 1):
        p.turn = turn
        p.add(r.TurnStarted(trigger="operator", input=f"turn {turn}"))
        if turn <= 11:
            omitted: tuple[r.Omission, ...] = ()
            if turn in (5, 6):
                omitted = (
                    r.Omission(section="history", ref="ledger:3", reason="history over budget", tokens=40),
                )
            if turn == 6:
                omitted += (
                    r.Omission(section="working_memory", ref="ledger:2", reason="decision d1 not shown"),
                )
            if turn in (7, 8):
                # One cause, with another count each time: one row of the evictions report.
                steps = 3 if turn == 7 else 5
                omitted += (
                    r.Omission(
                        section="working_memory",
                        ref="ledger:4",
                        reason=f"{steps} finished plan steps collapsed",
                        tokens=10 * steps,
                    ),
                )
            p.add(
                r.PromptRendered(
                    working_memory_revision=revision,
                    compression_epoch=epoch,
                    cache_key=f"k:r{revision}:e{epoch}:p{policy}",
                    prompt_hash=f"h{turn}",
                    total_tokens=100 + 10 * turn,
                    budget=8000,
                    estimator="test",
                    sections=(
                        r.SectionTokens(section="system", tokens=100),
                        r.SectionTokens(
                            section="history", tokens=10 * turn, form="truncated" if turn == 5 else "full"
                        ),
                    ),
                    omitted=omitted,
                )
            )
        if turn == 2:
            p.call("c-test-1", "bash", {"cmd": "make test", "cwd": "/w"}, "ok", 100)
        if turn == 3:
            p.call("c-read-1", "read_file", {"path": "a.py"}, "ok", 5)
            p.call("c-read-2", "read_file", {"path": "a.py"}, "ok", 7)
        if turn == 4:
            p.call("c-test-2", "bash", {"cwd": "/w", "cmd": "make test"}, "ok", 120)
        if turn == 6:
            p.call("c-deploy", "bash", {"cmd": "deploy"}, "error", 5000)
        if turn == 7:
            p.call("c-lint", "bash", {"cmd": "lint"}, "error", 50)
        if turn == 9:
            p.call("c-test-3", "bash", {"cmd": "make test", "cwd": "/w"}, "ok", 110)
        if turn == 10:
            p.call("c-migrate", "bash", {"cmd": "migrate"}, None)
            policy += 1
            causes[11] = [f"system_policy@{p.add(r.SystemPolicy(text='policy v1'))}"]
        outcome = {10: "interrupted", 12: "failed"}.get(turn, "completed")
        p.add(r.TurnEnded(outcome=outcome))  # type: ignore[arg-type]
        p.turn = None
        if turn in (3, 7):
            seq = p.add(_delta(revision, revision + 1, p))
            revision += 1
            causes[turn + 1] = [f"working_memory_delta@{seq}"]
        if turn in (7, 11):
            first = 1 if turn == 7 else 8
            seq = p.add(_episode(epoch, first, turn))
            epoch += 1
            if turn == 7:
                causes[8].append(f"context_episode@{seq}")
    return p.records, causes


def _delta(old: int, new: int, p: Planter) -> r.WorkingMemoryDelta:
    return r.WorkingMemoryDelta(
        from_revision=old,
        to_revision=new,
        reason="turn_completed",
        changed_fields=("plan",),
        lines=("plan changed",),
        evidence_from_seq=0,
        evidence_to_seq=len(p.records) - 1,
        projection_version=1,
    )


def _episode(episode_id: int, first: int, last: int) -> r.ContextEpisodeRecord:
    return r.ContextEpisodeRecord(
        episode_id=episode_id,
        boundary_reason="active_work_switched" if episode_id == 0 else "wait_boundary",
        work_item_id="w1",
        first_turn=first,
        last_turn=last,
        from_seq=10 * first,
        to_seq=10 * last + 9,
        projection_version=1,
    )


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    root = tmp_path_factory.mktemp("planted")
    records, _ = planted()
    # Two agents with the same history: every report must answer per agent.
    write_ledger(root / "a", "planted-a", records)
    write_ledger(root / "b", "planted-b", records)
    return connect([root / "a", root / "b"])


def by_agent(result: QueryResult, agent: str = "planted-a") -> list[dict[str, Any]]:
    out = [row for row in result.as_dicts() if row["agent_id"] == agent]
    other = [row for row in result.as_dicts() if row["agent_id"] == "planted-b"]
    assert [{**row, "agent_id": None} for row in out] == [{**row, "agent_id": None} for row in other]
    return out


def test_every_report_runs_and_says_what_it_answers(con: duckdb.DuckDBPyConnection) -> None:
    assert set(REPORTS) >= {"tokens", "tools", "evictions", "cache", "episodes", "unknown-outcomes"}
    for name, report in REPORTS.items():
        assert report.help, name
        result = run_report(con, name)
        assert result.columns[0] == "agent_id", name


def test_tools_report_error_rate_duplicates_and_slowest(con: duckdb.DuckDBPyConnection) -> None:
    tools = {row["tool"]: row for row in by_agent(run_report(con, "tools"))}
    bash, read = tools["bash"], tools["read_file"]
    assert (bash["calls"], bash["errors"], bash["unknown"], bash["duplicates"]) == (6, 2, 1, 1)
    assert bash["error_rate"] == pytest.approx(2 / 6, abs=1e-4)
    assert bash["duplicate_rate"] == pytest.approx(1 / 6, abs=1e-4)
    assert (bash["slowest_call"], bash["max_ms"]) == ("c-deploy", 5000)
    assert (read["calls"], read["errors"], read["duplicates"], read["slowest_call"]) == (2, 0, 1, "c-read-2")
    # Within 1 turn, turn 4 no longer repeats turn 2; the same-turn read still repeats.
    narrow = {row["tool"]: row["duplicates"] for row in by_agent(run_report(con, "tools", window=1))}
    assert narrow == {"bash": 0, "read_file": 1}
    wide = {row["tool"]: row["duplicates"] for row in by_agent(run_report(con, "tools", window=5))}
    assert wide == {"bash": 2, "read_file": 1}


def test_duplicates_report_names_the_call_and_what_it_repeats(con: duckdb.DuckDBPyConnection) -> None:
    got = [
        (row["turn"], row["call_id"], row["previous_call_id"], row["previous_turn"])
        for row in by_agent(run_report(con, "duplicates"))
    ]
    assert got == [(3, "c-read-2", "c-read-1", 3), (4, "c-test-2", "c-test-1", 2)]


def test_tokens_report_percentiles_per_section(con: duckdb.DuckDBPyConnection) -> None:
    rows = {row["section"]: row for row in by_agent(run_report(con, "tokens"))}
    assert list(rows) == ["system", "history", "(total)"]  # render order, total last
    history = rows["history"]
    # history tokens are 10, 20, ..., 110 over the 11 rendered turns.
    assert (history["turns"], history["mean"], history["p50"], history["max"], history["total"]) == (
        11,
        60.0,
        60,
        110,
        660,
    )
    assert history["p90"] == 100 and history["shortened_turns"] == 1
    assert (rows["system"]["p50"], rows["system"]["p99"], rows["system"]["shortened_turns"]) == (100, 100, 0)
    assert (rows["(total)"]["max"], rows["(total)"]["total"]) == (210, 1760)


def test_tokens_report_lists_sections_in_render_order_whatever_the_first_prompt_held(tmp_path: Path) -> None:
    # The first prompt has no working memory yet, so its active_work sits at position 2;
    # a later prompt has both. The report follows the render order, not positions.
    def prompt(turn: int, sections: list[tuple[str, int]]) -> r.Record:
        return r.Record(
            body=r.PromptRendered(
                cache_key=f"k{turn}",
                prompt_hash=f"h{turn}",
                working_memory_revision=turn,
                compression_epoch=0,
                sections=tuple(r.SectionTokens(section=name, tokens=n) for name, n in sections),
                total_tokens=sum(n for _, n in sections),
                budget=100,
                estimator="holon-heuristic",
            ),
            ts=turn,
            turn=turn,
        )

    write_ledger(
        tmp_path / "l",
        "solo",
        [
            prompt(1, [("system", 5), ("active_work", 3), ("current_input", 2)]),
            prompt(2, [("system", 5), ("working_memory", 7), ("active_work", 3), ("history", 9)]),
        ],
    )
    got = [row["section"] for row in run_report(connect(tmp_path / "l"), "tokens").as_dicts()]
    assert got == ["system", "working_memory", "active_work", "history", "current_input", "(total)"]


def test_evictions_report(con: duckdb.DuckDBPyConnection) -> None:
    got = [
        (
            row["section"],
            row["cause"],
            row["omissions"],
            row["prompts"],
            row["distinct_refs"],
            row["tokens"],
            row["first_turn"],
            row["last_turn"],
            row["example"],
        )
        for row in by_agent(run_report(con, "evictions"))
    ]
    # Counted by cause: the reasons' ids and counts would make a row per item (before, the
    # demo's "1 finished plan steps collapsed" … "8 …" were eight rows).
    assert got == [
        ("history", "history over budget", 2, 2, 1, 80, 5, 6, "history over budget"),
        (
            "working_memory",
            "N finished plan steps collapsed",
            2,
            2,
            1,
            80,
            7,
            8,
            "3 finished plan steps collapsed",
        ),
        ("working_memory", "decision <id> not shown", 1, 1, 1, 0, 6, 6, "decision d1 not shown"),
    ]


def test_cache_report_names_each_break_and_its_cause(con: duckdb.DuckDBPyConnection) -> None:
    _, causes = planted()
    rows = by_agent(run_report(con, "cache"))
    got = [
        (
            row["turn"],
            row["break_section"],
            row["break_why"],
            row["lost_tokens"],
            row["changed"],
            row["caused_by"],
        )
        for row in rows
    ]
    # Each prompt is system (100) + history (10 x turn): the first call starts cold, a new
    # key loses it all, a history that changed form loses the history.
    assert got[0] == (1, "system", "first call", 110, None, ["system_policy@0"])
    first, rows = rows[0], rows[1:]
    assert (first["previous_key"], first["previous_revision"]) == (None, None)
    assert got[1:] == [
        (4, "system", "cache key", 140, "revision", causes[4]),
        (5, "history", "size changed", 50, None, []),
        (6, "history", "size changed", 60, None, []),
        (8, "system", "cache key", 180, "revision+epoch", causes[8]),
        (11, "system", "cache key", 210, "prefix", causes[11]),
    ]
    assert {(row["changes_per_100_turns"], row["breaks_per_100_turns"]) for row in rows} == {(25.0, 41.67)}
    # The previous prompt's key beside this one's: equal where the key held.
    assert [row["previous_key"] == row["cache_key"] for row in rows] == [False, True, True, False, False]
    assert (rows[0]["previous_revision"], rows[0]["revision"]) == (0, 1)  # turn 4
    assert (rows[3]["previous_epoch"], rows[3]["epoch"]) == (0, 1)  # turn 8


def test_the_cache_model_is_built_once_and_rebuilt_where_a_database_lacks_it(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    # connect() builds prompt_calls as a table, and the calls and cache reports read it; a
    # database without it (as an older holon wrote one) gets a view, with the same rows.
    kinds = dict(con.execute("SELECT table_name, 'table' FROM duckdb_tables()").fetchall())
    assert kinds["prompt_calls"] == "table"
    want = {name: run_report(con, name) for name in ("calls", "cache")}
    assert [row["call"] for row in by_agent(want["calls"])] == list(range(1, 12))
    con.execute(f"ATTACH '{tmp_path / 'older.duckdb'}' AS older")
    try:
        for name in TABLES:
            con.execute(f"CREATE TABLE older.{name} AS SELECT * FROM {name}")
    finally:
        con.execute("DETACH older")
    copy = duckdb.connect(str(tmp_path / "older.duckdb"), read_only=True)
    try:
        names = {name for (name,) in copy.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert "prompt_calls" not in names
        for name, result in want.items():
            assert run_report(copy, name) == result, name
    finally:
        copy.close()


def test_cache_report_keeps_every_cache_key_change_of_the_session_ledger(tmp_path: Path) -> None:
    # The fixture session's prompts record no sections: their key changes are all the
    # cache report can see, and each is still a row of it.
    write_ledger(tmp_path / "l", "multi", fixture_records("session_multi_work"))
    con = connect(tmp_path / "l")
    changes = run_sql(
        con,
        "SELECT seq, previous_key, cache_key FROM (SELECT seq, cache_key, lag(cache_key) OVER "
        "(ORDER BY seq) AS previous_key FROM prompts) WHERE cache_key <> previous_key ORDER BY seq",
    ).rows
    assert changes
    first, *rows = run_report(con, "cache").as_dicts()
    assert (first["break_why"], first["previous_key"]) == ("first call", None)  # the cache starts cold
    assert [(row["seq"], row["previous_key"], row["cache_key"]) for row in rows] == changes
    assert {(row["break_section"], row["break_why"]) for row in rows} == {(None, "cache key")}
    assert all(row["changed"] in ("revision", "epoch", "revision+epoch") for row in rows)
    assert all(row["lost_tokens"] == row["total_tokens"] for row in rows)  # nothing recorded is shared


def test_episodes_report(con: duckdb.DuckDBPyConnection) -> None:
    got = [
        (row["boundary_reason"], row["episodes"], row["mean_turns"], row["max_turns"], row["mean_records"])
        for row in by_agent(run_report(con, "episodes"))
    ]
    assert got == [("active_work_switched", 1, 7.0, 7, 70.0), ("wait_boundary", 1, 4.0, 4, 40.0)]


def test_unknown_outcomes_report(con: duckdb.DuckDBPyConnection) -> None:
    got = by_agent(run_report(con, "unknown-outcomes"))
    assert [(row["turn"], row["call_id"], row["idempotency_key"], row["turn_outcome"]) for row in got] == [
        (10, "c-migrate", "key-c-migrate", "interrupted")
    ]


def test_unknown_outcomes_name_a_sub_agents_calls_task(tmp_path: Path) -> None:
    records = [
        r.Record(body=r.TurnStarted(trigger="user"), ts=1, turn=1),
        r.Record(body=r.ToolIntent(call_id="own", tool="deploy"), ts=2, turn=1),
        r.Record(
            body=r.ToolIntent(call_id="sub", tool="Bash", args={"command": "ls"}, task_id="t1"), ts=3, turn=1
        ),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=4, turn=1),
    ]
    write_ledger(tmp_path / "l", "solo", records)
    report = run_report(connect(tmp_path / "l"), "unknown-outcomes")
    got = [(row["call_id"], row["task_id"]) for row in report.as_dicts()]
    assert got == [("own", None), ("sub", "t1")]


def test_report_usage_errors_are_one_clear_audit_error(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(AuditError, match="unknown report 'nope'; reports: tokens, tools"):
        run_report(con, "nope")
    with pytest.raises(AuditError, match="has no parameter 'turns'"):
        run_report(con, "tools", turns=3)
    with pytest.raises(AuditError, match="must be an integer, not 'three'"):
        run_report(con, "tools", window="three")
    with pytest.raises(AuditError, match="must be >= 0"):
        run_report(con, "tools", window=-1)
    assert run_report(con, "tools", window="2").rows == run_report(con, "tools", window=2).rows


def test_sql_errors_become_one_line(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(AuditError) as info:
        run_sql(con, "SELECT no_such_column FROM tool_calls")
    message = str(info.value)
    assert "\n" not in message and "no_such_column" in message and "tool_calls" in message
    with pytest.raises(AuditError, match="empty"):
        run_sql(con, "  ")
    result = run_sql(con, "SELECT tool, count(*) AS n FROM tool_calls GROUP BY tool ORDER BY tool")
    assert result.columns == ("tool", "n") and result.rows == [("bash", 12), ("read_file", 4)]


def test_every_report_on_an_empty_ledger_is_empty(tmp_path: Path) -> None:
    Ledger.create(tmp_path / "empty", agent_id="empty").close()
    empty = connect(tmp_path / "empty")
    for name in REPORTS:
        assert run_report(empty, name).rows == [], name


def test_open_query_streams_rows_in_batches_of_at_most_the_size_asked() -> None:
    con = duckdb.connect()
    stream = open_query(con, "SELECT range AS n FROM range(25)")
    assert stream.columns == ("n",)
    batches = list(stream.batches(10))
    assert [len(b) for b in batches] == [10, 10, 5]
    assert [row for batch in batches for row in batch] == [(n,) for n in range(25)]
    with pytest.raises(AuditError, match="SQL error"):
        open_query(con, "SELECT nope")
    with pytest.raises(ValueError, match="batch size"):
        next(open_query(con, "SELECT 1").batches(0))


def test_report_query_checks_parameters_without_a_connection() -> None:
    sql, values = report_query("tools", window="3")
    assert values == {"window": 3} and "FROM tool_call_repeats" in sql
    with pytest.raises(AuditError, match="must be >= "):
        report_query("tools", window="-1")
    with pytest.raises(AuditError, match="unknown report"):
        report_query("nope")


def test_calls_report_ends_each_shared_prefix_where_the_record_says_it_changed(tmp_path: Path) -> None:
    # Recitation-layout prompts (system, tools, history, working_memory, current_input), one per
    # turn but turn 3's second call; each line below says what the next call changes.
    def prompt(
        turn: int, key: str, revision: int, history: tuple[int, int], sizes: dict[str, int]
    ) -> r.Record:
        sections = {"system": 600, "tools": 500, **sizes}
        return r.Record(
            body=r.PromptRendered(
                cache_key=key,
                prompt_hash=f"h{turn}-{key}-{revision}",
                working_memory_revision=revision,
                compression_epoch=0,
                sections=tuple(r.SectionTokens(section=name, tokens=n) for name, n in sections.items()),
                total_tokens=sum(sections.values()),
                budget=100_000,
                estimator="holon-heuristic",
                history=r.HistoryAnchor(from_seq=history[0], cleared_through=history[1]),
            ),
            ts=turn,
            turn=turn,
        )

    def tail(history: int, memory: int = 200, current: int = 20) -> dict[str, int]:
        return {"history": history, "working_memory": memory, "current_input": current}

    write_ledger(
        tmp_path / "l",
        "calls",
        [
            prompt(1, "k1", 0, (0, -1), tail(1000)),
            prompt(2, "k1", 1, (0, -1), tail(1500)),  # the history grew: shared up to its old 1000
            prompt(3, "k1", 1, (0, -1), tail(1500)),  # a new turn, all else alike: breaks at the input
            prompt(3, "k1", 1, (0, -1), tail(1500)),  # the same call again: everything shared
            prompt(4, "k1", 2, (9, -1), tail(700)),  # the history starts later: a history step
            prompt(5, "k2", 2, (9, -1), {**tail(700), "tools": 400}),  # the prefix changed
        ],
    )
    rows = run_report(connect(tmp_path / "l"), "calls").as_dicts()
    fields = ("shared_tokens", "cached_tokens", "break_section", "break_why", "prefix_break")
    got = [tuple(row[name] for name in fields) for row in rows]
    assert got == [
        (0, 0, "system", "first call", False),
        (2100, 2100, "history", "history grew", False),
        (2800, 2800, "current_input", "new input", False),
        (2820, 2820, None, None, False),
        (1100, 1100, "history", "history step", True),
        (600, 0, "tools", "cache key", True),  # the system section is shared, but under 1,024 tokens
    ]
    assert [row["changed"] for row in rows] == [
        [],
        ["revision", "new input"],
        ["new input"],
        [],
        ["revision", "history step", "new input"],
        ["new input", "cache key"],
    ]
    # Under the provider minimum nothing is cached; a call stores its whole prompt for the next.
    assert rows[1]["cached_share"] == round(2100 / rows[1]["total_tokens"], 4)
    assert rows[1]["written_tokens"] == rows[1]["total_tokens"] - 2100
    assert rows[1]["cost"] == round(0.1 * 2100 + 1.25 * (rows[1]["total_tokens"] - 2100), 2)
    high = run_report(connect(tmp_path / "l"), "calls", minimum=2500).as_dicts()
    assert [row["cached_tokens"] for row in high] == [0, 0, 2800, 2820, 0, 0]


def test_calls_report_names_a_new_revision_where_working_memory_is_in_the_prefix(tmp_path: Path) -> None:
    # The rfc layout: working memory in the cacheable prefix, its key naming the revision.
    def prompt(turn: int, revision: int, memory: int) -> r.Record:
        sections = {"system": 600, "tools": 500, "working_memory": memory, "history": 900, "current_input": 9}
        return r.Record(
            body=r.PromptRendered(
                cache_key=f"holon:a:default:r{revision}:e0:abc",
                prompt_hash=f"h{turn}",
                working_memory_revision=revision,
                compression_epoch=0,
                sections=tuple(r.SectionTokens(section=name, tokens=n) for name, n in sections.items()),
                total_tokens=sum(sections.values()),
                budget=100_000,
                estimator="holon-heuristic",
                history=r.HistoryAnchor(from_seq=0),
            ),
            ts=turn,
            turn=turn,
        )

    write_ledger(tmp_path / "l", "rfc", [prompt(1, 0, 200), prompt(2, 1, 260)])
    second = run_report(connect(tmp_path / "l"), "calls").as_dicts()[1]
    assert (second["break_section"], second["break_why"], second["prefix_break"]) == (
        "working_memory",
        "revision",
        True,
    )
    assert second["shared_tokens"] == 1100 and second["cached_tokens"] == 1100
    assert second["changed"] == ["revision", "new input", "cache key"]


def _prompt(turn: int, key: str, sections: dict[str, int]) -> r.Record:
    """A prompt_rendered record of ``sections`` (name: tokens, in order), its history from seq 0."""
    return r.Record(
        body=r.PromptRendered(
            cache_key=key,
            prompt_hash=f"h{turn}-{key}",
            working_memory_revision=0,
            compression_epoch=0,
            sections=tuple(r.SectionTokens(section=name, tokens=n) for name, n in sections.items()),
            total_tokens=sum(sections.values()),
            budget=100_000,
            estimator="holon-heuristic",
            history=r.HistoryAnchor(from_seq=0) if "history" in sections else None,
        ),
        ts=turn,
        turn=turn,
    )


def test_calls_report_breaks_the_prefix_wherever_the_cache_key_changed(tmp_path: Path) -> None:
    # Recitation-layout prompts: working memory after the history, so the cacheable prefix is
    # the leading system and tools (and the context summary of prompt 3), not up to working memory.
    tail = {"history": 1000, "working_memory": 200, "current_input": 20}
    write_ledger(
        tmp_path / "recitation",
        "recitation",
        [
            _prompt(1, "k1", {"system": 600, "tools": 500, **tail}),
            _prompt(2, "k2", {"system": 600, "tools": 500, **tail}),  # a new key, every size alike
            _prompt(3, "k3", {"system": 600, "tools": 500, "context_summary": 50, **tail}),  # a longer prefix
            _prompt(4, "k4", {"system": 600, "tools": 500, **tail}),  # a shorter one again
        ],
    )
    rows = run_report(connect(tmp_path / "recitation"), "calls").as_dicts()
    fields = ("shared_tokens", "break_section", "break_why", "prefix_break")
    assert [tuple(row[name] for name in fields) for row in rows] == [
        (0, "system", "first call", False),
        # No size says where the key's change is: at the prefix's end, at the latest.
        (600, "tools", "cache key", True),
        # The previous prefix ends where this one goes on, and the other way round.
        (1100, "context_summary", "sections differ", True),
        (1100, "history", "sections differ", True),
    ]
    # A prompt that opens with no prefix section shares nothing under a new key.
    write_ledger(
        tmp_path / "open",
        "open",
        [_prompt(1, "k1", {"mandate": 300, **tail}), _prompt(2, "k2", {"mandate": 300, **tail})],
    )
    second = run_report(connect(tmp_path / "open"), "calls").as_dicts()[1]
    assert tuple(second[name] for name in fields) == (0, "mandate", "cache key", True)
    # Prompts that record no sections (another program's, or the fixture ledgers'): only
    # the key says the prefix changed, and the first call is still the cold start.
    write_ledger(
        tmp_path / "bare",
        "bare",
        [_prompt(turn, key, {}) for turn, key in ((1, "k1"), (2, "k1"), (3, "k2"))],
    )
    rows = run_report(connect(tmp_path / "bare"), "calls").as_dicts()
    assert [tuple(row[name] for name in fields) for row in rows] == [
        (0, None, "first call", False),
        (0, None, None, False),
        (0, None, "cache key", True),
    ]


def _model_call(turn: int, provider: str, **usage: int | None) -> r.Record:
    body = r.ModelCall(provider=provider, model="m", prompt_seq=turn * 10, round=1, **usage)  # type: ignore[arg-type]
    return r.Record(body=body, ts=1_700_000_000_000 + turn, turn=turn)


def test_usage_reports_the_provider_s_figures_beside_holon_s_estimate(tmp_path: Path) -> None:
    records = [
        # First call: nothing cached; Anthropic wrote the whole request.
        _model_call(1, "anthropic", input_tokens=1_000, cache_read_tokens=0, cache_write_tokens=1_000,
                    output_tokens=100, estimated_input_tokens=1_100, estimated_cache_read_tokens=0),
        # Second call: 900 read from the cache, the 300 new tokens written (holon thought 1,100).
        _model_call(2, "anthropic", input_tokens=1_200, cache_read_tokens=900, cache_write_tokens=300,
                    output_tokens=50, estimated_input_tokens=1_300, estimated_cache_read_tokens=1_100),
        # A response without usage (an OpenAI-compatible server that sends none).
        _model_call(3, "openai-chat", estimated_input_tokens=500, estimated_cache_read_tokens=0),
    ]  # fmt: skip
    write_ledger(tmp_path / "l", "agent-u", records)
    result = run_report(connect(tmp_path / "l"), "usage")
    rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
    anthropic, chat = rows
    assert anthropic["provider"] == "anthropic" and anthropic["calls"] == 2 and anthropic["unreported"] == 0
    assert (anthropic["input_tokens"], anthropic["cache_read_tokens"], anthropic["cache_write_tokens"]) == (
        2_200, 900, 1_300
    )  # fmt: skip
    assert anthropic["cache_share"] == round(900 / 2_200, 4)
    assert anthropic["estimated_cache_share"] == round(1_100 / 2_400, 4)
    # cost: uncached 0 + 0, reads 900 * 10%, writes 1,300 * 125%, output 150 * 500%.
    assert anthropic["cost"] == 900 * 0.10 + 1_300 * 1.25 + 150 * 5
    # estimated: reads 1,100 * 10%, writes (1,100 + 200) * 125%, the same output.
    assert anthropic["estimated_cost"] == 1_100 * 0.10 + 1_300 * 1.25 + 150 * 5
    assert chat["calls"] == 1 and chat["unreported"] == 1 and chat["input_tokens"] is None
    priced = run_report(connect(tmp_path / "l"), "usage", read_pct=50, write_pct=100, output_pct=100)
    assert dict(zip(priced.columns, priced.rows[0], strict=True))["cost"] == 900 * 0.5 + 1_300 + 150


# --------------------------------------------------------------------------- tied durations


def test_tools_report_names_the_earliest_of_tied_slowest_calls() -> None:
    # arg_max over tied durations returned whichever row DuckDB met first, and rows reach
    # it in the order of the duplicate check's window (partitions by arguments, hashed,
    # in parallel): on a fleet-sized table the answer changed from run to run. One thread
    # makes the old order repeatable, so the test fails every time on the old SQL.
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute(
        """
        CREATE TABLE tool_calls AS
        SELECT 'a' AS agent_id, 'c' || seq AS call_id, 'bash' AS tool, ('{"n":' || seq || '}')::JSON AS args,
               NULL::VARCHAR AS idempotency_key, seq AS turn, seq AS intent_seq, seq + 1 AS result_seq,
               'ok' AS status, 100 AS duration_ms, 0 AS output_bytes
        FROM range(1, 200) t(seq)
        """
    )
    row = run_report(con, "tools").as_dicts()[0]
    assert (row["max_ms"], row["slowest_call"]) == (100, "c1")
