"""The audit tables hold exactly what the ledgers hold: checked against the records and a fold."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from holon import records as r
from holon.audit import (
    REPORTS,
    TABLES,
    AuditError,
    connect,
    export_parquet,
    extract,
    load,
    run_report,
    run_sql,
)
from holon.cli import main
from holon.context.render import projection_stated
from holon.errors import InvalidRecord, LedgerCorrupt, NotALedger
from holon.ledger import Ledger, encode_frame
from holon.projections import ProjectionConfig, ProjectionState, fold
from holon.projections.config import DEFAULT_CONFIG, describe_projection, stated_config
from tests.ledger_support import without_ts_check
from tests.msgspec_styles import STYLES, styled
from tests.runtime_support import ledger_records as read_ledger_records
from tests.runtime_support import prompted_turns
from tests.strategies import ledger_records
from tests.test_audit_support import fixture_names, fixture_records, session_records, write_ledger

SESSION = "agent-7"


class Fleet(msgspec.Struct):
    paths: dict[str, Path]
    records: dict[str, list[r.Record]]
    states: dict[str, ProjectionState]
    con: duckdb.DuckDBPyConnection


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    root = tmp_path_factory.mktemp("fleet")
    paths: dict[str, Path] = {}
    stored: dict[str, list[r.Record]] = {}
    for name in fixture_names():
        paths[name] = root / name
        stored[name] = write_ledger(paths[name], name, fixture_records(name))
    records, blobs = session_records()
    paths[SESSION] = root / SESSION
    stored[SESSION] = write_ledger(paths[SESSION], SESSION, records, blobs=blobs)
    con = connect(list(paths.values()))
    return Fleet(paths=paths, records=stored, states={a: fold(rs) for a, rs in stored.items()}, con=con)


def rows(con: duckdb.DuckDBPyConnection, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return con.execute(sql, list(params)).fetchall()


def of_kind(records: list[r.Record], cls: type[Any]) -> list[r.Record]:
    return [rec for rec in records if isinstance(rec.body, cls)]


def test_every_table_exists_with_its_documented_columns(fleet: Fleet) -> None:
    for name, table in TABLES.items():
        columns = [row[0] for row in rows(fleet.con, f"DESCRIBE {name}")]
        assert columns == list(table.columns), name


def test_agents_name_each_ledger_and_its_head(fleet: Fleet) -> None:
    ledgers = rows(fleet.con, "SELECT agent_id, path, records, head_seq, head_hash FROM agents")
    got = {row[0]: row[1:] for row in ledgers}
    assert sorted(got) == sorted(fleet.paths)
    for agent, path in fleet.paths.items():
        with Ledger.open(path, readonly=True) as ledger:
            head_seq, head_hash = ledger.head()
        assert got[agent] == (str(path.resolve()), head_seq + 1, head_seq, head_hash)


def test_records_hold_every_record_with_its_body(fleet: Fleet) -> None:
    for agent, records in fleet.records.items():
        got = rows(fleet.con, "SELECT seq, ts, turn, kind, v, body FROM records WHERE agent_id = ?", agent)
        assert [g[:5] for g in got] == [(x.seq, x.ts, x.turn, x.kind, x.v) for x in records], agent
        # The body column is the record body's JSON (key order aside): decode it back.
        for (*_, body), rec in zip(got, records, strict=True):
            assert json.loads(body) == json.loads(msgspec.json.encode(rec.body)), (agent, rec.seq)
    counts = dict(rows(fleet.con, "SELECT kind, count(*) FROM records GROUP BY kind"))
    assert counts == dict(Counter(rec.kind for recs in fleet.records.values() for rec in recs))


def test_messages(fleet: Fleet) -> None:
    for agent, records in fleet.records.items():
        want = [
            (x.seq, x.turn, x.body.role, x.body.channel, x.body.text, len(x.body.text))
            for x in of_kind(records, r.Message)
        ]
        got = rows(
            fleet.con, "SELECT seq, turn, role, channel, text, chars FROM messages WHERE agent_id = ?", agent
        )
        assert got == want, agent
    assert rows(fleet.con, "SELECT count(*) FROM messages WHERE agent_id = ?", SESSION)[0][0] > 10


def _expected_calls(records: list[r.Record]) -> list[tuple[Any, ...]]:
    intents = {x.body.call_id: x for x in of_kind(records, r.ToolIntent)}
    results = {x.body.call_id: x for x in of_kind(records, r.ToolResult)}
    out = []
    for call_id in sorted(intents.keys() | results.keys(), key=lambda c: (intents.get(c) or results[c]).seq):
        i, x = intents.get(call_id), results.get(call_id)
        res: r.ToolResult | None = x.body if x else None
        duration = None
        if res is not None:
            duration = res.duration_ms if res.duration_ms is not None else (x.ts - i.ts if i and x else None)
        out.append(
            (
                call_id,
                (i or x).body.tool,
                i.seq if i else None,
                x.seq if x else None,
                res.status if res else "unknown",
                duration,
                (res.blob.size if res.blob else len(res.output.encode())) if res else None,
                res.blob.hash if res and res.blob else None,
                json.loads(msgspec.json.encode(i.body.args)) if i else None,
            )
        )
    return out


def test_tool_calls_join_each_intent_to_its_result(fleet: Fleet) -> None:
    for agent, records in fleet.records.items():
        got = rows(
            fleet.con,
            "SELECT call_id, tool, intent_seq, result_seq, status, duration_ms, output_bytes, blob_hash, "
            "args "
            "FROM tool_calls WHERE agent_id = ?",
            agent,
        )
        got = [(*g[:-1], None if g[-1] is None else json.loads(g[-1])) for g in got]
        assert got == _expected_calls(records), agent
    # The session moves large outputs to blobs: those rows name the blob and its size.
    blob_rows = rows(fleet.con, "SELECT count(*) FROM tool_calls WHERE blob_hash IS NOT NULL")[0][0]
    assert blob_rows > 0


def test_tool_calls_agree_with_the_folded_tool_window(fleet: Fleet) -> None:
    for agent, state in fleet.states.items():
        for ex in state.runtime.tools:
            status = "unknown" if ex.result is None else ex.result.status
            got = rows(
                fleet.con,
                "SELECT tool, intent_seq, result_seq, status FROM tool_calls "
                "WHERE agent_id = ? AND call_id = ?",
                agent,
                ex.call_id,
            )
            assert got == [(ex.tool, ex.intent_seq, ex.result_seq, status)], (agent, ex.call_id)


def test_an_intent_without_result_is_an_unknown_outcome(tmp_path: Path) -> None:
    records = [
        r.Record(body=r.TurnStarted(trigger="user"), ts=1, turn=1),
        r.Record(
            body=r.ToolIntent(call_id="a", tool="deploy", args={"env": "prod"}, idempotency_key="k1"),
            ts=2,
            turn=1,
        ),
        r.Record(body=r.ToolIntent(call_id="b", tool="ls"), ts=3, turn=1),
        r.Record(body=r.ToolResult(call_id="b", tool="ls", status="error", output="no"), ts=9, turn=1),
        r.Record(body=r.ToolResult(call_id="orphan", tool="ls", status="ok", duration_ms=4), ts=10, turn=1),
        # The runtime's record of an intent a crash left open, written when it reopens:
        # its ts is when the crash was noticed, so it gives no duration.
        r.Record(body=r.ToolIntent(call_id="c", tool="migrate"), ts=11, turn=1),
        r.Record(
            body=r.ToolResult(call_id="c", tool="migrate", status="unknown", output="lost"), ts=90_000, turn=1
        ),
    ]
    write_ledger(tmp_path / "l", "solo", records)
    con = connect(tmp_path / "l")
    got = rows(
        con,
        "SELECT call_id, status, idempotency_key, intent_seq, result_seq, duration_ms, output_bytes "
        "FROM tool_calls",
    )
    assert got == [
        ("a", "unknown", "k1", 1, None, None, None),
        ("b", "error", None, 2, 3, 6, 2),
        ("orphan", "ok", None, None, 4, 4, 0),
        ("c", "unknown", None, 5, 6, None, 4),
    ]


def test_a_sub_agents_records_name_their_task(tmp_path: Path) -> None:
    # A continuation turn (no input of its own) in which the agent delegated to a sub-agent.
    records = [
        r.Record(body=r.TurnStarted(trigger="continuation"), ts=1, turn=0),
        r.Record(body=r.ToolIntent(call_id="t1", tool="Task", args={"prompt": "find it"}), ts=2, turn=0),
        r.Record(body=r.TaskStarted(id="t1", description="find it"), ts=2, turn=0),
        r.Record(body=r.Message(role="user", text="find it", task_id="t1"), ts=3, turn=0),
        r.Record(
            body=r.ToolIntent(call_id="s1", tool="Bash", args={"command": "ls"}, task_id="t1"), ts=4, turn=0
        ),
        r.Record(body=r.ToolResult(call_id="s1", tool="Bash", status="ok", task_id="t1"), ts=5, turn=0),
        r.Record(body=r.ToolResult(call_id="orphan", tool="Bash", status="ok", task_id="t1"), ts=5, turn=0),
        r.Record(
            body=r.WorkPlan(work_item_id=None, steps=(r.PlanStep(id="1", text="look"),), task_id="t1"),
            ts=6,
            turn=0,
        ),
        r.Record(body=r.ToolResult(call_id="t1", tool="Task", status="ok", output="here"), ts=7, turn=0),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=8, turn=0),
    ]
    write_ledger(tmp_path / "l", "solo", records)
    con = connect(tmp_path / "l")
    assert rows(con, "SELECT seq, task_id FROM messages") == [(3, "t1")]
    assert rows(con, "SELECT call_id, task_id FROM tool_calls") == [
        ("t1", None),
        ("s1", "t1"),
        ("orphan", "t1"),
    ]
    assert rows(con, "SELECT seq, work_item_id, task_id FROM plans") == [(7, None, "t1")]
    # The sub-agent's prompt is not the input of the turn it ran in.
    assert rows(con, "SELECT input, input_seq FROM turns") == [(None, None)]


def test_turns_match_their_start_and_end_records_and_the_fold(fleet: Fleet) -> None:
    for agent, records in fleet.records.items():
        ends = {x.turn: x for x in of_kind(records, r.TurnEnded)}
        want = []
        for start in of_kind(records, r.TurnStarted):
            end = ends.get(start.turn)
            want.append(
                (
                    start.turn,
                    start.body.trigger,
                    start.seq,
                    end.seq if end else None,
                    end.body.outcome if end else None,
                    end.ts - start.ts if end else None,
                    sum(1 for x in records if x.turn == start.turn),
                    sum(1 for x in records if x.turn == start.turn and isinstance(x.body, r.ToolIntent)),
                )
            )
        got = rows(
            fleet.con,
            "SELECT turn, trigger, started_seq, ended_seq, outcome, duration_ms, records, tool_calls "
            "FROM turns WHERE agent_id = ?",
            agent,
        )
        assert got == want, agent
        last = fleet.states[agent].runtime.turn
        assert last is not None
        assert got[-1][0] == last.index and got[-1][4] == last.outcome


def test_prompts_sections_and_omissions(fleet: Fleet) -> None:
    for agent, records in fleet.records.items():
        prompts = of_kind(records, r.PromptRendered)
        got = rows(
            fleet.con,
            "SELECT seq, revision, epoch, cache_key, total_tokens, omitted_count, omitted_tokens, episodes "
            "FROM prompts WHERE agent_id = ?",
            agent,
        )
        want = [
            (
                x.seq,
                x.body.working_memory_revision,
                x.body.compression_epoch,
                x.body.cache_key,
                x.body.total_tokens,
                len(x.body.omitted),
                sum(o.tokens for o in x.body.omitted),
                list(x.body.episodes),
            )
            for x in prompts
        ]
        assert got == want, agent
        sections = rows(
            fleet.con,
            "SELECT seq, position, section, tokens, form FROM prompt_sections WHERE agent_id = ?",
            agent,
        )
        assert sections == [
            (x.seq, i, s.section, s.tokens, s.form) for x in prompts for i, s in enumerate(x.body.sections, 1)
        ]
        omissions = rows(
            fleet.con, "SELECT seq, section, ref, reason, tokens FROM omissions WHERE agent_id = ?", agent
        )
        assert sorted(omissions) == sorted(
            (x.seq, o.section, o.ref, o.reason, o.tokens) for x in prompts for o in x.body.omitted
        )
        last = fleet.states[agent].runtime.last_prompt
        if last is not None:
            assert got[-1][0] == last.seq and got[-1][3] == last.prompt.cache_key
    # The rendered session really exercises sections and evictions.
    assert rows(fleet.con, "SELECT count(*) FROM prompt_sections WHERE agent_id = ?", SESSION)[0][0] > 100
    assert rows(fleet.con, "SELECT count(*) FROM omissions WHERE agent_id = ?", SESSION)[0][0] > 0


def test_deltas_end_at_the_folded_revision(fleet: Fleet) -> None:
    for agent, records in fleet.records.items():
        deltas = of_kind(records, r.WorkingMemoryDelta)
        got = rows(
            fleet.con,
            "SELECT seq, from_revision, to_revision, reason, changed_fields, evidence_from_seq, "
            "evidence_to_seq "
            "FROM deltas WHERE agent_id = ?",
            agent,
        )
        assert got == [
            (
                x.seq,
                x.body.from_revision,
                x.body.to_revision,
                x.body.reason,
                list(x.body.changed_fields),
                x.body.evidence_from_seq,
                x.body.evidence_to_seq,
            )
            for x in deltas
        ], agent
        assert (got[-1][2] if got else 0) == fleet.states[agent].memory.revision
    assert rows(fleet.con, "SELECT count(*) FROM deltas")[0][0] > 0


def test_episodes_equal_the_folded_archive(fleet: Fleet) -> None:
    for agent, state in fleet.states.items():
        got = rows(
            fleet.con,
            "SELECT episode_id, boundary_reason, work_item_id, first_turn, last_turn, turns, from_seq, "
            "to_seq, "
            "records, objective, touched_files, commands FROM episodes WHERE agent_id = ?",
            agent,
        )
        assert got == [
            (
                e.episode_id,
                e.boundary_reason,
                e.work_item_id,
                e.first_turn,
                e.last_turn,
                e.last_turn - e.first_turn + 1,
                e.from_seq,
                e.to_seq,
                e.to_seq - e.from_seq + 1,
                e.objective,
                list(e.touched_files),
                list(e.commands),
            )
            for e in state.memory.archive
        ], agent
        assert len(got) == state.memory.compression_epoch
    reasons = {row[0] for row in rows(fleet.con, "SELECT DISTINCT boundary_reason FROM episodes")}
    assert reasons == {
        "active_work_switched",
        "wait_boundary",
        "task_rejoined",
        "result_checkpoint",
        "turn_cap",
    }


def test_latest_plan_per_work_item_equals_the_folded_plan(fleet: Fleet) -> None:
    for agent, state in fleet.states.items():
        latest = rows(
            fleet.con,
            "SELECT work_item_id, seq, steps, step_count, done FROM plans WHERE agent_id = ? "
            "QUALIFY row_number() OVER (PARTITION BY work_item_id ORDER BY seq DESC) = 1",
            agent,
        )
        by_item = {row[0]: row[1:] for row in latest}
        for item, entry in state.runtime.plans.items():
            seq, steps, count, done = by_item[item]
            assert seq == entry.seq
            assert steps == [{"id": s.id, "text": s.text, "status": s.status} for s in entry.steps]
            assert count == len(entry.steps)
            assert done == sum(1 for s in entry.steps if s.status == "done")


def _dump(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[Any, ...]]]:
    return {name: rows(con, f"SELECT * FROM {name} ORDER BY ALL") for name in TABLES if name != "agents"}


def test_parallel_chunked_load_equals_a_serial_load(tmp_path: Path) -> None:
    records, blobs = session_records(40)
    path = tmp_path / "small-segments"
    write_ledger(path, SESSION, records, blobs=blobs, segment_bytes=4096)
    assert len(list((path / "segments").iterdir())) > 10
    serial = connect(path, workers=1)
    parallel = connect(path, workers=2, chunk_records=100)
    assert _dump(parallel) == _dump(serial)
    assert rows(parallel, "SELECT count(*) FROM records")[0][0] == len(records)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_load_reports_progress_per_chunk_and_table(tmp_path: Path, workers: int) -> None:
    records, blobs = session_records(40)
    path = tmp_path / "small-segments"
    write_ledger(path, SESSION, records, blobs=blobs, segment_bytes=4096)
    calls: list[tuple[int, int]] = []
    con = connect(path, workers=workers, chunk_records=100, progress=lambda *call: calls.append(call))
    assert rows(con, "SELECT count(*) FROM records")[0][0] == len(records)
    total = calls[0][1]
    assert total > len(TABLES) + 1  # several chunks, then every table
    assert calls == [(done, total) for done in range(1, total + 1)]


def _tree_digest(path: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(path)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def test_audit_reads_without_writing_even_beside_a_live_writer(tmp_path: Path) -> None:
    path = tmp_path / "live"
    write_ledger(path, "live", fixture_records("boundary_wait_boundary"))
    with Ledger.open(path, fsync="never") as writer:  # holds the writer lock
        writer.append(r.Record(body=r.Message(role="user", text="still here"), ts=99))
        writer.flush()
        before = _tree_digest(path)
        con = connect(path)
        assert rows(con, "SELECT count(*) FROM records")[0][0] == writer.head()[0] + 1
        assert _tree_digest(path) == before


def test_an_empty_ledger_gives_empty_tables(tmp_path: Path) -> None:
    Ledger.create(tmp_path / "empty", agent_id="nobody").close()
    con = connect(tmp_path / "empty")
    assert rows(con, "SELECT agent_id, records, head_seq FROM agents") == [("nobody", 0, -1)]
    for name in TABLES:
        if name != "agents":
            assert rows(con, f"SELECT count(*) FROM {name}") == [(0,)], name


def test_two_ledgers_of_one_agent_are_refused(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_ledger(tmp_path / name, "same-agent", fixture_records("boundary_turn_cap"))
    with pytest.raises(AuditError, match="both belong to agent 'same-agent'"):
        connect([tmp_path / "a", tmp_path / "b"])


def test_a_directory_that_is_not_a_ledger_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotALedger):
        connect(tmp_path)


@pytest.mark.parametrize("workers", [1, 2])
def test_damage_in_a_middle_segment_is_named_not_skipped(tmp_path: Path, workers: int) -> None:
    records, blobs = session_records(30)
    path = tmp_path / "damaged"
    write_ledger(path, SESSION, records, blobs=blobs, segment_bytes=4096)
    plain = sorted((path / "segments").glob("*.seg"))
    sealed = sorted((path / "segments").glob("*.seg.zst"))
    victim = sealed[len(sealed) // 2] if sealed else plain[len(plain) // 2]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(LedgerCorrupt, match=victim.name.split(".")[0]):
        connect(path, workers=workers, chunk_records=50)


@pytest.mark.parametrize("reworded", [False, True])
def test_a_value_beyond_64_bits_is_named_by_its_record_whatever_duckdb_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reworded: bool
) -> None:
    # The record was found only where DuckDB's message named the file and line it failed on.
    if reworded:
        statement = load.run_statement

        def in_other_words(con: duckdb.DuckDBPyConnection, sql: str) -> None:
            try:
                statement(con, sql)
            except duckdb.Error as exc:
                raise type(exc)("the load stopped") from None

        monkeypatch.setattr(load, "run_statement", in_other_words)
    fine, bad = tmp_path / "fine", tmp_path / "bad"
    write_ledger(fine, "agent-fine", [r.Record(body=r.Message(role="user", text="1" * 40), ts=1)])
    write_ledger(
        bad,
        "agent-bad",
        [
            r.Record(body=r.Message(role="user", text="12345678901234567890"), ts=1),
            # DuckDB holds this one (the arguments are JSON): it is not named.
            r.Record(body=r.ToolIntent(call_id="c", tool="t", args={"n": 2**64 - 1}), ts=2),
            r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", exit_code=2**63), ts=3),
        ],
    )
    with pytest.raises(AuditError) as caught:
        connect([fine, bad])
    assert str(caught.value) == (
        f"cannot audit {bad.resolve()}: the tool_result record at seq 2 holds {2**63} in body.exit_code, "
        f"beyond the 64-bit integers of the audit tables (-2**63 .. 2**63 - 1). See the record with "
        f"`holon get {bad.resolve()} ledger:2`"
    )


def test_a_load_duckdb_refuses_for_another_reason_says_what_duckdb_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(con: duckdb.DuckDBPyConnection, sql: str) -> None:
        raise duckdb.ConversionException('Could not convert in file "x.jsonl", in line 1: no')

    monkeypatch.setattr(load, "run_statement", refused)
    path = tmp_path / "fine"
    write_ledger(path, "agent-fine", [r.Record(body=r.Message(role="user", text="fine"), ts=1)])
    with pytest.raises(AuditError) as caught:
        connect(path)
    assert str(caught.value) == (
        f'cannot load {path.resolve()} into DuckDB: Could not convert in file "x.jsonl", in line 1: no'
    )


@pytest.mark.parametrize("style", STYLES)
def test_a_record_holding_text_that_is_not_utf8_is_named_by_seq_whatever_msgspec_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    # msgspec before 0.23 raised UnicodeDecodeError for it, which escaped the audit load.
    monkeypatch.setattr(extract, "_ENVELOPES", styled(extract._ENVELOPES, style))
    for kind, decoder in list(extract._ROWS.items()):
        monkeypatch.setitem(extract._ROWS, kind, styled(decoder, style))
    path = tmp_path / "bad"
    stored = write_ledger(path, "bad", fixture_records("boundary_turn_cap"))
    with Ledger.open(path, readonly=True) as ledger:
        _, head = ledger.head()
    seq = len(stored)
    record = {"seq": seq, "ts": 1, "turn": None, "kind": "message", "v": 1}
    payload = msgspec.msgpack.encode(record | {"body": {"role": "user", "text": "caf\u00e9"}})
    frame, _ = encode_frame(bytes.fromhex(head), payload.replace("é".encode(), b"\xe9!"))
    segment = sorted((path / "segments").glob("*.seg"))[-1]
    with segment.open("ab") as out:
        out.write(frame)
    with pytest.raises(InvalidRecord, match=rf"seq {seq}: the msgpack payload holds text that is not UTF-8"):
        connect(path, workers=1)


@pytest.mark.parametrize(
    ("body", "kind", "field"),
    [
        ({"call_id": "x", "tool": "t", "status": "maybe"}, "tool_result", "body.status"),
        ({"text": "hi"}, "no_such_kind", "kind"),
    ],
)
def test_a_record_that_does_not_decode_is_named_by_seq(
    tmp_path: Path, body: dict[str, Any], kind: str, field: str
) -> None:
    path = tmp_path / "bad"
    stored = write_ledger(path, "bad", fixture_records("boundary_turn_cap"))
    with Ledger.open(path, readonly=True) as ledger:
        _, head = ledger.head()
    # A frame no holon writer would produce, chained correctly after the head.
    seq = len(stored)
    payload = msgspec.msgpack.encode({"seq": seq, "ts": 1, "turn": None, "kind": kind, "v": 1, "body": body})
    frame, _ = encode_frame(bytes.fromhex(head), payload)
    segment = sorted((path / "segments").glob("*.seg"))[-1]
    with segment.open("ab") as out:
        out.write(frame)
    with Ledger.open(path, readonly=True) as ledger, pytest.raises(InvalidRecord) as by_read:
        list(ledger.read())
    with pytest.raises(InvalidRecord) as by_audit:
        connect(path)
    assert f"seq {seq}" in str(by_audit.value) and by_audit.value.field == field
    assert by_read.value.field == by_audit.value.field


# --------------------------------------------------------------------- generated ledgers, values out of range


def _storable(record: r.Record) -> r.Record:
    """A generated record the ledger accepts: generated blob refs name no stored blob."""
    body = record.body
    if isinstance(body, r.ToolResult | r.TaskResult) and body.blob is not None:
        body = msgspec.structs.replace(body, blob=None)
    return r.Record(body=body, ts=record.ts, turn=record.turn)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(ledger_records(max_size=25))
def test_tables_agree_with_generated_ledgers(generated: list[r.Record]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger"
        # A tiny blob threshold: most outputs are moved to the blob store.
        with Ledger.create(path, agent_id="gen", fsync="never", blob_threshold=8) as ledger:
            ledger.append_many(_storable(rec) for rec in generated)
            stored = list(ledger.read())
        con = connect(path)
        try:
            kinds = dict(run_sql(con, "SELECT kind, count(*) FROM records GROUP BY kind").rows)
            assert kinds == dict(Counter(rec.kind for rec in stored))
            for seq, ts, turn, kind, body in run_sql(
                con, "SELECT seq, ts, turn, kind, body FROM records"
            ).rows:
                rec = stored[seq]
                assert (ts, turn, kind) == (rec.ts, rec.turn, rec.kind)
                assert json.loads(body) == json.loads(msgspec.json.encode(rec.body))
            assert run_sql(con, "SELECT seq, role, channel, name, text, chars FROM messages").rows == [
                (m.seq, m.body.role, m.body.channel, m.body.name, m.body.text, len(m.body.text))
                for m in stored
                if isinstance(m.body, r.Message)
            ]
            calls = run_sql(con, "SELECT intent_seq, result_seq, status, output_bytes, args FROM tool_calls")
            intents = sorted(row[0] for row in calls.rows if row[0] is not None)
            results = sorted(row[1] for row in calls.rows if row[1] is not None)
            assert intents == [rec.seq for rec in stored if isinstance(rec.body, r.ToolIntent)]
            assert results == [rec.seq for rec in stored if isinstance(rec.body, r.ToolResult)]
            for intent_seq, result_seq, status, output_bytes, args in calls.rows:
                if result_seq is not None:
                    original = generated[result_seq].body  # before the ledger moved it to a blob
                    assert isinstance(original, r.ToolResult)
                    assert (status, output_bytes) == (original.status, len(original.output.encode()))
                if intent_seq is not None:
                    intent = stored[intent_seq].body
                    assert isinstance(intent, r.ToolIntent) and json.loads(args) == intent.args
            prompts = [rec for rec in stored if isinstance(rec.body, r.PromptRendered)]
            assert run_sql(con, "SELECT seq, position, section, tokens, form FROM prompt_sections").rows == [
                (p.seq, i, s.section, s.tokens, s.form)
                for p in prompts
                if isinstance(p.body, r.PromptRendered)
                for i, s in enumerate(p.body.sections, 1)
            ]
            assert run_sql(con, "SELECT seq, section, ref, reason, tokens FROM omissions").rows == [
                (p.seq, o.section, o.ref, o.reason, o.tokens)
                for p in prompts
                if isinstance(p.body, r.PromptRendered)
                for o in p.body.omitted
            ]
            for name in REPORTS:
                run_report(con, name)
        finally:
            con.close()


def test_a_value_the_tables_cannot_hold_is_an_audit_error_naming_ledger_and_seq(tmp_path: Path) -> None:
    # The ledger holds any integer msgpack holds (up to 2**64 - 1); the audit columns are
    # BIGINT. The load failed with a raw DuckDB exception naming a deleted temporary file.
    path = tmp_path / "ledger"
    records = [
        r.Record(body=r.Message(role="user", text="hi"), ts=1),
        r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", exit_code=2**63), ts=2),
    ]
    write_ledger(path, "a", records)
    with pytest.raises(AuditError) as caught:
        connect(path)
    message = str(caught.value)
    assert str(path.resolve()) in message and "seq 1" in message and "tool_result" in message
    result = CliRunner().invoke(main, ["audit", str(path)])
    assert result.exit_code == 2 and "internal error" not in result.stderr


# --------------------------------------------------------------------------- integers beyond 64 bits


@pytest.mark.parametrize(
    ("record", "field", "value"),
    [
        (
            r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", exit_code=2**64 - 1), ts=2),
            "body.exit_code",
            2**64 - 1,
        ),
        (r.Record(body=r.Message(role="user", text="hi"), ts=2**63), "ts", 2**63),
        (
            r.Record(
                body=r.PromptRendered(
                    working_memory_revision=0,
                    compression_epoch=0,
                    cache_key="k",
                    prompt_hash="h",
                    total_tokens=1,
                    budget=1,
                    estimator="e",
                    omitted=(r.Omission(section="history", ref="ledger:0", reason="r", tokens=2**63),),
                ),
                ts=2,
            ),
            "body.omitted[0].tokens",
            2**63,
        ),
    ],
)
def test_an_integer_beyond_64_bits_is_an_error_naming_seq_and_field(
    tmp_path: Path, record: r.Record, field: str, value: int
) -> None:
    # The ledger holds integers up to 2**64 - 1; the audit's integer columns are BIGINT.
    # The error named the seq but not which of the record's fields held the value.
    path = tmp_path / "ledger"
    with without_ts_check():  # a ts beyond 64 bits is refused on append now; older ledgers hold them
        write_ledger(path, "a", [r.Record(body=r.Message(role="user", text="hi"), ts=1), record])
    with pytest.raises(AuditError) as caught:
        connect(path)
    message = str(caught.value)
    assert "seq 1" in message and f"{value} in {field}," in message and str(path.resolve()) in message


# --------------------------------------------------------------------------- timestamps 2**64 ms apart
# Ledgers written before the ledger checked ``ts`` hold timestamps 2**64 - 1 ms apart; an
# empty ledger audits to empty tables and reports.

_LOW, _HIGH = -(2**63), 2**63 - 1


def _call(call_id: str, intent_ts: int, result_ts: int, turn: int) -> list[r.Record]:
    return [
        r.Record(body=r.ToolIntent(call_id=call_id, tool="bash", args={"x": 1}), ts=intent_ts, turn=turn),
        r.Record(body=r.ToolResult(call_id=call_id, tool="bash", status="ok"), ts=result_ts, turn=turn),
    ]


def _legacy_ledger(path: Path) -> None:
    """Turns and calls whose ts are 2**64 - 1 ms apart, beside ordinary ones."""
    records = [
        r.Record(body=r.TurnStarted(trigger="user"), ts=_LOW, turn=0),
        *_call("far", _LOW, _HIGH, 0),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=_HIGH, turn=0),
        r.Record(body=r.TurnStarted(trigger="user"), ts=1_000, turn=1),
        *_call("near", 1_000, 1_250, 1),
        *_call("negative", -500, -200, 1),  # before 1970, but the difference fits
        r.Record(body=r.TurnEnded(outcome="completed"), ts=1_300, turn=1),
    ]
    with without_ts_check():
        write_ledger(path, "legacy", records)


def test_durations_of_timestamps_2_63_apart_are_null_not_an_overflow(tmp_path: Path) -> None:
    # `holon audit` failed for the whole ledger: "Overflow in subtraction of INT64", an
    # AuditError naming no record.
    _legacy_ledger(tmp_path / "l")
    con = connect(tmp_path / "l")
    calls = run_sql(con, "SELECT call_id, duration_ms FROM tool_calls ORDER BY intent_seq").rows
    assert calls == [("far", None), ("near", 250), ("negative", 300)]
    turns = run_sql(con, "SELECT turn, started_ts, ended_ts, duration_ms FROM turns").rows
    assert turns == [(0, _LOW, _HIGH, None), (1, 1_000, 1_300, 300)]
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE tool_calls)").fetchall())
    assert types["duration_ms"] == "BIGINT"  # the schema did not widen
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE turns)").fetchall())
    assert types["duration_ms"] == "BIGINT"
    for name in REPORTS:  # every report runs over them too
        run_report(con, name)


def test_the_cli_audits_a_legacy_ledger_and_verify_warns_about_its_ts(tmp_path: Path) -> None:
    _legacy_ledger(tmp_path / "l")
    runner = CliRunner()
    audited = runner.invoke(main, ["audit", str(tmp_path / "l"), "--report", "tools", "--json"])
    assert audited.exit_code == 0, audited.output
    verified = runner.invoke(main, ["verify", str(tmp_path / "l")])
    assert verified.exit_code == 0, verified.output
    assert "holon: warning: 6 record(s) hold a ts outside 0..99999999999999" in verified.stderr
    assert "seq 0 (ts -9223372036854775808)" in verified.stderr


def test_duplicates_compares_turn_numbers_2_63_apart_without_overflow(tmp_path: Path) -> None:
    # Two calls with the same arguments at turns -2**63 and 2**63 - 1: `turn - previous_turn`
    # overflowed in the duplicates report.
    records = [*_call("a", 1, 2, _LOW), *_call("b", 3, 4, _HIGH)]
    write_ledger(tmp_path / "l", "a", records)
    con = connect(tmp_path / "l")
    rows = run_report(con, "duplicates", window=5).rows
    assert rows == []


def test_an_empty_ledger_audits_to_empty_tables_and_reports(tmp_path: Path) -> None:
    write_ledger(tmp_path / "l", "empty", [])
    con = connect(tmp_path / "l")
    assert run_sql(con, "SELECT agent_id, records, head_seq FROM agents").rows == [("empty", 0, -1)]
    for name in TABLES:
        if name != "agents":
            assert run_sql(con, f"SELECT count(*) FROM {name}").rows == [(0,)], name
    for name in REPORTS:
        assert run_report(con, name).rows == [], name
    listed = CliRunner().invoke(main, ["audit", str(tmp_path / "l"), "--json"])
    assert listed.exit_code == 0, listed.output
    assert {row["table"]: row["rows"] for row in json.loads(listed.stdout)}["records"] == 0


# ------------------------------------------------------------------------ the projection config records state

CAPPED = ProjectionConfig(turn_cap=3, decisions_cap=2, messages_window=8)


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two agents written by holon.Agent, one under the default config, one under CAPPED."""
    root = tmp_path_factory.mktemp("configs")
    paths = {"plain": root / "plain", "capped": root / "capped"}
    prompted_turns(paths["plain"], DEFAULT_CONFIG, range(13), agent_id="plain")
    prompted_turns(paths["capped"], CAPPED, range(7), agent_id="capped")
    return paths


