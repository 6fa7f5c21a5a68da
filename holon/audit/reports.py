"""Canned audit reports: named SQL over the audit tables, with typed parameters.

Each report answers one operator question about a ledger or a fleet (every report
groups or lists by ``agent_id``). :func:`run_report` runs one by name; ``holon audit
PATH --report NAME`` does the same from the shell.
"""

from __future__ import annotations

from typing import Any, Final

import duckdb
import msgspec

from holon.audit.models import PROMPT_CALLS, TOOL_CALL_REPEATS, ensure_models
from holon.audit.query import AuditError, QueryResult, run_sql
from holon.context.sections import SECTION_ORDER
from holon.simulate.cache import READ_PRICE, WRITE_PRICE

__all__ = [
    "CACHE_MINIMUM",
    "CACHE_READ_PRICE",
    "CACHE_WRITE_PRICE",
    "REPORTS",
    "Report",
    "report_query",
    "run_report",
]


class Param(msgspec.Struct, frozen=True):
    """A report parameter: an integer with a default and a minimum."""

    default: int
    minimum: int
    help: str


class Report(msgspec.Struct, frozen=True):
    """A canned report: what it answers, its parameters (``$name`` in the SQL), its SQL."""

    name: str
    help: str
    sql: str
    params: dict[str, Param] = {}
    #: The models (holon.audit.models) its SQL reads beside the tables.
    models: tuple[str, ...] = ()


_WINDOW: Final = Param(
    default=3,
    minimum=0,
    help="a call repeats an earlier one if the same tool ran with the same arguments at most "
    "this many turns before (0: in the same turn)",
)

# Prices relative to an uncached input token (Anthropic's: a cache read costs a tenth, a
# five-minute cache write a quarter more, output five times as much): the usage report's
# cost is in those units, so it compares runs and providers without a price list.
_READ_PCT: Final = Param(
    default=10, minimum=0, help="price of a cache-read input token, in % of an uncached one"
)
_WRITE_PCT: Final = Param(
    default=125, minimum=0, help="price of a cache-written input token, in % of an uncached one"
)
_OUTPUT_PCT: Final = Param(
    default=500, minimum=0, help="price of an output token, in % of an uncached input one"
)

# Sums are cast back to BIGINT (``sum(x)::BIGINT``), as every count of tokens, bytes and
# prompts is: DuckDB sums BIGINTs as HUGEINTs, which fetch into Python several times
# slower (a report's rows over a 1,000-ledger fleet: ~50 ms a column of 30k rows).

# A call is a duplicate when the previous call of the same agent, tool and arguments
# (tool_call_repeats: arguments are JSON with sorted keys, so equal arguments are equal
# text) was made at most $window turns earlier. Calls outside any turn are never duplicates.
_FLAGGED_CALLS: Final = """
    WITH flagged AS (
        SELECT *, coalesce(args IS NOT NULL AND turn::HUGEINT - previous_turn <= $window, false) AS duplicate
        FROM tool_call_repeats
    )
"""

# Input cost in uncached-token equivalents of a cache model's reads and writes, as
# holon.simulate.CacheTotals.cost prices them (``{m}``: prefix or breakpoints).
_COST: Final = (
    f"{READ_PRICE} * sum(cached_{{m}}) + {WRITE_PRICE} * sum(written_{{m}}) "
    "+ (sum(tokens) - sum(cached_{m}) - sum(written_{m}))"
)

# The sections in render order, as a DuckDB list literal (the names are fixed identifiers).
_SECTION_LIST: Final = "[" + ", ".join(f"'{name}'" for name in SECTION_ORDER) + "]"

#: Providers cache no prefix shorter than this (OpenAI's automatic caching and Anthropic's
#: cache_control alike); the evaluation's cache models use the same floor.
CACHE_MINIMUM: Final = 1024
#: Prices of the cost under the cache model, in uncached-token equivalents: a token read
#: from the cache, a token written to it (the evaluation's, docs/evaluation.md).
CACHE_READ_PRICE: Final = 0.1
CACHE_WRITE_PRICE: Final = 1.25

_MINIMUM: Final = Param(
    default=CACHE_MINIMUM,
    minimum=0,
    help="fewest shared tokens a provider caches (a shorter shared prefix counts as not cached)",
)

