"""The audit tables' schema: each table's columns, what a row is, and the SQL that builds it.

:data:`TABLES` is the schema (docs/audit.md lists it): each :class:`Table` builds from
the newline-delimited JSON that :func:`holon.audit.load.connect` extracts from the
ledgers (``{kind}`` in its SQL is that kind's ``read_json``), typed by :data:`BODY_TYPES`.
Fields a record left at their default (the wire form omits them) are filled with that
default here, so a query never has to know about the omission.

May import records, projections, context (the render version and omission causes the
tables decode) and the audit query helpers; the loading is in holon.audit.load.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Iterable
from typing import Any, Final

from holon.context.causes import CAUSE_COUNT, CAUSE_ID, CAUSE_ID_REPLACEMENT
from holon.context.render import RENDER_VERSION, projection_stated
from holon.projections.config import DEFAULT_CONFIG, STATES_CONFIG
from holon.records import ProjectionConfig

__all__ = ["BODY_TYPES", "ENVELOPE", "JSON_BODY_FIELDS", "TABLES", "LedgerPaths", "Table", "sql_string"]

LedgerPaths = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]


class Table:
    """One audit table: its name, what a row is, and the SQL that builds it."""

    __slots__ = ("columns", "name", "row", "sql")

    def __init__(self, name: str, row: str, columns: dict[str, str], sql: str) -> None:
        self.name = name
        self.row = row
        #: column -> one-line description (the docs and ``holon audit`` list them).
        self.columns = columns
        self.sql = sql


# Columns every record row in the JSON lines carries (``agent_ix``: which ledger of the
# fleet, as chunks of several ledgers share a file); ``body`` is typed per table.
ENVELOPE: Final = (
    "agent_ix: 'INTEGER', seq: 'BIGINT', ts: 'BIGINT', turn: 'BIGINT', kind: 'VARCHAR', v: 'INTEGER'"
)

#: A projection config (holon.records.ProjectionConfig) as a DuckDB struct, its fields in order.
_PROJECTION_TYPE: Final = (
    "STRUCT(" + ", ".join(f"{name} BIGINT" for name in ProjectionConfig.__struct_fields__) + ")"
)

# Body types as DuckDB reads them (field names follow holon/records.py).
BODY_TYPES: Final = {
    "message": "STRUCT(role VARCHAR, text VARCHAR, channel VARCHAR, name VARCHAR, task_id VARCHAR)",
    "tool_intent": (
        "STRUCT(call_id VARCHAR, tool VARCHAR, args JSON, idempotency_key VARCHAR, task_id VARCHAR)"
    ),
    "tool_result": (
        "STRUCT(call_id VARCHAR, tool VARCHAR, status VARCHAR, output VARCHAR, "
        "blob STRUCT(hash VARCHAR, size BIGINT, preview VARCHAR), exit_code BIGINT, "
        "touched_files VARCHAR[], duration_ms BIGINT, task_id VARCHAR)"
    ),
    "turn_started": "STRUCT(trigger VARCHAR, input VARCHAR)",
    "turn_ended": "STRUCT(outcome VARCHAR, error VARCHAR)",
    "prompt_rendered": (
        "STRUCT(working_memory_revision BIGINT, compression_epoch BIGINT, cache_key VARCHAR, "
        "prompt_hash VARCHAR, total_tokens BIGINT, budget BIGINT, estimator VARCHAR, "
        "sections STRUCT(section VARCHAR, tokens BIGINT, form VARCHAR)[], "
        "omitted STRUCT(section VARCHAR, ref VARCHAR, reason VARCHAR, tokens BIGINT)[], "
        # Of render_config, only the keys the audit reads: as a struct, DuckDB extracts them
        # as it parses the line, where a JSON column is parsed again for each key taken out.
        "render_config STRUCT(version JSON, projection JSON), episodes BIGINT[], "
        "history STRUCT(from_seq BIGINT, cleared_through BIGINT))"
    ),
    "model_call": (
        "STRUCT(provider VARCHAR, model VARCHAR, prompt_seq BIGINT, round BIGINT, input_tokens BIGINT, "
        "cache_read_tokens BIGINT, cache_write_tokens BIGINT, output_tokens BIGINT, "
        "estimated_input_tokens BIGINT, estimated_cache_read_tokens BIGINT, response_id VARCHAR, "
        "stop_reason VARCHAR)"
    ),
    "working_memory_delta": (
        "STRUCT(from_revision BIGINT, to_revision BIGINT, reason VARCHAR, changed_fields VARCHAR[], "
        "lines VARCHAR[], evidence_from_seq BIGINT, evidence_to_seq BIGINT, projection_version BIGINT, "
        f"projection {_PROJECTION_TYPE})"
    ),
    "context_episode": (
        "STRUCT(episode_id BIGINT, boundary_reason VARCHAR, work_item_id VARCHAR, first_turn BIGINT, "
        "last_turn BIGINT, from_seq BIGINT, to_seq BIGINT, objective VARCHAR, delivery_target VARCHAR, "
        "summary_lines VARCHAR[], scope_hints VARCHAR[], touched_files VARCHAR[], commands VARCHAR[], "
        "verification VARCHAR[], decisions VARCHAR[], follow_ups VARCHAR[], waiting VARCHAR[], "
        f"projection_version BIGINT, projection {_PROJECTION_TYPE})"
    ),
    "work_plan": (
        "STRUCT(work_item_id VARCHAR, steps STRUCT(id VARCHAR, text VARCHAR, status VARCHAR)[], "
        "task_id VARCHAR)"
    ),
}


#: Fields of the bodies above that DuckDB reads as JSON (or reads only some keys of): any
#: integer fits them. Every other integer of a body above, and ``seq``, ``ts`` and ``turn``
#: of every record, is a BIGINT.
JSON_BODY_FIELDS: Final = frozenset({"args", "render_config"})


def _source(kind: str | None) -> str:
    """Placeholder for the rows of one kind (or of every record when ``kind`` is None)."""
    return "{records}" if kind is None else "{" + kind + "}"


# Each table's SQL reads its kinds through ``{kind}`` placeholders, which connect()
# replaces by a read_json over that kind's files (or an empty typed relation). Rows come
# out ordered by agent and seq, so a plain SELECT reads like the ledger.
#: An omission's reason as a cause to count by (see holon.context.causes, which `holon
#: stats` counts by too): the id of the item it names becomes ``<id>`` and every count ``N``.
_CAUSE: Final = (
    f"regexp_replace(regexp_replace({{reason}}, '{CAUSE_ID}', '{CAUSE_ID_REPLACEMENT}', 'g'), "
    f"'{CAUSE_COUNT}', 'N', 'g')"
)


# The projection config a derived record or a prompt was derived or rendered under, as
# holon itself reads it (holon.projections.config.stated_config, and
# holon.context.render.projection_stated for prompts): the fields it states, each one it
# leaves out at its default; the default config where the record states it by omission;
# NULL where it states none (a record written before records stated their config).
# Generated from ProjectionConfig, so a new field is a new struct field here too.
_PROJECTION_FIELDS: Final = ProjectionConfig.__struct_fields__
#: The first render version whose prompts state the default config by omission (asked of
#: projection_stated, which holds the rule, rather than copied from it).
_PROMPT_STATES_DEFAULT: Final = next(
    version
    for version in range(RENDER_VERSION + 1)
    if projection_stated({"version": version}, where="the audit") is not None
)


def sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _template(sql: str) -> str:
    """``sql`` inside a table's SQL, which str.format fills in: its braces doubled."""
    return sql.replace("{", "{{").replace("}", "}}")