def _config(value: dict[str, Any] | None) -> ProjectionConfig | None:
    return None if value is None else msgspec.convert(value, ProjectionConfig)


def _label(config: ProjectionConfig | None) -> str | None:
    return None if config is None else describe_projection(config)


def _stated(record: r.Record) -> ProjectionConfig | None:
    """The config a record states, as holon itself reads it."""
    if isinstance(record.body, r.PromptRendered):
        return projection_stated(record.body.render_config, where=f"seq {record.seq}")
    assert isinstance(record.body, r.WorkingMemoryDelta | r.ContextEpisodeRecord)
    return stated_config(record.body)


_TABLE_OF_KIND = {
    "working_memory_delta": "deltas",
    "context_episode": "episodes",
    "prompt_rendered": "prompts",
}


def _table_configs(
    con: duckdb.DuckDBPyConnection, agent: str
) -> dict[int, tuple[ProjectionConfig | None, str | None]]:
    got: dict[int, tuple[ProjectionConfig | None, str | None]] = {}
    for table in _TABLE_OF_KIND.values():
        rows = con.execute(
            f"SELECT seq, projection, projection_label FROM {table} WHERE agent_id = ?", [agent]
        ).fetchall()
        got.update({seq: (_config(projection), label) for seq, projection, label in rows})
    return got