_CALLS: Final = (
    """
    WITH cached AS (
        SELECT *, CASE WHEN shared_tokens >= $minimum THEN shared_tokens ELSE 0 END AS cached_tokens,
               -- each call stores its prompt for the next (none under the minimum)
               CASE WHEN total_tokens >= $minimum
                    THEN total_tokens - CASE WHEN shared_tokens >= $minimum THEN shared_tokens ELSE 0 END
                    ELSE 0 END AS written_tokens
        FROM prompt_calls
    )
    SELECT agent_id, call, seq, ts, turn, total_tokens, shared_tokens, cached_tokens,
           round(cached_tokens / nullif(total_tokens, 0), 4) AS cached_share, written_tokens,
           prefix_break, break_section, break_why, changed,
           round("""
    + str(CACHE_READ_PRICE)
    + """ * cached_tokens + """
    + str(CACHE_WRITE_PRICE)
    + """ * written_tokens + (total_tokens - cached_tokens - written_tokens), 2) AS cost
    FROM cached
    ORDER BY agent_id, seq
    """
)

# The calls the model says broke the prefix, with what the records say moved it. A view of
# cache-key changes alone is blind under the recitation layout: its key covers the system,
# tools, context summary and episodes, and holds while the mandate changes or the history
# moves its start, which is where imported runs lose their cache (docs/audit.md).
_CACHE: Final = """
    WITH causes AS (
        -- records that move the cacheable prefix, each assigned to the next prompt
        SELECT r.agent_id, p.seq AS prompt_seq,
               list(r.kind || '@' || r.seq ORDER BY r.seq) AS caused_by
        FROM (SELECT agent_id, seq, kind FROM records
              WHERE kind IN ('working_memory_delta', 'context_episode', 'system_policy')) r
        ASOF JOIN prompts p ON r.agent_id = p.agent_id AND r.seq < p.seq
        GROUP BY r.agent_id, p.seq
    ), rates AS (
        SELECT c.agent_id,
               round(100.0 * count(*) FILTER (WHERE c.cache_key <> c.previous_key)
                     / greatest(coalesce(any_value(t.turns), 0), 1), 2) AS changes_per_100_turns,
               round(100.0 * count(*) FILTER (WHERE c.prefix_break)
                     / greatest(coalesce(any_value(t.turns), 0), 1), 2) AS breaks_per_100_turns
        FROM prompt_calls c
        LEFT JOIN (SELECT agent_id, count(*) AS turns FROM turns GROUP BY agent_id) t
             ON t.agent_id = c.agent_id
        GROUP BY c.agent_id
    )
    SELECT c.agent_id, c.turn, c.seq, c.break_section, c.break_why,
           c.total_tokens - c.shared_tokens AS lost_tokens, c.total_tokens,
           -- what the key names that changed; NULL where the key held (the break is after the
           -- prefix the key covers: the history)
           CASE WHEN c.cache_key <> c.previous_key THEN concat_ws('+',
               CASE WHEN c.revision <> c.previous_revision THEN 'revision' END,
               CASE WHEN c.epoch <> c.previous_epoch THEN 'epoch' END,
               CASE WHEN c.revision = c.previous_revision AND c.epoch = c.previous_epoch THEN 'prefix' END)
           END AS changed,
           c.previous_revision, c.revision, c.previous_epoch, c.epoch,
           c.previous_key, c.cache_key, coalesce(x.caused_by, []::VARCHAR[]) AS caused_by,
           r.changes_per_100_turns, r.breaks_per_100_turns
    FROM prompt_calls c
    LEFT JOIN causes x ON x.agent_id = c.agent_id AND x.prompt_seq = c.seq
    JOIN rates r ON r.agent_id = c.agent_id
    -- and each agent's first call: the cache starts cold there, and in a short run that is
    -- most of what the run paid for (a run of one prompt has no break, and still this row)
    WHERE c.prefix_break OR c.previous_seq IS NULL
    ORDER BY c.agent_id, c.seq
    """