def _projection_struct(value: str | None) -> str:
    """The config ``value`` (a struct with NULL for the fields left out) filled in; the default if None."""
    fields = (
        f"'{name}': coalesce({value}.{name}, {getattr(DEFAULT_CONFIG, name)})"
        if value is not None
        else f"'{name}': {getattr(DEFAULT_CONFIG, name)}"
        for name in _PROJECTION_FIELDS
    )
    return "{" + ", ".join(fields) + "}"


def _derived_projection(alias: str) -> str:
    """The ``projection`` column of a working_memory_delta or context_episode row ``alias``.

    A stated config has every field: extraction writes the body as msgspec decoded it.
    """
    body = f"{alias}.body"
    return _template(
        f"CAST(CASE WHEN {body}.projection_version >= {STATES_CONFIG} "
        f"THEN coalesce({body}.projection, {_projection_struct(None)}) END AS {_PROJECTION_TYPE})"
    )


#: A prompt's ``render_config.projection`` (any JSON: render_config is free-form) as a
#: projection struct, NULL for a field it leaves out. In a column of its own, computed
#: once: an expression repeated in each field of the filled-in struct ran once per field.
_STATED_IN_PROMPT: Final = (
    "json_transform(body.render_config.projection, "
    + sql_string("{" + ", ".join(f'"{name}": "BIGINT"' for name in _PROJECTION_FIELDS) + "}")
    + ")"
)