def test_deltas_episodes_and_prompts_state_their_projection_config(agents: dict[str, Path]) -> None:
    # The tables had no column for it: a fleet's ledgers under different turn caps and
    # windows could not be told apart, nor their prompt sizes compared per config.
    con = connect(list(agents.values()))
    for agent, path in agents.items():
        records = [rec for rec in read_ledger_records(path) if rec.kind in _TABLE_OF_KIND]
        assert {rec.kind for rec in records} == set(_TABLE_OF_KIND), agent  # every kind is checked
        expected = {rec.seq: (_stated(rec), _label(_stated(rec))) for rec in records}
        assert _table_configs(con, agent) == expected
    assert {rec for (rec,) in con.execute("SELECT DISTINCT projection_label FROM prompts").fetchall()} == {
        "ProjectionConfig()",
        "ProjectionConfig(turn_cap=3, decisions_cap=2, messages_window=8)",
    }
    # A struct DuckDB filters and groups on, field by field.
    capped = con.execute("SELECT DISTINCT agent_id FROM deltas WHERE projection.turn_cap = 3").fetchall()
    assert capped == [("capped",)]
    assert con.execute(
        "SELECT agent_id, projection, projection_label, projection_configs FROM agents"
    ).fetchall() == [
        ("capped", msgspec.to_builtins(CAPPED), describe_projection(CAPPED), 1),
        ("plain", msgspec.to_builtins(DEFAULT_CONFIG), "ProjectionConfig()", 1),
    ]