REPORTS: Final[dict[str, Report]] = {
    report.name: report
    for report in (
        Report(
            name="tokens",
            help="tokens per section per turn (sections summed over a turn's prompts): "
            "mean, percentiles, max; the (total) row is the whole prompt; prompts rendered "
            "outside any turn follow, each on its own (scope 'outside a turn')",
            sql="""
            WITH per_unit AS (
                -- A unit is a turn's prompts, or one prompt rendered outside any turn: those
                -- share no turn, and grouped on their NULL turn they were one "turn" summing
                -- them all (its tokens the max of every section, and a turn too many).
                -- Render order; a section this holon does not know sorts after, by position.
                SELECT agent_id, turn IS NULL AS outside, section,
                       coalesce(list_position("""
            + _SECTION_LIST
            + """, section), 1000 + min(position))
                           AS position,
                       -- count(*): a section a prompt lists twice counts twice, as holon stats
                       -- counts it (and count(DISTINCT seq) tripled the report's time)
                       sum(tokens)::BIGINT AS tokens, count(*) AS prompts,
                       bool_or(form <> 'full') AS shortened
                FROM prompt_sections
                GROUP BY agent_id, turn, CASE WHEN turn IS NULL THEN seq END, section
                UNION ALL  -- whole prompts, sorted after every section
                SELECT agent_id, turn IS NULL, '(total)', 1000000, sum(total_tokens)::BIGINT, count(*), false
                FROM prompts GROUP BY agent_id, turn, CASE WHEN turn IS NULL THEN seq END
            )
            SELECT agent_id, CASE WHEN outside THEN 'outside a turn' ELSE 'turn' END AS scope, section,
                   count(*) FILTER (WHERE NOT outside) AS turns, sum(prompts)::BIGINT AS prompts,
                   round(avg(tokens), 1) AS mean,
                   quantile_disc(tokens, 0.5) AS p50, quantile_disc(tokens, 0.9) AS p90,
                   quantile_disc(tokens, 0.99) AS p99, max(tokens) AS max, sum(tokens)::BIGINT AS total,
                   count(*) FILTER (WHERE shortened) AS shortened_turns
            FROM per_unit
            GROUP BY agent_id, outside, section
            ORDER BY agent_id, outside, min(position), section
            """,
        ),
        Report(
            name="tools",
            help="per tool: calls, error rate, unknown outcomes, duplicate-call rate (same tool and "
            "arguments within $window turns), duration percentiles and the slowest call",
            params={"window": _WINDOW},
            sql=_FLAGGED_CALLS
            + """
            SELECT agent_id, tool, count(*) AS calls,
                   count(*) FILTER (WHERE status = 'error') AS errors,
                   round(count(*) FILTER (WHERE status = 'error') / count(*), 4) AS error_rate,
                   count(*) FILTER (WHERE status = 'interrupted') AS interrupted,
                   count(*) FILTER (WHERE status = 'unknown') AS unknown,
                   count(*) FILTER (WHERE duplicate) AS duplicates,
                   round(count(*) FILTER (WHERE duplicate) / count(*), 4) AS duplicate_rate,
                   quantile_disc(duration_ms, 0.5) AS p50_ms, quantile_disc(duration_ms, 0.95) AS p95_ms,
                   max(duration_ms) AS max_ms,
                   -- the earliest of tied slowest calls: arg_max keeps whichever tied row it
                   -- meets first, and rows arrive in a different order from run to run
                   first(call_id ORDER BY duration_ms DESC, call_seq)
                       FILTER (WHERE duration_ms IS NOT NULL) AS slowest_call,
                   sum(output_bytes)::BIGINT AS output_bytes
            FROM flagged
            GROUP BY agent_id, tool
            ORDER BY agent_id, calls DESC, tool
            """,
            models=(TOOL_CALL_REPEATS.name,),
        ),
        Report(
            name="duplicates",
            help="each duplicate call (same tool and arguments within $window turns of the previous "
            "one), with the call it repeats",
            params={"window": _WINDOW},
            sql=_FLAGGED_CALLS
            + """
            SELECT agent_id, turn, call_id, tool, args, status, previous_call_id, previous_turn,
                   idempotency_key
            FROM flagged WHERE duplicate
            ORDER BY agent_id, call_seq
            """,
            models=(TOOL_CALL_REPEATS.name,),
        ),
        Report(
            name="evictions",
            help="what prompts left out or truncated, by section and cause (the reason without its "
            "item's id and counts): how often, how many tokens, in how many prompts, first and last "
            "turn, and one reason as an example",
            sql="""
            SELECT agent_id, section, cause, count(*) AS omissions, count(DISTINCT seq) AS prompts,
                   count(DISTINCT ref) AS distinct_refs, sum(tokens)::BIGINT AS tokens,
                   min(turn) AS first_turn, max(turn) AS last_turn, min(reason) AS example
            FROM omissions
            GROUP BY agent_id, section, cause
            ORDER BY agent_id, omissions DESC, section, cause
            """,
        ),
        Report(
            name="cache",
            help="each agent's first call (break_why 'first call': the cache starts cold) and each call "
            "whose cached prefix broke (the calls report's prefix_break: under the "
            "section-prefix cache model its shared part ends before the previous call's history did, "
            "or its cache key changed): the first section that differs and why (cache key, revision, "
            "epoch, history step, sections differ, ...), the tokens lost (from the break on), what "
            "changed in the key, the records since the previous prompt that moved the prefix, and the "
            "agent's key changes and breaks per 100 turns",
            sql=_CACHE,
            models=(PROMPT_CALLS.name,),
        ),
        Report(
            name="calls",
            help="each model call (rendered prompt) beside the previous one, under the section-prefix "
            "cache model: its tokens, the tokens it shares, those cached (none under $minimum), "
            "where the shared prefix ends (section) and why (revision, epoch, history step, new "
            "input, cache key, ...), whether that broke the prefix, and its cost (cache reads "
            f"{CACHE_READ_PRICE}x, writes {CACHE_WRITE_PRICE}x)",
            params={"minimum": _MINIMUM},
            sql=_CALLS,
            models=(PROMPT_CALLS.name,),
        ),
        Report(
            name="usage",
            help="per agent, provider and model: the model calls' usage as the provider reported it "
            "(input, cache read and write, output tokens), the real cache share beside holon's "
            "estimate, and the cost in uncached-input-token units, real beside estimated",
            params={"read_pct": _READ_PCT, "write_pct": _WRITE_PCT, "output_pct": _OUTPUT_PCT},
            sql="""
            WITH calls AS (
                SELECT *, coalesce(cache_read_tokens, 0) AS read_, coalesce(cache_write_tokens, 0) AS written,
                       coalesce(estimated_cache_read_tokens, 0) AS est_read,
                       -- Anthropic writes what it does not read (up to the last breakpoint, which
                       -- holon's loop puts at the end); OpenAI charges no write.
                       CASE WHEN provider = 'anthropic'
                            THEN estimated_input_tokens - coalesce(estimated_cache_read_tokens, 0)
                            ELSE 0 END AS est_written
                FROM model_calls
            )
            SELECT agent_id, provider, model, count(*) AS calls,
                   count(*) FILTER (WHERE input_tokens IS NULL) AS unreported,
                   sum(input_tokens)::BIGINT AS input_tokens, sum(read_)::BIGINT AS cache_read_tokens,
                   sum(written)::BIGINT AS cache_write_tokens, sum(output_tokens)::BIGINT AS output_tokens,
                   sum(estimated_input_tokens)::BIGINT AS estimated_input_tokens,
                   sum(est_read)::BIGINT AS estimated_cache_read_tokens,
                   round(sum(read_) / nullif(sum(input_tokens), 0), 4) AS cache_share,
                   round(sum(est_read) / nullif(sum(estimated_input_tokens), 0), 4) AS estimated_cache_share,
                   round(sum(input_tokens - read_ - written + read_ * $read_pct / 100.0
                             + written * $write_pct / 100.0
                             + coalesce(output_tokens, 0) * $output_pct / 100.0), 1) AS cost,
                   round(sum(estimated_input_tokens - est_read - est_written + est_read * $read_pct / 100.0
                             + est_written * $write_pct / 100.0
                             + coalesce(output_tokens, 0) * $output_pct / 100.0), 1) AS estimated_cost
            FROM calls
            GROUP BY agent_id, provider, model
            ORDER BY agent_id, provider, model
            """,
        ),
        Report(
            name="episodes",
            help="finalized episodes by projection config and boundary reason: how many, and their "
            "length in turns and records (the config's turn_cap bounds it)",
            sql="""
            SELECT agent_id, projection_label, boundary_reason, count(*) AS episodes,
                   round(avg(turns), 1) AS mean_turns, quantile_disc(turns, 0.5) AS p50_turns,
                   max(turns) AS max_turns, round(avg(records), 1) AS mean_records,
                   max(records) AS max_records, min(episode_id) AS first_episode,
                   max(episode_id) AS last_episode
            FROM episodes
            GROUP BY agent_id, projection_label, boundary_reason
            ORDER BY agent_id, projection_label NULLS FIRST, episodes DESC, boundary_reason
            """,
        ),
        Report(
            name="unknown-outcomes",
            help="tool intents with no result: the side effect may or may not have happened "
            "(check before retrying; an idempotency key makes a retry safe); task_id names the task "
            "whose sub-agent made the call (NULL: the agent's own)",
            sql="""
            SELECT c.agent_id, c.turn, c.call_id, c.tool, c.args, c.idempotency_key, c.intent_seq,
                   c.intent_ts, t.outcome AS turn_outcome, c.task_id
            FROM tool_calls c
            LEFT JOIN turns t ON t.agent_id = c.agent_id AND t.turn = c.turn
            WHERE c.status = 'unknown'
            ORDER BY c.agent_id, c.intent_seq
            """,
        ),
        Report(
            name="simulation",
            help="a ledger `holon simulate` wrote: each series (holon; tool, the stand-in for what the "
            "source's tool sent) summed over its calls: tokens, the share read from each cache model, "
            "the input cost and its ratio to the tool's",
            sql=f"""
            WITH s AS (
                SELECT agent_id, series, count(*) AS calls, sum(tokens)::BIGINT AS tokens,
                       max(tokens) AS max_tokens,
                       round(sum(cached_prefix) / greatest(sum(tokens), 1), 4) AS cached_prefix_share,
                       round({_COST.format(m="prefix")}, 1) AS cost_prefix,
                       round(sum(cached_breakpoints) / greatest(sum(tokens), 1), 4)
                           AS cached_breakpoints_share,
                       round({_COST.format(m="breakpoints")}, 1) AS cost_breakpoints
                FROM simulated_calls GROUP BY agent_id, series
            )
            SELECT s.*, round(s.cost_prefix / nullif(t.cost_prefix, 0), 3) AS cost_prefix_vs_tool,
                   round(s.cost_breakpoints / nullif(t.cost_breakpoints, 0), 3) AS cost_breakpoints_vs_tool
            FROM s LEFT JOIN s t ON t.agent_id = s.agent_id AND t.series = 'tool'
            ORDER BY s.agent_id, s.series
            """,
        ),
    )
}