def _prompt_projection(alias: str) -> str:
    """The ``projection`` column of a prompt_rendered row ``alias`` (with ``stated``: _STATED_IN_PROMPT)."""
    recorded = f"{alias}.body.render_config.projection"
    version = f"{alias}.body.render_config.version"
    return _template(
        f"CAST(CASE WHEN json_type({recorded}) = 'OBJECT' THEN {_projection_struct(alias + '.stated')} "
        # Recorded, but not as a config: holon refuses to read it (InvalidRecord).
        f"WHEN {recorded} IS NOT NULL THEN NULL "
        f"WHEN json_type({version}) IN ('BIGINT', 'UBIGINT') "
        f"AND {version}::HUGEINT >= {_PROMPT_STATES_DEFAULT} THEN {_projection_struct(None)} "
        f"END AS {_PROJECTION_TYPE})"
    )


def _projection_label(column: str) -> str:
    """``column`` as holon's messages name a config: ``ProjectionConfig(turn_cap=4)``; the default ``()``."""
    changed = ", ".join(
        f"CASE WHEN {column}.{name} <> {getattr(DEFAULT_CONFIG, name)} THEN '{name}=' || {column}.{name} END"
        for name in _PROJECTION_FIELDS
    )
    return _template(
        f"CASE WHEN {column} IS NOT NULL THEN 'ProjectionConfig(' || concat_ws(', ', {changed}) || ')' END"
    )


def _with_projection(columns: str, projection: str, source: str) -> str:
    """A table's SQL: ``columns`` and the ``projection`` column of each row of ``source``, its
    ``projection_label``, ordered by agent and seq (the label names the projection column)."""
    return (
        f"SELECT *, {_projection_label('projection')} AS projection_label "
        f"FROM (SELECT {columns}, {projection} AS projection FROM {source}) ORDER BY agent_id, seq"
    )


_PROJECTION_COLUMN: Final = (
    "the projection config it was derived under (every field; the default where it states it by "
    f"omission), NULL when it states none (derived before projection version {STATES_CONFIG})"
)
_TASK_ID: Final = (
    "the task (task_started id) whose sub-agent recorded it; NULL: the agent's own (schema version 4)"
)
_PROJECTION_LABEL: Final = (
    "that config as holon names it: ProjectionConfig() for the default, else its fields that "
    "differ, as ProjectionConfig(turn_cap=4)"
)


