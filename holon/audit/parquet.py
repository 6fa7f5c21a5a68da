"""Export the audit tables as Parquet partitioned by agent and UTC date, and read an export back.

The layout (partitions, typed times, JSON as text, ``_schema.json``) is
:mod:`holon.audit.layout`'s; this module writes it, adds to it as a ledger grows, and
opens it as DuckDB views under the tables' names.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import duckdb
import msgspec

from holon.audit.layout import (
    DATE_COLUMN,
    LAYOUT_VERSION,
    NULL_PARTITION,
    SCHEMA_FILE,
    ExportSchema,
    export_rows,
    partition_columns,
    schema_document,
)
from holon.audit.load import connect, ledger_paths
from holon.audit.models import add_models
from holon.audit.query import AuditError, run_statement
from holon.audit.tables import TABLES, LedgerPaths
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.ledger.files import check_outside
from holon.ledger.frames import chain_hash
from holon.ledger.header import check_outside_ledgers
from holon.records import encode_msgpack_record

__all__ = ["export_parquet", "open_export"]

#: ``_since.head_seq`` of an agent exported whole: below every row's newest seq (an empty
#: ledger's ``agents`` row has head_seq -1).
_WHOLE: int = -2


def export_parquet(
    paths: LedgerPaths,
    out_dir: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    incremental: bool = False,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    memory_limit: str | None = None,
) -> list[Path]:
    """Write every audit table of these ledgers as zstd Parquet; returns the files written.

    Layout (Hive partitioning, see docs/audit.md and the ``_schema.json`` written beside
    the tables): ``out_dir/<table>/agent_id=<id>/date=<YYYY-MM-DD>/data_0.parquet``, and
    ``out_dir/agents/agent_id=<id>/data_0.parquet``. The agent id is URL-encoded in the
    directory name; tell readers it is text (``hive_types={'agent_id': 'VARCHAR'}`` in
    DuckDB), or an agent "42" reads back as the integer 42. A table without rows for an
    agent is one empty file with the table's schema, in its ``date=__HIVE_DEFAULT_PARTITION__``
    partition, so a glob over any table finds files.

    Other agents' partitions already in ``out_dir`` are left alone, so agents can be
    exported one at a time into one tree. An agent that already has partitions there is
    an error unless ``overwrite`` (replace all of them) or ``incremental`` is set.
    ``incremental`` adds what the ledger appended since the export there: the state it
    holds (``agents.head_seq`` and ``head_hash``) must be a prefix of the ledger (checked
    by the hash chain), and only the partitions holding a row that a newer record made or
    changed are written; an agent not yet there is exported whole. A ledger that no longer
    extends what was exported (cut, repaired, another ledger of the same agent id) is an
    error naming it: re-export it with ``overwrite``.

    ``progress(done, total)`` is called through the load (as by :func:`connect`) and
    after each table is written. ``memory_limit`` caps DuckDB's memory as for
    :func:`connect` (the load spills past it), for ledgers larger than memory.
    """
    if overwrite and incremental:
        raise UsageError(
            "overwrite and incremental exclude each other: overwrite replaces what incremental adds to"
        )
    out = Path(out_dir)
    roots = _checked_roots(paths, out)
    loaded = 0

    def loading(done: int, total: int) -> None:
        nonlocal loaded
        loaded = total
        assert progress is not None
        progress(done, total + len(TABLES))

    con = connect(
        roots,
        workers=workers,
        progress=loading if progress is not None else None,
        memory_limit=memory_limit,
    )
    try:
        out.mkdir(exist_ok=True)
        since = _since(con, out) if incremental else {}
        run_statement(con, "CREATE TEMP TABLE _since (agent_id VARCHAR, head_seq BIGINT)")
        agents = [str(row[0]) for row in con.execute("SELECT agent_id FROM agents ORDER BY 1").fetchall()]
        con.executemany("INSERT INTO _since VALUES (?, ?)", [(a, since.get(a, _WHOLE)) for a in agents])

        def copied(tables: int) -> None:
            assert progress is not None
            progress(loaded + tables, loaded + len(TABLES))

        written = _staged_write(
            con,
            out,
            since,
            overwrite=overwrite,
            incremental=incremental,
            progress=copied if progress is not None else None,
        )
        _write_if_changed(out / SCHEMA_FILE, schema_document(con))
        return written
    finally:
        con.close()


def _checked_roots(paths: LedgerPaths, out: Path) -> list[Path]:
    """The ledgers' directories, once ``out`` is a directory an export of them may write
    (or create)."""
    if out.exists() and not out.is_dir():
        raise AuditError(f"cannot export to {out}: it exists and is not a directory")
    if not out.parent.is_dir():
        # Created if missing, but not its parents: as a JSONL export, a typo in the path is
        # named rather than turned into a new directory tree.
        raise AuditError(f"cannot export to {out}: directory {out.parent} does not exist")
    roots = ledger_paths(paths)  # once: `paths` may be a one-shot iterable
    for ledger_dir in roots:
        check_outside(ledger_dir, out, what="Parquet directory")
    # Nor into a ledger it does not read: the tables would be new files in that ledger's tree.
    check_outside_ledgers(out, what="Parquet directory")
    _check_layout(out)
    return roots


def _staged_write(
    con: duckdb.DuckDBPyConnection,
    out: Path,
    since: dict[str, int],
    *,
    overwrite: bool,
    incremental: bool,
    progress: Callable[[int], None] | None,
) -> list[Path]:
    """:func:`_write` through a staging directory in ``out``, removed whatever happens."""
    # Written beside the target first, then moved in per partition (renames in one file
    # system, `agents` last): an export failing while it writes leaves the tree as it was,
    # and no name for an agent's partition has to be guessed.
    staging = Path(tempfile.mkdtemp(prefix=".holon-export-", dir=out))
    try:
        return _write(
            con, out, staging, since, overwrite=overwrite, incremental=incremental, progress=progress
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write(
    con: duckdb.DuckDBPyConnection,
    out: Path,
    staging: Path,
    since: dict[str, int],
    *,
    overwrite: bool,
    incremental: bool,
    progress: Callable[[int], None] | None,
) -> list[Path]:
    """Stage the partitions to write, check them against ``out``, move them in; the files written."""
    # One thread writes the files: with several, DuckDB's partitioned COPY writes rows in
    # whatever order the threads hand them over, so an agent's rows came out shuffled (not
    # by seq, as the tables are) and the bytes differed from run to run. The write is no
    # slower for it (the zstd encode is one thread anyway).
    run_statement(con, "SET threads = 1")
    for copied, name in enumerate(TABLES, 1):
        _stage_table(con, staging, name, whole=not since)
        if progress is not None:
            progress(copied)
    # Every agent written has its `agents` row staged (its head moved, or it is new), so
    # these directories name every agent this export changes, as DuckDB encoded them.
    changed = _agent_directories(con, staging)
    whole = [directory for agent, directory in changed.items() if agent not in since]
    if not overwrite:
        taken = [f"{name}/{part}" for name in TABLES for part in whole if (out / name / part).exists()]
        if taken:
            shown = ", ".join(taken[:3]) + (f" and {len(taken) - 3} more" if len(taken) > 3 else "")
            # Incremental: partitions of an agent whose `agents` row is gone (a tree edited by hand).
            add = (
                ""
                if incremental
                else (
                    ", or add what their ledgers appended since with `holon export --incremental` "
                    "(incremental=True)"
                )
            )
            orphaned = " but no agents row for them" if incremental else ""
            raise AuditError(
                f"{out} already holds these agents' tables ({shown}){orphaned}; choose another directory, "
                f"or replace them with `holon export --overwrite` (overwrite=True){add}"
            )
    stale = _placeholders(con, out, staging, changed, incremental=incremental)
    written: list[Path] = []
    # `agents` last: it holds the heads an incremental export starts from, so an export
    # stopped half-way is redone from the state before it, not skipped.
    for name in sorted(TABLES, key=lambda table: table == "agents"):
        for part in whole:
            target = out / name / part
            if target.exists():
                shutil.rmtree(target)
        for source in _leaves(staging / name):
            target = out / source.relative_to(staging)
            if target.exists():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            source.rename(target)
            written.extend(sorted(target.glob("*.parquet")))
    for directory in stale:
        shutil.rmtree(directory, ignore_errors=True)
    return sorted(written)


def _stage_table(con: duckdb.DuckDBPyConnection, staging: Path, name: str, *, whole: bool) -> None:
    """Write the partitions of table ``name`` holding a row newer than its agent's ``_since``.

    ``whole``: every agent is exported whole, so every row is written (no rows to pick).
    """
    partitions = partition_columns(name)
    rows = export_rows(con, name)
    if whole:
        select = f"SELECT * EXCLUDE (_newest_seq, _row) FROM ({rows}) ORDER BY _row"
    else:
        dated = DATE_COLUMN in partitions
        match = f" AND r.{DATE_COLUMN} IS NOT DISTINCT FROM n.{DATE_COLUMN}" if dated else ""
        key = f"r.agent_id{', r.' + DATE_COLUMN if dated else ''}"
        select = (
            f"WITH rows AS ({rows}), newer AS (SELECT DISTINCT {key} FROM rows r JOIN _since s "
            "USING (agent_id) WHERE r._newest_seq > s.head_seq) "
            "SELECT r.* EXCLUDE (_newest_seq, _row) FROM rows r SEMI JOIN newer n "
            f"ON r.agent_id = n.agent_id{match} ORDER BY r._row"
        )
    run_statement(
        con,
        f"COPY ({select}) TO '{_quote(str(staging / name))}' "
        f"(FORMAT parquet, COMPRESSION zstd, PARTITION_BY ({', '.join(partitions)}))",
    )


def _agent_directories(con: duckdb.DuckDBPyConnection, staging: Path) -> dict[str, str]:
    """Agent id -> its partition directory name (``agent_id=<encoded>``), for the staged agents."""
    if not any((staging / "agents").glob("*/*.parquet")):
        return {}
    # The directories name their agents as DuckDB encoded them: read back the same way.
    rows = con.execute(
        "SELECT agent_id, filename FROM read_parquet(?, hive_partitioning = true, "
        "hive_types = {'agent_id': 'VARCHAR'}, filename = true)",
        [os.path.join(glob.escape(str(staging)), "agents", "*", "*.parquet")],
    ).fetchall()
    return {str(agent): Path(str(file)).parent.name for agent, file in rows}


def _placeholders(
    con: duckdb.DuckDBPyConnection, out: Path, staging: Path, changed: dict[str, str], *, incremental: bool
) -> list[Path]:
    """Stage an empty file for each (table, changed agent) without rows; the placeholders now stale.

    A table without rows for an agent is one empty file in its NULL-date partition, so every
    table of every agent has a file with the schema. One the agent now has rows for (all of
    them dated) is stale: removed after the move.
    """
    stale: list[Path] = []
    for name in TABLES:
        if DATE_COLUMN not in partition_columns(name):
            continue  # agents: a row per agent, always
        rows = export_rows(con, name)
        # Rows without a date matter only to a placeholder already in the tree (incremental).
        undated = f"count(r.agent_id) FILTER (WHERE r.{DATE_COLUMN} IS NULL)" if incremental else "0"
        counts = con.execute(
            f"SELECT s.agent_id, count(r.agent_id), {undated} FROM _since s "
            f"LEFT JOIN {f'({rows})' if incremental else name} r USING (agent_id) GROUP BY s.agent_id"
        ).fetchall()
        empty: Path | None = None
        for agent, count, undated in counts:
            directory = changed.get(str(agent))
            if directory is None:
                continue  # nothing of this agent's changed
            partition = Path(name, directory, f"{DATE_COLUMN}={NULL_PARTITION}")
            if count == 0 and not (incremental and (out / partition).is_dir()):
                if empty is None:
                    # Written once per table: the same schema makes the same bytes for every agent.
                    empty = staging / f"{name}.empty.parquet"
                    run_statement(
                        con,
                        f"COPY (SELECT * EXCLUDE (agent_id, {DATE_COLUMN}, _newest_seq, _row) FROM ({rows}) "
                        f"WHERE false) TO '{_quote(str(empty))}' (FORMAT parquet, COMPRESSION zstd)",
                    )
                (staging / partition).mkdir(parents=True)
                shutil.copyfile(empty, staging / partition / "data_0.parquet")
            elif incremental and count > 0 and undated == 0 and (out / partition).is_dir():
                stale.append(out / partition)
    return stale


def _leaves(root: Path) -> Iterable[Path]:
    """The partition directories under ``root`` that hold files, in name order."""
    for directory, _dirs, files in sorted(os.walk(root)):
        if files:
            yield Path(directory)


def _check_layout(out: Path) -> None:
    """Refuse a tree of another layout: the partitions would not line up for any reader."""
    schema = out / SCHEMA_FILE
    if schema.is_file():
        try:
            layout = msgspec.json.decode(schema.read_bytes(), type=ExportSchema).layout
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise AuditError(
                f"cannot export to {out}: {schema} is not a holon export's schema ({exc}); "
                "choose another directory"
            ) from None
        if layout != LAYOUT_VERSION:
            raise AuditError(
                f"cannot export to {out}: it holds a Parquet export of layout {layout}, this holon writes "
                f"layout {LAYOUT_VERSION}; export into a new directory (or re-export every agent there)"
            )
        return
    old = sorted(name for name in TABLES if (out / name).is_dir())
    if old:
        raise AuditError(
            f"cannot export to {out}: it holds tables ({', '.join(old[:3])}) but no {SCHEMA_FILE}, an export "
            "by an earlier holon (partitioned by agent only); export into a new directory"
        )


def _since(con: duckdb.DuckDBPyConnection, out: Path) -> dict[str, int]:
    """For each loaded agent already exported in ``out``: the head seq exported, checked to be a prefix."""
    files = sorted((out / "agents").glob("*/*.parquet"))
    if not files:
        return {}
    exported = {
        str(agent): (int(seq), str(hash_))
        for agent, seq, hash_ in con.execute(
            "SELECT agent_id, head_seq, head_hash FROM read_parquet(?, hive_partitioning = true, "
            "hive_types = {'agent_id': 'VARCHAR'})",
            [[str(f) for f in files]],
        ).fetchall()
    }
    since: dict[str, int] = {}
    for agent, path, head_seq, head_hash in con.execute(
        "SELECT agent_id, path, head_seq, head_hash FROM agents ORDER BY agent_id"
    ).fetchall():
        if agent not in exported:
            continue
        seq, hash_ = exported[agent]
        problem = _not_extended(str(path), seq, hash_, int(head_seq), str(head_hash))
        if problem is not None:
            raise AuditError(
                f"cannot add to the export of agent {agent!r} in {out}: it holds the ledger up to seq {seq} "
                f"(hash {hash_[:16]}…), and {path} {problem}: the ledger was cut or repaired since, or is "
                "another ledger of that agent id. Replace the agent's tables with `holon export --overwrite` "
                "(overwrite=True)"
            )
        since[str(agent)] = seq
    return since


def _not_extended(path: str, seq: int, hash_: str, head_seq: int, head_hash: str) -> str | None:
    """Why the ledger at ``path``, loaded up to ``head_seq``, is no extension of state ``seq``, ``hash_``.

    None when it is one.
    """
    if head_seq < seq:
        return f"ends at seq {head_seq}"
    # The chain from the exported hash through the newer records reaches the loaded head
    # only if the ledger's hash at `seq` is the exported one (blake3 collision resistance).
    digest = bytes.fromhex(hash_)
    with Ledger.open(path, readonly=True) as ledger:
        for record in ledger.read(seq + 1, head_seq + 1):
            digest = chain_hash(digest, encode_msgpack_record(record))
    return None if digest.hex() == head_hash else f"holds other records up to seq {seq}"


def _write_if_changed(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (atomically), unless it holds that already: a sync sees no change."""
    if path.is_file() and path.read_bytes() == data:
        return
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_bytes(data)
    os.replace(staged, path)


