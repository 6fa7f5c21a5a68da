"""Derived tables over the audit tables: models several reports read, computed once per load.

A model is a pure function of the loaded tables (no ledger is read again). :func:`connect`
and ``open_export(load=True)`` create each as a table after the tables it reads, so the
reports that share one (``calls`` and ``cache`` read :data:`PROMPT_CALLS`, ``tools`` and
``duplicates`` :data:`TOOL_CALL_REPEATS`) do not compute it again in every query.
``open_export()``'s views get a view of each, and a connection made another way (an audit
database an older holon wrote) gets a temporary view the first time a report needs it
(:func:`ensure_models`).

Over the 1,000-ledger fleet of ``python -m benchmarks parquet`` the section-prefix model
was 3.5 s of the ten reports' 4.8 s when each of the two reports built it
(docs/benchmarks.md, *Fleet Parquet export*).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import duckdb

from holon.audit.query import run_statement
from holon.audit.tables import TABLES, Table

__all__ = ["MODELS", "PROMPT_CALLS", "TOOL_CALL_REPEATS", "add_models", "ensure_models"]

# The sections that can open a prompt as its cacheable prefix (Stable and AgentScoped in
# either layout; working memory is in it only where it comes before every TurnScoped
# section, as in the rfc layout).
_PREFIX_SECTIONS: Final = "('system', 'tools', 'working_memory', 'context_summary', 'episodes')"

# The section-prefix cache model: each call beside the previous call of its agent, section
# by section in prompt order. holon records each section's size and form, the prefix's cache
# key (equal keys: byte-identical prefixes), the revision, the epoch and where the history
# began, not the sections' bytes, so a section after the prefix counts as unchanged when
# nothing recorded says otherwise. The first section that differs is where the shared
# prefix ends, and `why` says what says it differs; a history kept from the same start
# that only grew is shared up to the previous call's length (it grows at its end). The
# prefix is the prompt's leading run of prefix sections (`prefix_len` of them): in the
# recitation layout working memory is a prefix section that comes after the history, so it
# cannot say where that run ends.
_PROMPT_CALLS_SQL: Final = (
    """
    WITH p AS (
        SELECT agent_id, seq, ts, turn, revision, epoch, cache_key, total_tokens,
               history_from_seq, history_cleared_through, prefix_len,
               row_number() OVER w AS call,
               lag(seq) OVER w AS previous_seq, lag(turn) OVER w AS previous_turn,
               lag(cache_key) OVER w AS previous_key, lag(revision) OVER w AS previous_revision,
               lag(epoch) OVER w AS previous_epoch,
               lag(history_from_seq) OVER w AS previous_history_from,
               lag(history_cleared_through) OVER w AS previous_history_cleared,
               lag(prefix_len) OVER w AS previous_prefix_len
        FROM (SELECT *,
                     coalesce(list_position(list_transform(sections, lambda s: s.section NOT IN """
    + _PREFIX_SECTIONS
    + """), true),
                              len(sections) + 1) - 1 AS prefix_len
              FROM prompts)
        WINDOW w AS (PARTITION BY agent_id ORDER BY seq)
    ), sections AS (
        SELECT s.*, s.position <= p.prefix_len AS in_prefix, s.position = p.prefix_len AS prefix_end
        FROM prompt_sections s JOIN p ON p.agent_id = s.agent_id AND p.seq = s.seq
    ), paired AS (
        SELECT p.agent_id, p.seq, s.position, s.section, s.tokens, o.tokens AS previous_tokens,
               s.in_prefix,
               CASE
                   WHEN p.previous_seq IS NULL THEN 'first call'
                   WHEN o.section IS DISTINCT FROM s.section THEN 'sections differ'
                   WHEN s.in_prefix AND p.cache_key = p.previous_key THEN NULL
                   -- what changed it, where the record says: a revision's memory, an epoch's episodes
                   WHEN s.in_prefix AND s.section = 'working_memory' AND p.revision <> p.previous_revision
                       THEN 'revision'
                   WHEN s.in_prefix AND s.section = 'episodes' AND p.epoch <> p.previous_epoch THEN 'epoch'
                   WHEN s.in_prefix AND (s.tokens <> o.tokens OR s.form <> o.form) THEN 'cache key'
                   -- the key says the prefix changed, no size says where: at its end, at the latest
                   -- (a longer previous prefix differs where this one ends: sections differ)
                   WHEN s.prefix_end AND p.prefix_len >= p.previous_prefix_len THEN 'cache key'
                   WHEN s.in_prefix THEN NULL
                   -- a new key and no prefix section to hold it: nothing is shared
                   WHEN p.prefix_len = 0 AND s.position = 1 AND p.cache_key <> p.previous_key THEN 'cache key'
                   WHEN s.section = 'history'
                        AND (p.history_from_seq IS DISTINCT FROM p.previous_history_from
                             OR p.history_cleared_through IS DISTINCT FROM p.previous_history_cleared)
                       THEN 'history step'
                   WHEN s.section = 'history' AND s.form = o.form AND s.tokens > o.tokens THEN 'history grew'
                   WHEN s.section IN ('working_memory', 'pending_delta') AND p.revision <> p.previous_revision
                       THEN 'revision'
                   WHEN s.section = 'current_input' AND p.turn IS DISTINCT FROM p.previous_turn
                       THEN 'new input'
                   WHEN s.tokens <> o.tokens OR s.form <> o.form THEN 'size changed'
               END AS why
        FROM p JOIN sections s ON s.agent_id = p.agent_id AND s.seq = p.seq
        LEFT JOIN prompt_sections o
             ON o.agent_id = p.agent_id AND o.seq = p.previous_seq AND o.position = s.position
    ), breaks AS (
        SELECT agent_id, seq, arg_min(section, position) AS section, arg_min(why, position) AS why,
               arg_min(previous_tokens, position) AS previous_tokens, min(position) AS position
        FROM paired WHERE why IS NOT NULL GROUP BY agent_id, seq
    ), shared AS (
        SELECT x.agent_id, x.seq,
               coalesce(sum(x.tokens) FILTER (WHERE b.position IS NULL OR x.position < b.position), 0)
                   AS before_break,
               -- where the prefix ends: the history, else the prefix sections
               coalesce(max(x.position) FILTER (WHERE x.section = 'history'),
                        max(x.position) FILTER (WHERE x.in_prefix), 0) AS stable_end
        FROM paired x LEFT JOIN breaks b ON b.agent_id = x.agent_id AND b.seq = x.seq
        GROUP BY x.agent_id, x.seq
    ), model AS (
        SELECT p.*, b.section AS break_section, b.position AS break_position,
               -- a prompt that records no sections: only its key says its prefix changed
               coalesce(b.why, CASE WHEN p.previous_seq IS NULL THEN 'first call'
                                    WHEN p.cache_key <> p.previous_key THEN 'cache key' END) AS break_why,
               coalesce(s.stable_end, 0) AS stable_end,
               -- a BIGINT, as every token count: a sum is a HUGEINT, which converts to a
               -- Python int several times slower (29,668 rows of a fleet: 50 ms a column)
               least(p.total_tokens, coalesce(s.before_break, 0)
                     + CASE WHEN b.why = 'history grew' THEN b.previous_tokens ELSE 0 END)::BIGINT
                   AS shared_tokens
        FROM p LEFT JOIN shared s ON s.agent_id = p.agent_id AND s.seq = p.seq
        LEFT JOIN breaks b ON b.agent_id = p.agent_id AND b.seq = p.seq
    )
    -- a prefix break: the shared part ends before the previous call's history did (before
    -- its prefix, without history), or the key changed (equal keys, byte-identical
    -- prefixes: a new key is a new prefix, whatever the sizes say)
    SELECT agent_id, call, seq, ts, turn, total_tokens, shared_tokens,
           coalesce(break_why NOT IN ('first call', 'history grew')
                    AND break_position <= stable_end, false)
               OR coalesce(cache_key <> previous_key, false) AS prefix_break,
           break_section, break_why,
           CASE WHEN previous_seq IS NULL THEN []::VARCHAR[] ELSE list_filter(list_value(
               CASE WHEN revision <> previous_revision THEN 'revision' END,
               CASE WHEN epoch <> previous_epoch THEN 'epoch' END,
               CASE WHEN history_from_seq IS DISTINCT FROM previous_history_from
                         OR history_cleared_through IS DISTINCT FROM previous_history_cleared
                    THEN 'history step' END,
               CASE WHEN turn IS DISTINCT FROM previous_turn THEN 'new input' END,
               CASE WHEN cache_key <> previous_key THEN 'cache key' END
           ), lambda c: c IS NOT NULL) END AS changed,
           revision, epoch, cache_key, history_from_seq, history_cleared_through,
           previous_seq, previous_revision, previous_epoch, previous_key
    FROM model
    ORDER BY agent_id, seq
    """
)

#: The section-prefix cache model: one row per rendered prompt, beside the previous one of
#: its agent (docs/audit.md, *The section-prefix cache model*).
PROMPT_CALLS: Final = Table(
    "prompt_calls",
    "each rendered prompt beside the previous one of its agent, under the section-prefix cache model "
    "(derived from prompts and prompt_sections; the calls and cache reports read it)",
    {
        "agent_id": "the ledger's agent id",
        "call": "the prompt's number among its agent's prompts, from 1, in seq order",
        "seq": "seq of the prompt_rendered record",
        "ts": "its time, ms since the epoch",
        "turn": "the turn it was rendered in; NULL outside any turn",
        "total_tokens": "the prompt's tokens",
        "shared_tokens": "tokens it shares with the previous prompt of its agent: up to the first "
        "section that differs, and a grown history's previous length",
        "prefix_break": "the shared part ends before the previous prompt's history did (or its prefix, "
        "without history), or the cache key changed",
        "break_section": "the first section that differs from the previous prompt's; NULL when none does",
        "break_why": "what says it differs: first call, sections differ, cache key, revision, epoch, "
        "history step, history grew, new input or size changed",
        "changed": "what the records say changed since the previous prompt: revision, epoch, history "
        "step, new input, cache key",
        "revision": "its working-memory revision",
        "epoch": "its compression epoch",
        "cache_key": "its prompt cache key",
        "history_from_seq": "the seq its history began at; NULL without one",
        "history_cleared_through": "the seq its history cleared tool results through; NULL when none",
        "previous_seq": "seq of the previous prompt of its agent; NULL for the first",
        "previous_revision": "that prompt's revision",
        "previous_epoch": "that prompt's epoch",
        "previous_key": "that prompt's cache key",
    },
    _PROMPT_CALLS_SQL,
)

#: Each tool call beside the previous call of its agent with the same tool and arguments
#: (the tools and duplicates reports flag a repeat within their ``window`` of turns).
TOOL_CALL_REPEATS: Final = Table(
    "tool_call_repeats",
    "each tool call (a tool_calls row) beside the previous call of its agent with the same tool and "
    "arguments (derived from tool_calls; the tools and duplicates reports read it)",
    {
        **TABLES["tool_calls"].columns,
        "call_seq": "the call's seq: its intent's, else its result's",
        "previous_turn": "the turn of the previous call of the same agent, tool and arguments; NULL for "
        "the first",
        "previous_call_id": "that call's id",
    },
    """
    SELECT *, coalesce(intent_seq, result_seq) AS call_seq,
           lag(turn) OVER same AS previous_turn,
           lag(call_id) OVER same AS previous_call_id
    FROM tool_calls
    WINDOW same AS (PARTITION BY agent_id, tool, args ORDER BY coalesce(intent_seq, result_seq))
    ORDER BY agent_id, call_seq
    """,
)

#: Every model, in the order they are built (a model may read the ones before it).
MODELS: Final[dict[str, Table]] = {model.name: model for model in (PROMPT_CALLS, TOOL_CALL_REPEATS)}


def add_models(con: duckdb.DuckDBPyConnection, *, materialize: bool) -> None:
    """Create every model on a connection holding the audit tables: tables, or views over them."""
    for model in MODELS.values():
        run_statement(con, f"CREATE {'TABLE' if materialize else 'VIEW'} {model.name} AS {model.sql}")


def ensure_models(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """Give a connection that lacks one of the models ``names`` (an audit database an older
    holon wrote) a temporary view of it."""
    wanted = [MODELS[name] for name in names]
    if not wanted:
        return
    present = {
        name
        for (name,) in con.execute(
            "SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views()"
        ).fetchall()
    }
    for model in wanted:
        if model.name not in present:
            run_statement(con, f"CREATE TEMP VIEW {model.name} AS {model.sql}")