TABLES: Final[dict[str, Table]] = {
    t.name: t
    for t in (
        Table(
            "agents",
            "one loaded ledger",
            {
                "agent_id": "the ledger's agent id",
                "path": "absolute path of the ledger directory",
                "records": "records loaded (the head seq + 1 when loading began)",
                "head_seq": "seq of the newest record loaded (-1 when empty)",
                "head_hash": "chain hash of that record: names the ledger state audited",
                "projection": (
                    "the projection config its deltas, episodes and prompts state (the first to state "
                    "one), NULL when none does"
                ),
                "projection_label": _PROJECTION_LABEL,
                "projection_configs": (
                    "how many different configs they state: 2 or more means the config changed "
                    "within the ledger, which Agent.open refuses"
                ),
            },
            # Built after the tables it reads (see _build).
            """
            WITH stated AS (
                SELECT agent_id, seq, projection FROM deltas WHERE projection IS NOT NULL
                UNION ALL SELECT agent_id, seq, projection FROM episodes WHERE projection IS NOT NULL
                UNION ALL SELECT agent_id, seq, projection FROM prompts WHERE projection IS NOT NULL
            ), per_agent AS (
                SELECT agent_id, first(projection ORDER BY seq) AS projection,
                       count(DISTINCT projection) AS projection_configs
                FROM stated GROUP BY agent_id
            )
            SELECT f.agent_id, f.path, f.records, f.head_seq, f.head_hash, s.projection,
                   """
            + _projection_label("s.projection")
            + """ AS projection_label,
                   coalesce(s.projection_configs, 0) AS projection_configs
            FROM _fleet f LEFT JOIN per_agent s USING (agent_id)
            ORDER BY f.agent_id
            """,
        ),
        Table(
            "records",
            "one ledger record (every kind)",
            {
                "agent_id": "agent of the ledger",
                "seq": "record seq (0-based, gapless per agent)",
                "ts": "caller-supplied time, integer ms since the epoch (epoch_ms(ts) for a TIMESTAMP)",
                "turn": "turn index, NULL outside a turn",
                "kind": "record kind (message, tool_intent, ...)",
                "v": "record schema version",
                "body": "the body as JSON, fields at their default omitted",
            },
            """
            SELECT f.agent_id, r.seq, r.ts, r.turn, r.kind, r.v, r.body
            FROM {records} r JOIN _fleet f USING (agent_ix)
            ORDER BY f.agent_id, r.seq
            """,
        ),
        Table(
            "messages",
            "one message record",
            {
                "agent_id": "agent",
                "seq": "record seq",
                "ts": "time (ms)",
                "turn": "turn index",
                "role": "user, operator, assistant, system or channel",
                "channel": "channel name, if any",
                "name": "sender name, if any",
                "text": "message text",
                "chars": "length of the text in characters",
                "task_id": _TASK_ID,
            },
            """
            SELECT f.agent_id, m.seq, m.ts, m.turn, m.body.role AS role, m.body.channel AS channel,
                   m.body.name AS name, m.body.text AS text, length(m.body.text) AS chars,
                   m.body.task_id AS task_id
            FROM {message} m JOIN _fleet f USING (agent_ix)
            ORDER BY f.agent_id, m.seq
            """,
        ),
        Table(
            "tool_calls",
            "one tool call: its intent joined to its result by call id",
            {
                "agent_id": "agent",
                "call_id": "call id shared by intent and result",
                "tool": "tool name",
                "args": "arguments as JSON with sorted keys (equal arguments are equal text)",
                "idempotency_key": "idempotency key of the intent, if any",
                "turn": "turn of the intent (of the result when there is no intent)",
                "intent_seq": "seq of the intent, NULL for a result without an intent",
                "result_seq": "seq of the result, NULL for an intent with no result",
                "intent_ts": "time of the intent (ms)",
                "result_ts": "time of the result (ms)",
                "status": (
                    "ok, error, interrupted, or unknown (a result recorded as unknown — the runtime "
                    "records one for each intent a crash left open — or an intent with no result)"
                ),
                "exit_code": "exit code, if reported",
                "duration_ms": (
                    "reported duration, else result ts - intent ts; NULL when the outcome is unknown "
                    "(or the difference does not fit 64 bits: a ts from before holon checked them)"
                ),
                "output_bytes": "UTF-8 bytes of the output (inline or blob)",
                "blob_hash": "blob holding the output, if it was moved to the blob store",
                "touched_files": "files the result reports touching",
                "task_id": _TASK_ID + " (the intent's, else the result's)",
            },
            """
            WITH intents AS (
                SELECT f.agent_id, i.seq, i.ts, i.turn, i.body.call_id AS call_id, i.body.tool AS tool,
                       coalesce(i.body.args, '{{}}'::JSON) AS args, i.body.idempotency_key AS idempotency_key,
                       i.body.task_id AS task_id,
                       row_number() OVER (PARTITION BY f.agent_id, i.body.call_id ORDER BY i.seq) AS nth
                FROM {tool_intent} i JOIN _fleet f USING (agent_ix)
            ), results AS (
                SELECT f.agent_id, x.seq, x.ts, x.turn, x.body.call_id AS call_id, x.body.tool AS tool,
                       x.body.status AS status, x.body.exit_code AS exit_code,
                       x.body.duration_ms AS duration_ms, x.body.blob.hash AS blob_hash,
                       coalesce(x.body.blob.size, strlen(coalesce(x.body.output, ''))) AS output_bytes,
                       coalesce(x.body.touched_files, []::VARCHAR[]) AS touched_files,
                       x.body.task_id AS task_id,
                       row_number() OVER (PARTITION BY f.agent_id, x.body.call_id ORDER BY x.seq) AS nth
                FROM {tool_result} x JOIN _fleet f USING (agent_ix)
            )
            SELECT coalesce(i.agent_id, x.agent_id) AS agent_id, coalesce(i.call_id, x.call_id) AS call_id,
                   coalesce(i.tool, x.tool) AS tool, i.args, i.idempotency_key,
                   coalesce(i.turn, x.turn) AS turn, i.seq AS intent_seq, x.seq AS result_seq,
                   i.ts AS intent_ts, x.ts AS result_ts, coalesce(x.status, 'unknown') AS status,
                   x.exit_code,
                   -- an unknown result is written on reopen: its ts says when the crash was
                   -- noticed, not how long the call ran. The difference is taken in 128 bits:
                   -- a ledger from before the ts check may hold two that are 2**63 apart.
                   CASE WHEN coalesce(x.status, 'unknown') = 'unknown' THEN NULL
                        ELSE coalesce(x.duration_ms, try_cast(x.ts::HUGEINT - i.ts AS BIGINT)) END
                       AS duration_ms,
                   x.output_bytes,
                   x.blob_hash, x.touched_files, coalesce(i.task_id, x.task_id) AS task_id
            FROM intents i FULL OUTER JOIN results x
                 ON i.agent_id = x.agent_id AND i.call_id = x.call_id AND i.nth = x.nth
                    AND i.seq < x.seq
            ORDER BY 1, coalesce(i.seq, x.seq)
            """,
        ),
        Table(
            "turns",
            "one turn: its start joined to its end",
            {
                "agent_id": "agent",
                "turn": "turn index",
                "trigger": "what woke the agent",
                "input": (
                    "the turn's input, if any: what turn_started states, else the turn's first user, "
                    "operator or channel message (where holon's runtime records it)"
                ),
                "input_seq": "seq of the message holding the input, else of the turn_started stating it",
                "started_seq": "seq of turn_started (NULL if the ledger has only the end)",
                "ended_seq": "seq of turn_ended, NULL for an open (or abandoned) turn",
                "started_ts": "start time (ms)",
                "ended_ts": "end time (ms)",
                "outcome": "completed, waiting, failed or interrupted; NULL while open",
                "error": "error text of a failed turn",
                "duration_ms": "ended_ts - started_ts (NULL if it does not fit 64 bits, as in tool_calls)",
                "records": "records carrying this turn index",
                "tool_calls": "tool intents in the turn (its sub-agents' too: see tool_calls.task_id)",
                "prompts": "prompts rendered in the turn",
            },
            """
            WITH s AS (
                SELECT f.agent_id, t.turn, t.seq, t.ts, t.body.trigger AS trigger, t.body.input AS input
                FROM {turn_started} t JOIN _fleet f USING (agent_ix)
            ), e AS (
                SELECT f.agent_id, t.turn, t.seq, t.ts, t.body.outcome AS outcome, t.body.error AS error
                FROM {turn_ended} t JOIN _fleet f USING (agent_ix)
            ), m AS (
                -- Agent.turn(input=...) records the input as a message right after a bare
                -- turn_started (importers state it on turn_started too, and record the
                -- message): from turn_started alone, every turn holon ran had no input.
                SELECT agent_id, turn, arg_min(text, seq) AS text, min(seq) AS seq
                -- A sub-agent's prompt (a user message with a task_id) is not the turn's input.
                FROM messages
                WHERE turn IS NOT NULL AND role IN ('user', 'operator', 'channel') AND task_id IS NULL
                GROUP BY agent_id, turn
            ), counts AS (
                SELECT agent_id, turn, count(*) AS records,
                       count(*) FILTER (WHERE kind = 'tool_intent') AS tool_calls,
                       count(*) FILTER (WHERE kind = 'prompt_rendered') AS prompts
                FROM records WHERE turn IS NOT NULL GROUP BY ALL
            )
            SELECT coalesce(s.agent_id, e.agent_id) AS agent_id, coalesce(s.turn, e.turn) AS turn,
                   s.trigger, coalesce(s.input, m.text) AS input,
                   CASE WHEN s.input IS NULL OR s.input = m.text THEN m.seq ELSE s.seq END AS input_seq,
                   s.seq AS started_seq, e.seq AS ended_seq, s.ts AS started_ts,
                   e.ts AS ended_ts, e.outcome, e.error,
                   try_cast(e.ts::HUGEINT - s.ts AS BIGINT) AS duration_ms,  -- as tool_calls
                   coalesce(c.records, 0) AS records, coalesce(c.tool_calls, 0) AS tool_calls,
                   coalesce(c.prompts, 0) AS prompts
            FROM s FULL OUTER JOIN e ON s.agent_id = e.agent_id AND s.turn = e.turn
            LEFT JOIN counts c
                 ON c.agent_id = coalesce(s.agent_id, e.agent_id) AND c.turn = coalesce(s.turn, e.turn)
            LEFT JOIN m ON m.agent_id = coalesce(s.agent_id, e.agent_id) AND m.turn = coalesce(s.turn, e.turn)
            ORDER BY 1, 2
            """,
        ),
        Table(
            "prompts",
            "one rendered prompt (a prompt_rendered record)",
            {
                "agent_id": "agent",
                "seq": "record seq",
                "ts": "time (ms)",
                "turn": "turn index",
                "revision": "working_memory_revision shown",
                "epoch": "compression_epoch shown",
                "cache_key": "cache key of the prompt's cacheable prefix",
                "prompt_hash": "hash of the prompt bytes",
                "total_tokens": "estimated tokens of the whole prompt",
                "budget": "token budget it was rendered for",
                "estimator": "token estimator used",
                "sections": "list of {section, tokens, form} in render order",
                "omitted_count": "items omitted or truncated (each has a ref)",
                "omitted_tokens": "tokens those items would have taken, where known",
                "episodes": "ids of the episodes rendered",
                "history_from_seq": (
                    "seq where its recent history began (NULL when it records none: a prompt "
                    "without history, or an older renderer)"
                ),
                "history_cleared_through": (
                    "seq through which that history's tool results were cleared, -1 for none "
                    "(NULL with history_from_seq)"
                ),
                "projection": (
                    "the projection config it was rendered under, as its render_config states it (every "
                    "field; the default where it states it by omission, from render version "
                    f"{_PROMPT_STATES_DEFAULT}), NULL when it states none (an older renderer or another "
                    "program)"
                ),
                "projection_label": _PROJECTION_LABEL,
            },
            _with_projection(
                """f.agent_id, p.seq, p.ts, p.turn, p.body.working_memory_revision AS revision,
                   p.body.compression_epoch AS epoch, p.body.cache_key AS cache_key,
                   p.body.prompt_hash AS prompt_hash, p.body.total_tokens AS total_tokens,
                   p.body.budget AS budget, p.body.estimator AS estimator,
                   list_transform(coalesce(p.body.sections, []),
                       lambda s: {{'section': s.section, 'tokens': s.tokens,
                                   'form': coalesce(s.form, 'full')}}) AS sections,
                   len(coalesce(p.body.omitted, [])) AS omitted_count,
                   coalesce(list_sum(list_transform(p.body.omitted, lambda o: coalesce(o.tokens, 0))), 0)
                       ::BIGINT AS omitted_tokens,
                   coalesce(p.body.episodes, []::BIGINT[]) AS episodes,
                   p.body.history.from_seq AS history_from_seq,
                   CASE WHEN p.body.history IS NOT NULL
                        THEN coalesce(p.body.history.cleared_through, -1) END AS history_cleared_through""",
                _prompt_projection("p"),
                "(SELECT *, " + _template(_STATED_IN_PROMPT) + " AS stated FROM {prompt_rendered}) p "
                "JOIN _fleet f USING (agent_ix)",
            ),
        ),
        Table(
            "model_calls",
            "one model call and the usage its provider reported (a model_call record)",
            {
                "agent_id": "agent",
                "seq": "record seq",
                "ts": "time (ms), when the response was read",
                "turn": "turn index",
                "provider": "anthropic, openai-chat or openai-responses",
                "model": "the model named in the request",
                "prompt_seq": "seq of the prompt_rendered record the request was built from",
                "round": "the call's number among the calls made on that prompt (from 1)",
                "input_tokens": "every input token the provider counted, cache reads and writes included",
                "cache_read_tokens": "input tokens the provider read from its prompt cache",
                "cache_write_tokens": (
                    "input tokens the provider wrote to its prompt cache (NULL: not reported)"
                ),
                "output_tokens": "tokens the model wrote",
                "estimated_input_tokens": "holon's estimate of the request's input tokens",
                "estimated_cache_read_tokens": (
                    "holon's estimate of the tokens a cache could serve: what the previous call sent too"
                ),
                "response_id": "the provider's id of the response",
                "stop_reason": "why the model stopped (end_turn, tool_use, stop, tool_calls, completed, ...)",
            },
            """
            SELECT f.agent_id, m.seq, m.ts, m.turn, m.body.provider AS provider, m.body.model AS model,
                   m.body.prompt_seq AS prompt_seq, m.body.round AS round,
                   m.body.input_tokens AS input_tokens, m.body.cache_read_tokens AS cache_read_tokens,
                   m.body.cache_write_tokens AS cache_write_tokens, m.body.output_tokens AS output_tokens,
                   m.body.estimated_input_tokens AS estimated_input_tokens,
                   m.body.estimated_cache_read_tokens AS estimated_cache_read_tokens,
                   m.body.response_id AS response_id, m.body.stop_reason AS stop_reason
            FROM {model_call} m JOIN _fleet f USING (agent_ix)
            ORDER BY f.agent_id, m.seq
            """,
        ),
        Table(
            "prompt_sections",
            "one section of one rendered prompt",
            {
                "agent_id": "agent",
                "seq": "seq of the prompt_rendered record",
                "turn": "turn index",
                "position": "1-based position of the section in the prompt",
                "section": "section name",
                "tokens": "tokens the section took",
                "form": "full, compact, truncated or omitted",
            },
            """
            SELECT agent_id, seq, turn, position, s.section AS section, s.tokens AS tokens, s.form AS form
            FROM (SELECT agent_id, seq, turn, unnest(sections) AS s,
                         unnest(range(1, len(sections) + 1)) AS position FROM prompts)
            ORDER BY agent_id, seq, position
            """,
        ),
        Table(
            "omissions",
            "one item a rendered prompt omitted or truncated (an eviction)",
            {
                "agent_id": "agent",
                "seq": "seq of the prompt_rendered record",
                "turn": "turn index",
                "section": "section the item belonged to",
                "ref": "ref that restores it (ledger:<seq>, blob:<hash>, episode:<id>)",
                "reason": "why it was left out",
                "cause": "the reason with its item's id and its counts left out (<id>, N), to count by",
                "tokens": "tokens it would have taken (0 when not reported)",
            },
            f"""
            SELECT agent_id, seq, turn, o.section AS section, o.ref AS ref, o.reason AS reason,
                   {_CAUSE.format(reason="o.reason")} AS cause,
                   coalesce(o.tokens, 0) AS tokens
            FROM (SELECT f.agent_id, p.seq, p.turn, unnest(p.body.omitted) AS o,
                         unnest(range(len(p.body.omitted))) AS position
                  FROM {{prompt_rendered}} p JOIN _fleet f USING (agent_ix))
            ORDER BY agent_id, seq, position
            """,
        ),
        Table(
            "deltas",
            "one working-memory delta (derived record)",
            {
                "agent_id": "agent",
                "seq": "record seq",
                "ts": "time (ms)",
                "turn": "turn index",
                "from_revision": "revision before",
                "to_revision": "revision after",
                "reason": "why working memory changed",
                "changed_fields": "snapshot fields that changed",
                "lines": "the delta's summary lines",
                "evidence_from_seq": "first seq of the evidence it came from",
                "evidence_to_seq": "last seq of that evidence",
                "projection_version": "projection code version that derived it",
                "projection": _PROJECTION_COLUMN,
                "projection_label": _PROJECTION_LABEL,
            },
            _with_projection(
                """f.agent_id, d.seq, d.ts, d.turn, d.body.from_revision AS from_revision,
                         d.body.to_revision AS to_revision, d.body.reason AS reason,
                         d.body.changed_fields AS changed_fields, d.body.lines AS lines,
                         d.body.evidence_from_seq AS evidence_from_seq,
                         d.body.evidence_to_seq AS evidence_to_seq,
                         d.body.projection_version AS projection_version""",
                _derived_projection("d"),
                "{working_memory_delta} d JOIN _fleet f USING (agent_ix)",
            ),
        ),
        Table(
            "episodes",
            "one finalized context episode (derived record)",
            {
                "agent_id": "agent",
                "seq": "seq of the context_episode record",
                "ts": "time (ms)",
                "episode_id": "episode id (0-based per agent)",
                "boundary_reason": "boundary that closed it",
                "work_item_id": "work item it served",
                "first_turn": "first turn in it",
                "last_turn": "last turn in it",
                "turns": "last_turn - first_turn + 1",
                "from_seq": "first evidence seq",
                "to_seq": "last evidence seq",
                "records": "to_seq - from_seq + 1",
                "objective": "objective of the work item",
                "delivery_target": "delivery target",
                "summary_lines": "summary lines",
                "touched_files": "files touched",
                "commands": "commands run",
                "verification": "verification results",
                "decisions": "decisions",
                "follow_ups": "follow-ups",
                "waiting": "waits",
                "projection_version": "projection code version that derived it",
                "projection": _PROJECTION_COLUMN,
                "projection_label": _PROJECTION_LABEL,
            },
            _with_projection(
                """f.agent_id, e.seq, e.ts, e.body.episode_id AS episode_id,
                   e.body.boundary_reason AS boundary_reason, e.body.work_item_id AS work_item_id,
                   e.body.first_turn AS first_turn, e.body.last_turn AS last_turn,
                   e.body.last_turn - e.body.first_turn + 1 AS turns,
                   e.body.from_seq AS from_seq, e.body.to_seq AS to_seq,
                   e.body.to_seq - e.body.from_seq + 1 AS records,
                   e.body.objective AS objective, e.body.delivery_target AS delivery_target,
                   coalesce(e.body.summary_lines, []::VARCHAR[]) AS summary_lines,
                   coalesce(e.body.touched_files, []::VARCHAR[]) AS touched_files,
                   coalesce(e.body.commands, []::VARCHAR[]) AS commands,
                   coalesce(e.body.verification, []::VARCHAR[]) AS verification,
                   coalesce(e.body.decisions, []::VARCHAR[]) AS decisions,
                   coalesce(e.body.follow_ups, []::VARCHAR[]) AS follow_ups,
                   coalesce(e.body.waiting, []::VARCHAR[]) AS waiting,
                   e.body.projection_version AS projection_version""",
                _derived_projection("e"),
                "{context_episode} e JOIN _fleet f USING (agent_ix)",
            ),
        ),
        Table(
            "plans",
            "one work plan record (a plan replaces its work item's earlier plan)",
            {
                "agent_id": "agent",
                "seq": "record seq",
                "ts": "time (ms)",
                "turn": "turn index",
                "work_item_id": "work item the plan belongs to (NULL: unscoped plan, or a sub-agent's)",
                "steps": "list of {id, text, status}",
                "step_count": "number of steps",
                "done": "steps done",
                "in_progress": "steps in progress",
                "pending": "steps pending",
                "blocked": "steps blocked",
                "skipped": "steps skipped",
                "task_id": _TASK_ID,
            },
            """
            SELECT agent_id, seq, ts, turn, work_item_id, steps, len(steps) AS step_count,
                   len(list_filter(steps, lambda s: s.status = 'done')) AS done,
                   len(list_filter(steps, lambda s: s.status = 'in_progress')) AS in_progress,
                   len(list_filter(steps, lambda s: s.status = 'pending')) AS pending,
                   len(list_filter(steps, lambda s: s.status = 'blocked')) AS blocked,
                   len(list_filter(steps, lambda s: s.status = 'skipped')) AS skipped, task_id
            FROM (SELECT f.agent_id, w.seq, w.ts, w.turn, w.body.work_item_id AS work_item_id,
                         w.body.task_id AS task_id,
                         list_transform(coalesce(w.body.steps, []),
                             lambda s: {{'id': s.id, 'text': s.text,
                                         'status': coalesce(s.status, 'pending')}}) AS steps
                  FROM {work_plan} w JOIN _fleet f USING (agent_ix))
            ORDER BY agent_id, seq
            """,
        ),
        Table(
            "simulated_calls",
            "one model call of a ledger `holon simulate` wrote, as one series sent it (docs/simulate.md)",
            {
                "agent_id": "agent",
                "call": "the call's number in the simulated run, from 1",
                "series": (
                    "holon (the prompt holon would have sent) or tool (the stand-in for what the "
                    "source's tool sent: its full history)"
                ),
                "source_seq": "seq, in the source ledger, of the model output the call made",
                "turn": "that record's turn",
                "prompt_seq": "seq of the prompt_rendered record holon's prompt for the call starts with",
                "rendered": "whether the call rendered that prompt (false: re-sent with the turn's rounds)",
                "tokens": "the series' prompt tokens at this call",
                "cached_prefix": "tokens read from an automatic prefix cache (OpenAI-style)",
                "written_prefix": "tokens added to that cache",
                "cached_breakpoints": "tokens read from a breakpoint cache (Anthropic-style)",
                "written_breakpoints": "tokens written to that cache",
            },
            """
            SELECT f.agent_id, s.call, s.series, s.source_seq, s.turn, s.prompt_seq, s.rendered,
                   s.tokens, s.cached_prefix, s.written_prefix, s.cached_breakpoints, s.written_breakpoints
            FROM {simulated_calls} s JOIN _fleet f USING (agent_ix)
            ORDER BY f.agent_id, s.call, s.series
            """,
        ),
    )
}


# Loading moved to holon.audit.load; these names stay importable from here for one release.
_MOVED: Final = frozenset(
    {
        "MAX_CHUNK_RECORDS",
        "connect",
        "default_chunk_records",
        "default_workers",
        "memory_limit_problem",
        "plan_jobs",
    }
)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(
            f"holon.audit.tables.{name} moved to holon.audit.load (import it from holon.audit)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("holon.audit.load"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