def _older(records: list[r.Record]) -> list[r.Record]:
    """``records`` as an older holon wrote them: derived records state no config, prompts no render_config."""
    out = []
    for rec in records:
        body = rec.body
        if isinstance(body, r.WorkingMemoryDelta | r.ContextEpisodeRecord):
            body = msgspec.structs.replace(body, projection_version=8, projection=None)
        elif isinstance(body, r.PromptRendered):
            body = msgspec.structs.replace(body, render_config={})
        out.append(r.Record(body=body, ts=rec.ts, turn=rec.turn))
    return out


def test_records_that_state_no_config_have_none(agents: dict[str, Path], tmp_path: Path) -> None:
    # An older holon's deltas and episodes (projection version 8) and a prompt of another
    # program state no config: NULL, not the default they may or may not have run under.
    write_ledger(tmp_path / "old", "old", _older(read_ledger_records(agents["capped"])))
    con = connect(tmp_path / "old")
    for table in _TABLE_OF_KIND.values():
        counts = con.execute(f"SELECT count(*), count(projection), count(projection_label) FROM {table}")
        rows, configs, labels = counts.fetchone() or (0, 0, 0)
        assert rows > 0 and configs == labels == 0, table
    assert con.execute("SELECT projection, projection_label, projection_configs FROM agents").fetchall() == [
        (None, None, 0)
    ]