def _coerce(report: Report, name: str, value: Any) -> int:
    """A parameter value as the report's integer, checked against its minimum."""
    param = report.params[name]
    if isinstance(value, bool):
        raise AuditError(f"report {report.name!r}: parameter {name!r} must be an integer, not {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise AuditError(
            f"report {report.name!r}: parameter {name!r} must be an integer, not {value!r}"
        ) from None
    if number < param.minimum:
        raise AuditError(
            f"report {report.name!r}: parameter {name!r} must be >= {param.minimum}, not {number}"
        )
    return number


def run_report(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> QueryResult:
    """Run the canned report ``name`` on an audit connection.

    ``params`` override the report's parameter defaults (values may be strings, as from
    a command line). An unknown report or parameter raises :class:`AuditError`.
    """
    query = report_query(name, **params)
    ensure_models(con, REPORTS[name].models)
    return run_sql(con, *query)


def report_query(name: str, **params: Any) -> tuple[str, dict[str, Any] | None]:
    """The SQL and parameter values of the canned report ``name`` (see :func:`run_report`).

    For :func:`~holon.audit.query.open_query`, which streams the rows. An unknown report
    or parameter raises :class:`AuditError`.
    """
    report = REPORTS.get(name)
    if report is None:
        raise AuditError(f"unknown report {name!r}; reports: {', '.join(REPORTS)}")
    unknown = sorted(set(params) - set(report.params))
    if unknown:
        accepted = ", ".join(report.params) or "none"
        raise AuditError(
            f"report {name!r} has no parameter {', '.join(map(repr, unknown))} (it takes: {accepted})"
        )
    values = {key: _coerce(report, key, params.get(key, p.default)) for key, p in report.params.items()}
    return report.sql, values or None