def open_export(out_dir: str | os.PathLike[str], *, load: bool = False) -> duckdb.DuckDBPyConnection:
    """A new DuckDB connection whose views, named as the audit tables, read the Parquet export in ``out_dir``.

    The views have the tables' columns (``JSON`` ones as JSON again) plus the export's
    TIMESTAMP and ``date`` columns, so :func:`holon.audit.run_report` and any query on the
    tables run over an export as over :func:`connect`'s tables.

    ``load=True`` copies every table into the connection's memory instead: the open reads
    every file once, and queries then run as fast as on :func:`connect`'s tables (a view
    lists and opens every file of its table in each query that reads it, a millisecond or
    so per file: a fleet of small ledgers is thousands of files).
    """
    out = Path(out_dir)
    schema_path = out / SCHEMA_FILE
    try:
        schema = msgspec.json.decode(schema_path.read_bytes(), type=ExportSchema)
    except FileNotFoundError:
        raise AuditError(f"{out} is no holon Parquet export: it has no {SCHEMA_FILE}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise AuditError(f"{schema_path} is not a holon export's schema: {exc}") from None
    if schema.layout != LAYOUT_VERSION:
        raise AuditError(
            f"{out} is an export of layout {schema.layout}; this holon reads layout {LAYOUT_VERSION}"
        )
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    root = glob.escape(str(out))
    for name, table in schema.tables.items():
        depth = "/".join("*" for _ in table.partitioned_by)
        types = ", ".join(f"'{c.name}': '{c.type}'" for c in table.columns if c.partition)
        as_json = [f'CAST("{c.name}" AS JSON) AS "{c.name}"' for c in table.columns if c.json]
        replace = f" REPLACE ({', '.join(as_json)})" if as_json else ""
        con.execute(
            f"CREATE {'TABLE' if load else 'VIEW'} {name} AS SELECT *{replace} FROM read_parquet("
            f"'{_quote(os.path.join(root, name, depth, '*.parquet'))}', hive_partitioning = true, "
            f"hive_types = {{{types}}})"
        )
    # Built from the tables as connect() builds them, not exported: a loaded export holds
    # them as tables, its views a view of each (computed in every query that reads it).
    add_models(con, materialize=load)
    return con


def _quote(text: str) -> str:
    return text.replace("'", "''")