def _prompt(render_config: dict[str, Any]) -> r.Record:
    body = r.PromptRendered(
        working_memory_revision=0,
        compression_epoch=0,
        cache_key="k",
        prompt_hash="h",
        total_tokens=10,
        budget=100,
        estimator="chars/4",
        render_config=render_config,
    )
    return r.Record(body=body, ts=1, turn=None)


@pytest.mark.parametrize(
    ("render_config", "expected"),
    [
        ({}, None),  # another program's prompt
        ({"version": 6}, None),  # rendered before the renderer recorded every non-default config
        ({"version": 7}, DEFAULT_CONFIG),  # the default, by omission
        ({"version": "7"}, None),
        ({"version": 13, "projection": {"turn_cap": 5}}, ProjectionConfig(turn_cap=5)),  # the rest: defaults
        ({"version": 13, "projection": "turn_cap=5"}, None),  # not a config: holon refuses to read it
    ],
)
def test_a_prompt_states_its_config_as_holon_reads_it(
    tmp_path: Path, render_config: dict[str, Any], expected: ProjectionConfig | None
) -> None:
    write_ledger(tmp_path / "l", "a", [_prompt(render_config)])
    if isinstance(render_config.get("projection"), dict | None):  # holon reads the others as errors
        assert projection_stated(render_config, where="seq 0") == expected
    got = connect(tmp_path / "l").execute("SELECT projection, projection_label FROM prompts").fetchall()
    assert got == [(None if expected is None else msgspec.to_builtins(expected), _label(expected))]


