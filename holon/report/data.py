"""What a run report shows, read from the audit tables of one ledger.

Every figure comes from the DuckDB tables behind ``holon audit`` (holon.audit) and its
canned reports — the per-call cache model is the ``calls`` report, the tools table the
``tools`` report — so the page and ``holon audit`` agree by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import duckdb
import msgspec

from holon.audit import REPORTS, run_report, run_sql
from holon.audit.reports import CACHE_MINIMUM, CACHE_READ_PRICE, CACHE_WRITE_PRICE
from holon.errors import UsageError

__all__ = [
    "CallRow",
    "CostSeries",
    "EpisodeSpan",
    "RESTORE_TOOL",
    "RunData",
    "ToolCallPoint",
    "ToolSummary",
    "TurnActivity",
    "read_run",
]

#: The recall tool that fetches an evicted item back by its ref (holon.runtime's
#: RECALL_TOOLS; tests/test_report.py checks the name): each call is a restore.
RESTORE_TOOL = "holon_get"


class CallRow(msgspec.Struct, frozen=True):
    """One model call: its tokens by section and its row of the ``calls`` report."""

    call: int
    seq: int
    turn: int | None
    total_tokens: int
    cached_tokens: int
    written_tokens: int
    cost: float
    prefix_break: bool
    break_section: str | None
    break_why: str | None
    changed: tuple[str, ...]
    sections: dict[str, int]


class CostSeries(msgspec.Struct, frozen=True):
    """One way the run's calls could be priced: a row of the cost summary, a line of the tokens chart.

    The recorded prompts are the first series; a stand-in policy for the same run (a
    full-history prompt per call, as `holon simulate` records) is another, with the same
    figures per call. ``tokens`` and ``cached`` are per call, in call order.
    """

    name: str
    tokens: tuple[int, ...]
    cached: tuple[int, ...]
    written: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.tokens)

    @property
    def cached_total(self) -> int:
        return sum(self.cached)

    @property
    def cost(self) -> float:
        written = sum(self.written)
        rest = self.total - self.cached_total - written
        return CACHE_READ_PRICE * self.cached_total + CACHE_WRITE_PRICE * written + rest


class TurnActivity(msgspec.Struct, frozen=True):
    """Per turn: the items its prompts left out (evictions), and the recall fetches (restores)."""

    turn: int
    evictions: int
    evicted_tokens: int
    restores: int


class ToolSummary(msgspec.Struct, frozen=True):
    """One row of the ``tools`` report."""

    tool: str
    calls: int
    errors: int
    interrupted: int
    unknown: int
    p50_ms: int | None
    p95_ms: int | None
    max_ms: int | None


class ToolCallPoint(msgspec.Struct, frozen=True):
    """One tool call on the time axis: when it started (its intent, else its result), for how long."""

    start_ts: int
    tool: str
    status: str
    duration_ms: int | None


class EpisodeSpan(msgspec.Struct, frozen=True):
    """One finalized episode: the turns it covers."""

    episode_id: int
    first_turn: int
    last_turn: int
    boundary_reason: str
    objective: str | None


class RunData(msgspec.Struct, frozen=True):
    """Everything the page shows about one ledger."""

    agent_id: str
    path: str
    records: int
    first_ts: int | None
    last_ts: int | None
    turns: int
    first_turn: int | None
    last_turn: int | None
    calls: tuple[CallRow, ...]
    section_order: tuple[str, ...]
    evictions: int
    evicted_tokens: int
    restores: int
    activity: tuple[TurnActivity, ...]
    tools: tuple[ToolSummary, ...]
    tool_calls: tuple[ToolCallPoint, ...]
    tool_call_count: int
    episodes: tuple[EpisodeSpan, ...]
    break_causes: tuple[tuple[str, str, int, int], ...]
    cache_minimum: int = CACHE_MINIMUM

    @property
    def recorded(self) -> CostSeries:
        """The recorded prompts as a cost series."""
        return CostSeries(
            name="recorded prompts",
            tokens=tuple(c.total_tokens for c in self.calls),
            cached=tuple(c.cached_tokens for c in self.calls),
            written=tuple(c.written_tokens for c in self.calls),
        )


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[object, ...]:
    rows = run_sql(con, sql).rows
    return rows[0]


#: The names of a simulated ledger's two series in the report (docs/simulate.md).
SIMULATED_SERIES: Final = {
    "holon": "holon, simulated (prefix-block cache)",
    "tool": "its own tool, as full history (prefix-block cache)",
}


def simulated_series(con: duckdb.DuckDBPyConnection) -> tuple[CostSeries, ...]:
    """A simulated ledger's two series (``simulated_calls``), holon's then the tool's; none otherwise.

    ``holon simulate`` prices both under the prefix-block cache model, so they are shown
    beside each other, and beside the recorded prompts' section-prefix estimate.
    """
    rows = run_sql(
        con,
        "SELECT series, list(tokens ORDER BY call), list(cached_prefix ORDER BY call), "
        "list(written_prefix ORDER BY call) FROM simulated_calls GROUP BY series ORDER BY series",
    ).rows
    found = {
        str(series): CostSeries(
            name=SIMULATED_SERIES.get(str(series), str(series)),
            tokens=tuple(int(t) for t in tokens),
            cached=tuple(int(c) for c in cached),
            written=tuple(int(w) for w in written),
        )
        for series, tokens, cached, written in rows
    }
    return tuple(found[name] for name in SIMULATED_SERIES if name in found)


def read_run(con: duckdb.DuckDBPyConnection) -> RunData:
    """The report's data for the one ledger loaded into ``con`` (see :func:`holon.audit.connect`).

    Raises UsageError when ``con`` holds more than one agent: a report pictures one run.
    """
    agents = run_sql(con, "SELECT agent_id, path, records FROM agents ORDER BY agent_id").rows
    if len(agents) != 1:
        raise UsageError(f"a report pictures one ledger; the connection holds {len(agents)} agents")
    agent_id, path, records = agents[0]
    first_ts, last_ts = _one(con, "SELECT min(ts), max(ts) FROM records")
    turns, first_turn, last_turn = _one(con, "SELECT count(*), min(turn), max(turn) FROM turns")
    calls = _calls(con)
    order = tuple(
        str(row[0])
        for row in run_sql(
            con, "SELECT section FROM prompt_sections GROUP BY section ORDER BY avg(position), section"
        ).rows
    )
    evictions, evicted_tokens = _one(con, "SELECT count(*), coalesce(sum(tokens), 0) FROM omissions")
    restores = _one(con, f"SELECT count(*) FROM tool_calls WHERE tool = '{RESTORE_TOOL}'")[0]
    tool_call_count = _one(con, "SELECT count(*) FROM tool_calls")[0]
    return RunData(
        agent_id=str(agent_id),
        path=str(path),
        records=int(str(records)),
        first_ts=_int_or_none(first_ts),
        last_ts=_int_or_none(last_ts),
        turns=int(str(turns)),
        first_turn=_int_or_none(first_turn),
        last_turn=_int_or_none(last_turn),
        calls=calls,
        section_order=order,
        evictions=int(str(evictions)),
        evicted_tokens=int(str(evicted_tokens)),
        restores=int(str(restores)),
        activity=_activity(con),
        tools=_tools(con),
        tool_calls=_tool_calls(con),
        tool_call_count=int(str(tool_call_count)),
        episodes=_episodes(con),
        break_causes=_break_causes(calls),
    )


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(str(value))


def _calls(con: duckdb.DuckDBPyConnection) -> tuple[CallRow, ...]:
    assert "calls" in REPORTS
    result = run_report(con, "calls")
    index = {name: i for i, name in enumerate(result.columns)}
    sections: dict[int, dict[str, int]] = {}
    for seq, section, tokens in run_sql(
        con,
        "SELECT seq, section, sum(tokens) FROM prompt_sections GROUP BY seq, section ORDER BY seq, section",
    ).rows:
        sections.setdefault(int(str(seq)), {})[str(section)] = int(str(tokens or 0))
    out: list[CallRow] = []
    for row in result.rows:
        seq = int(row[index["seq"]])
        out.append(
            CallRow(
                call=int(row[index["call"]]),
                seq=seq,
                turn=row[index["turn"]],
                total_tokens=int(row[index["total_tokens"]]),
                cached_tokens=int(row[index["cached_tokens"]]),
                written_tokens=int(row[index["written_tokens"]]),
                cost=float(row[index["cost"]]),
                prefix_break=bool(row[index["prefix_break"]]),
                break_section=row[index["break_section"]],
                break_why=row[index["break_why"]],
                changed=tuple(row[index["changed"]]),
                sections=sections.get(seq, {}),
            )
        )
    return tuple(out)


def _activity(con: duckdb.DuckDBPyConnection) -> tuple[TurnActivity, ...]:
    rows = run_sql(
        con,
        f"""
        WITH o AS (SELECT turn, count(*) AS n, sum(tokens) AS tokens FROM omissions
                   WHERE turn IS NOT NULL GROUP BY turn),
             g AS (SELECT turn, count(*) AS n FROM tool_calls
                   WHERE tool = '{RESTORE_TOOL}' AND turn IS NOT NULL GROUP BY turn)
        SELECT coalesce(o.turn, g.turn) AS turn, coalesce(o.n, 0), coalesce(o.tokens, 0), coalesce(g.n, 0)
        FROM o FULL OUTER JOIN g USING (turn) ORDER BY 1
        """,
    ).rows
    return tuple(TurnActivity(int(t), int(n), int(tokens), int(g)) for t, n, tokens, g in rows)


def _tools(con: duckdb.DuckDBPyConnection) -> tuple[ToolSummary, ...]:
    result = run_report(con, "tools")
    index = {name: i for i, name in enumerate(result.columns)}

    def get(row: Sequence[object], name: str) -> int | None:
        return _int_or_none(row[index[name]])

    return tuple(
        ToolSummary(
            tool=str(row[index["tool"]]),
            calls=int(str(row[index["calls"]])),
            errors=int(str(row[index["errors"]])),
            interrupted=int(str(row[index["interrupted"]])),
            unknown=int(str(row[index["unknown"]])),
            p50_ms=get(row, "p50_ms"),
            p95_ms=get(row, "p95_ms"),
            max_ms=get(row, "max_ms"),
        )
        for row in result.rows
    )


#: Most tool calls drawn one by one on the time axis; beyond, every k-th (said on the page).
MAX_TOOL_POINTS = 2000


def _tool_calls(con: duckdb.DuckDBPyConnection) -> tuple[ToolCallPoint, ...]:
    total = int(str(_one(con, "SELECT count(*) FROM tool_calls")[0]))
    step = max(1, -(-total // MAX_TOOL_POINTS))
    rows = run_sql(
        con,
        f"""
        SELECT coalesce(intent_ts, result_ts), tool, status, duration_ms FROM (
            SELECT *, row_number() OVER (ORDER BY coalesce(intent_seq, result_seq)) - 1 AS nth
            FROM tool_calls)
        WHERE nth % {step} = 0 ORDER BY nth
        """,
    ).rows
    return tuple(
        ToolCallPoint(int(ts), str(tool), str(status), _int_or_none(d)) for ts, tool, status, d in rows
    )


def _episodes(con: duckdb.DuckDBPyConnection) -> tuple[EpisodeSpan, ...]:
    rows = run_sql(
        con, "SELECT episode_id, first_turn, last_turn, boundary_reason, objective FROM episodes ORDER BY seq"
    ).rows
    return tuple(
        EpisodeSpan(int(e), int(f), int(last), str(reason or "-"), None if obj is None else str(obj))
        for e, f, last, reason, obj in rows
    )


def _break_causes(calls: Sequence[CallRow]) -> tuple[tuple[str, str, int, int], ...]:
    """Prefix breaks by (section, why): how many, and the tokens they re-sent (not cached)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for c in calls:
        if c.prefix_break:
            key = (c.break_section or "-", c.break_why or "-")
            entry = counts.setdefault(key, [0, 0])
            entry[0] += 1
            entry[1] += c.total_tokens - c.cached_tokens
    ranked = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    return tuple((section, why, n, tokens) for (section, why), (n, tokens) in ranked)