def test_a_ledger_whose_records_state_two_configs_counts_both(
    agents: dict[str, Path], tmp_path: Path
) -> None:
    # Agent.open refuses such a ledger; the audit names it (projection_configs > 1) and
    # keeps the first config stated, as replay reads the config of a ledger.
    records = read_ledger_records(agents["capped"])
    write_ledger(tmp_path / "mixed", "mixed", [*records, _prompt({"version": 13})])
    con = connect(tmp_path / "mixed")
    assert con.execute("SELECT projection_label, projection_configs FROM agents").fetchall() == [
        (describe_projection(CAPPED), 2)
    ]


def test_the_projection_struct_round_trips_through_parquet(agents: dict[str, Path], tmp_path: Path) -> None:
    export_parquet([agents["capped"]], tmp_path / "out")
    con = connect(agents["capped"])
    for table in ("agents", *_TABLE_OF_KIND.values()):
        files = f"{tmp_path}/out/{table}/{'*' if table == 'agents' else '*/*'}/*.parquet"
        back = duckdb.sql(
            f"SELECT projection, projection_label FROM read_parquet('{files}', hive_partitioning = true) "
            "ORDER BY ALL"
        )
        assert back.types == con.sql(f"SELECT projection, projection_label FROM {table}").types
        assert (
            back.fetchall()
            == con.execute(f"SELECT projection, projection_label FROM {table} ORDER BY ALL").fetchall()
        )


def test_the_episodes_report_groups_by_projection_config(agents: dict[str, Path]) -> None:
    # An episode's length is bounded by its config's turn_cap: the report said how long
    # episodes ran without the cap that closed them.
    con = connect(list(agents.values()))
    got = {
        (row["agent_id"], row["projection_label"], row["boundary_reason"]): row["max_turns"]
        for row in run_report(con, "episodes").as_dicts()
    }
    assert got == {
        ("capped", describe_projection(CAPPED), "turn_cap"): CAPPED.turn_cap,
        ("plain", "ProjectionConfig()", "turn_cap"): DEFAULT_CONFIG.turn_cap,
    }
