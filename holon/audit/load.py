"""Loading ledgers into one DuckDB connection, one ``agent_id`` per ledger: :func:`connect`.

:func:`connect` reads each ledger (read-only, verified, see :mod:`holon.audit.extract`)
into newline-delimited JSON in a temporary directory, then builds every table of
:data:`holon.audit.tables.TABLES` with one ``CREATE TABLE ... AS SELECT ... FROM
read_json(...)`` per table: DuckDB parses the files natively, in parallel, into typed
columns. No row passes through Python twice and nothing is inserted row by row. Then it
builds the models (:mod:`holon.audit.models`) from the tables. The temporary files are
gone when :func:`connect` returns; the tables live in the connection: in memory, or in a
DuckDB file the caller names (``database=``), with DuckDB's memory capped
(``memory_limit=``) so a ledger of any size loads in bounded memory.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Final

import duckdb
import msgspec

from holon.audit.extract import (
    CHUNK_RECORDS,
    Chunk,
    ChunkResult,
    LedgerInfo,
    extract_chunk,
    plan_chunks,
    read_info,
)
from holon.audit.models import add_models
from holon.audit.query import AuditError, run_statement
from holon.audit.tables import BODY_TYPES, ENVELOPE, JSON_BODY_FIELDS, TABLES, LedgerPaths, sql_string
from holon.errors import HolonError, UsageError
from holon.ledger.files import check_outside
from holon.ledger.header import check_outside_ledgers
from holon.simulate.run import SIMULATION_FILE, read_simulation

__all__ = [
    "MAX_CHUNK_RECORDS",
    "connect",
    "default_chunk_records",
    "default_workers",
    "ledger_paths",
    "memory_limit_problem",
    "plan_jobs",
]


def ledger_paths(paths: LedgerPaths) -> list[Path]:
    if isinstance(paths, str | os.PathLike):
        return [Path(paths)]
    out = [Path(p) for p in paths]
    if not out:
        raise UsageError("no ledger paths given; pass at least one ledger directory")
    return out


#: Columns of the rows written from a simulated ledger's comparison file (:func:`_extract_simulations`).
_SIMULATED_COLUMNS: Final = {
    "agent_ix": "INTEGER",
    "call": "BIGINT",
    "series": "VARCHAR",
    "source_seq": "BIGINT",
    "turn": "BIGINT",
    "prompt_seq": "BIGINT",
    "rendered": "BOOLEAN",
    "tokens": "BIGINT",
    "cached_prefix": "BIGINT",
    "written_prefix": "BIGINT",
    "cached_breakpoints": "BIGINT",
    "written_breakpoints": "BIGINT",
}
_SIMULATED_FILE: Final = "simulated_calls.ndjson"


def _extract_simulations(fleet: Sequence[LedgerInfo], tmp: Path) -> bool:
    """Write the calls of every ledger `holon simulate` wrote (its simulation.json) as rows; any?"""
    rows: list[bytes] = []
    for info in fleet:
        if not (Path(info.path) / SIMULATION_FILE).is_file():
            continue
        simulation = read_simulation(Path(info.path))
        for call in simulation.calls:
            for series, cost in (("holon", call.holon), ("tool", call.tool)):
                row = {
                    "agent_ix": info.agent_ix,
                    "call": call.call,
                    "series": series,
                    "source_seq": call.source_seq,
                    "turn": call.turn,
                    "prompt_seq": call.prompt_seq,
                    "rendered": call.rendered,
                    **msgspec.structs.asdict(cost),
                }
                rows.append(msgspec.json.encode(row))
    if rows:
        (tmp / _SIMULATED_FILE).write_bytes(b"\n".join(rows) + b"\n")
    return bool(rows)


def _simulated_source(tmp: Path, present: bool) -> str:
    if not present:
        columns = ", ".join(f"NULL::{type_} AS {name}" for name, type_ in _SIMULATED_COLUMNS.items())
        return f"(SELECT {columns} WHERE false)"
    columns = "{" + ", ".join(f"{name}: '{type_}'" for name, type_ in _SIMULATED_COLUMNS.items()) + "}"
    path = glob.escape(str(tmp / _SIMULATED_FILE))
    return f"read_json({sql_string(path)}, format='newline_delimited', columns={columns})"


def _read_json(files: str, body: str | None) -> str:
    """A read_json over JSON-lines record files, the body typed as ``body`` (JSON when None)."""
    columns = f"{{{ENVELOPE}, body: {sql_string(body or 'JSON')}}}"
    return f"read_json({sql_string(files)}, format='newline_delimited', columns={columns})"


def _empty(body: str) -> str:
    """An empty relation with the columns a read_json of that kind would have."""
    return (
        "(SELECT NULL::BIGINT AS seq, NULL::BIGINT AS ts, NULL::BIGINT AS turn, NULL::VARCHAR AS kind, "
        f"NULL::INTEGER AS v, NULL::{body} AS body, NULL::INTEGER AS agent_ix WHERE false)"
    )


def plan_jobs(chunks: Sequence[Chunk], chunk_records: int) -> list[list[Chunk]]:
    """Consecutive chunks grouped into jobs of at most ``chunk_records`` records (a bigger chunk alone).

    A job is one worker's task and writes one file per kind: a fleet of small ledgers
    (a chunk each) is read in a few jobs instead of a job and a dozen files per ledger.
    """
    jobs: list[list[Chunk]] = []
    size = 0
    for chunk in chunks:
        records = chunk.to_seq - chunk.from_seq
        if jobs and size + records <= chunk_records:
            jobs[-1].append(chunk)
            size += records
        else:
            jobs.append([chunk])
            size = records
    return jobs


def _job_dir(out_dir: str, index: int) -> str:
    return os.path.join(out_dir, f"{index:06d}")


def _extract_job(job: Sequence[Chunk], job_dir: str) -> list[ChunkResult]:
    """Extract a job's chunks into ``job_dir``, from scratch (a failed try's files are dropped)."""
    shutil.rmtree(job_dir, ignore_errors=True)
    return [extract_chunk(chunk, job_dir) for chunk in job]


def _extract_in_worker(job: Sequence[Chunk], job_dir: str) -> list[ChunkResult] | None:
    """_extract_job for a worker process; ``None`` when a chunk raised a holon error.

    Holon errors carry keyword-only fields (file, offset, where, ...) that do not survive
    pickling back to the parent, so the parent re-reads a failed job itself to raise
    the very same error.
    """
    try:
        return _extract_job(job, job_dir)
    except HolonError:
        return None


def _extract_all(
    jobs: list[list[Chunk]], out_dir: str, workers: int, done: Callable[[], None] | None = None
) -> list[ChunkResult]:
    """Run every job (see :func:`plan_jobs`), in worker processes when more than one worker is asked for.

    Job ``i`` writes into the directory ``out_dir/<i>``. ``done()`` is called after each
    job, in job order.
    """
    dirs = [_job_dir(out_dir, index) for index in range(len(jobs))]
    if workers <= 1 or len(jobs) <= 1:
        results: list[ChunkResult] = []
        for job, job_dir in zip(jobs, dirs, strict=True):
            results.extend(_extract_job(job, job_dir))
            if done is not None:
                done()
        return results
    # Fork on Linux: a worker starts in milliseconds and needs no importable __main__
    # (spawn re-runs a script that calls connect() without a main guard). Workers run only
    # the ledger and msgspec code of holon.audit.extract, never DuckDB, so DuckDB threads
    # in the parent do not matter to them. Elsewhere (macOS) fork is unsafe: spawn.
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=get_context(method))
    returned: list[list[ChunkResult] | None] = []
    try:
        for result in pool.map(_extract_in_worker, jobs, dirs):
            returned.append(result)
            if done is not None:
                done()
    except BaseException:
        # Ctrl-C (or a failed job): leaving the pool would wait for every job in flight
        # to be extracted, seconds each on a big ledger, and a SIGINT sent to this process
        # alone (`kill -INT`, a supervisor) never reaches the workers. What they write is
        # about to be deleted: end them. (Python 3.14's terminate_workers() does this.)
        for process in list((pool._processes or {}).values()):
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [
        result
        for job, job_dir, got in zip(jobs, dirs, returned, strict=True)
        for result in (_extract_job(job, job_dir) if got is None else got)
    ]


def default_workers(jobs: int) -> int:
    """Worker processes for a load of ``jobs`` jobs (see :func:`plan_jobs`): one per CPU, none for one job."""
    return 1 if jobs <= 1 else max(1, min(os.cpu_count() or 1, jobs))


#: Most records a chunk holds by default. A worker holds its whole chunk decoded (about
#: 1.3 KB per record, measured), so without a cap a 10M-record ledger on 2 CPUs made
#: 2.5M-record chunks and workers of ~3 GB each; at the cap a worker stays near 330 MB.
MAX_CHUNK_RECORDS: Final = 250_000

# A memory limit as DuckDB reads one: a number and a unit (1000- or 1024-based), or a
# percentage of the machine's memory. Stricter than DuckDB, which takes "-5GB" for no
# limit at all and reads "2GB x" as 2GB.
_MEMORY_SIZE: Final = re.compile(
    r"\s*(?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>[a-z]+|%)\s*", re.IGNORECASE
)
_MEMORY_UNITS: Final = frozenset(
    ["b", "byte", "bytes", "k", "kb", "kib", "m", "mb", "mib", "g", "gb", "gib", "t", "tb", "tib"]
    + [f"{prefix}byte{s}" for prefix in ("kilo", "mega", "giga", "tera") for s in ("", "s")]
)
_MEMORY_EXAMPLES: Final = (
    "give a positive number and a unit, e.g. 2GB, 500MB or 1.5GiB (KB, MB, GB, TB count in 1000s; "
    "KiB, MiB, GiB, TiB in 1024s), or a share of the machine's memory, e.g. 50%"
)


def memory_limit_problem(value: str) -> str | None:
    """What is wrong with ``value`` as a memory limit (``connect(memory_limit=)``), None if nothing.

    Checked before the load, so a typo is named at once, not after the ledgers are read.
    """
    match = _MEMORY_SIZE.fullmatch(value)
    if match is None:
        return f"{value!r} is not a memory size: {_MEMORY_EXAMPLES}"
    number, unit = float(match["number"]), match["unit"].lower()
    if unit != "%" and unit not in _MEMORY_UNITS:
        return f"{value!r} has no unit DuckDB knows ({match['unit']!r}): {_MEMORY_EXAMPLES}"
    if number <= 0:
        sign = "zero" if number == 0 else "negative"
        return f"{value!r} is {sign}, which is no memory limit: {_MEMORY_EXAMPLES}"
    if unit == "%" and number > 100:
        return f"{value!r} is more than all of the machine's memory: {_MEMORY_EXAMPLES}"
    return None


def default_chunk_records(records: int, workers: int | None) -> int:
    """Chunk size for a load: two chunks per worker, so a slow worker is evened out.

    Never below :data:`CHUNK_RECORDS`: smaller chunks cost more (an extra segment read
    per chunk bound) than they balance; never above :data:`MAX_CHUNK_RECORDS`, which
    bounds each worker's memory whatever the ledger's size.
    """
    cpus = workers if workers is not None else os.cpu_count() or 1
    return min(MAX_CHUNK_RECORDS, max(CHUNK_RECORDS, -(-records // (2 * max(cpus, 1)))))


def connect(
    paths: LedgerPaths,
    *,
    workers: int | None = None,
    chunk_records: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    database: str | os.PathLike[str] | None = None,
    memory_limit: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """Load one ledger or a fleet of ledgers into a new DuckDB connection (in memory by default).

    ``paths`` is a ledger directory or an iterable of them; each is opened read-only
    (audit never writes to a ledger) and loaded up to its head at the time of the call.
    Every table has an ``agent_id`` column; see :data:`TABLES` for the schema.
    Ledgers are read in chunks of whole segments of about ``chunk_records`` records
    (default: two chunks per worker, at least 50,000 records each); small ledgers' chunks
    are grouped into jobs of up to ``chunk_records`` records (:func:`plan_jobs`), read by
    ``workers`` processes (default: one per CPU when there is more than one job; 1 reads
    in this process). ``progress(done, total)`` is called after each job is read and each
    table is built (``total`` counts both).

    ``database`` is the path of a new DuckDB file to write the tables into (it must not
    exist): the tables are on disk, and the file can be reopened later with
    ``duckdb.connect(database)`` without loading the ledgers again. ``memory_limit``
    (DuckDB's syntax: ``"2GB"``, ``"500MB"``) caps the memory DuckDB holds; past it,
    DuckDB spills to a temporary directory (``<database>.tmp`` beside a database file,
    else a new directory in ``$TMPDIR``, removed when the connection closes). The tables
    are the same whichever is chosen.

    Raises NotALedger, LedgerCorrupt or InvalidRecord as ``Ledger.read`` would, and
    AuditError when two ledgers belong to the same agent, a record holds a value the
    tables cannot (an integer beyond 64 bits), ``database`` exists or ``memory_limit`` is
    not a size DuckDB understands; UsageError when ``database`` is inside a ledger directory.
    """
    roots = ledger_paths(paths)
    if memory_limit is not None:
        problem = memory_limit_problem(memory_limit)
        if problem is not None:
            raise AuditError(f"cannot set DuckDB's memory limit: {problem}")
    if database is not None and os.path.lexists(database):
        raise AuditError(
            f"cannot write the audit tables to {database}: it exists; choose a new file name "
            "(or delete it), or open it with duckdb.connect() to query the tables it holds"
        )
    if database is not None:
        # Audit never writes to a ledger: a database file (its .wal, its .tmp spill
        # directory) in the ledger directory would be new files in the ledger's tree.
        for root in roots:
            check_outside(root, Path(database), what="audit database")
        check_outside_ledgers(Path(database), what="audit database")
    fleet = [read_info(root, ix) for ix, root in enumerate(roots)]
    seen: dict[str, str] = {}
    for info in fleet:
        if info.agent_id in seen:
            raise AuditError(
                f"ledgers {seen[info.agent_id]} and {info.path} both belong to agent {info.agent_id!r}; "
                "their seqs would collide: audit them one at a time"
            )
        seen[info.agent_id] = info.path
    if chunk_records is None:
        chunk_records = default_chunk_records(sum(info.records for info in fleet), workers)
    if chunk_records < 1:
        raise UsageError(f"chunk_records {chunk_records} must be >= 1")
    jobs = plan_jobs([chunk for info in fleet for chunk in plan_chunks(info, chunk_records)], chunk_records)
    step = _Steps(len(jobs) + len(TABLES), progress) if progress is not None else None
    with tempfile.TemporaryDirectory(prefix="holon-audit-") as tmp:
        # Workers are forked before this process opens DuckDB (and its threads).
        _extract_all(jobs, tmp, default_workers(len(jobs)) if workers is None else workers, step)
        _extract_simulations(fleet, Path(tmp))
        con = _open_database(database, memory_limit)
        try:
            _build(con, fleet, Path(tmp), step)
        except duckdb.Error as exc:
            _discard(con, database)
            # Named while the extracted files still exist: the error names one of them.
            raise _load_error(exc, fleet, Path(tmp)) from None
        except BaseException:
            _discard(con, database)
            raise
    return con


def _discard(con: duckdb.DuckDBPyConnection, database: str | os.PathLike[str] | None) -> None:
    """Close a failed load's connection; a database file it created is removed, not left half-built."""
    con.close()
    if database is not None:
        for name in (os.fspath(database), os.fspath(database) + ".wal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)


def _open_database(
    database: str | os.PathLike[str] | None, memory_limit: str | None
) -> duckdb.DuckDBPyConnection:
    """A new DuckDB database (in memory, or the file ``database``) capped at ``memory_limit``."""
    try:
        con = duckdb.connect(":memory:" if database is None else os.fspath(database))
    except duckdb.Error as exc:
        raise AuditError(f"cannot create the DuckDB database {database}: {_first_line(exc)}") from None
    try:
        # DuckDB draws a progress bar for any statement that runs past 2 s (its default) on
        # the process's stdout, terminal or not: `holon audit --csv > out.csv` on a big
        # ledger wrote it into the CSV ahead of the header, and on a terminal over holon's
        # own progress line; a library caller's stdout got it too. holon reports progress
        # itself (connect's progress=), on stderr.
        con.execute("SET enable_progress_bar = false")
        if database is None:
            # DuckDB spills an in-memory database to `.tmp` in the working directory, which
            # may be anywhere (a ledger, a repository): use a directory of our own, which
            # DuckDB creates on the first spill and removes on close.
            spill = Path(tempfile.gettempdir()) / f"holon-audit-spill-{os.getpid()}-{uuid.uuid4().hex}"
            con.execute(f"SET temp_directory = {sql_string(str(spill))}")
        if memory_limit is not None:
            con.execute(f"SET memory_limit = {sql_string(memory_limit)}")
    except duckdb.Error as exc:
        con.close()
        raise AuditError(
            f"cannot set DuckDB's memory limit to {memory_limit!r}: {_first_line(exc)} "
            "(give a size such as 2GB or 500MB)"
        ) from None
    return con


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Where(msgspec.Struct):
    """Where an extracted JSON line comes from: its ledger and seq."""

    agent_ix: int
    seq: int


# An integer of 19 digits or more, once every digit is a "0": 2**63 has 19, so a shorter
# one fits a BIGINT. The only bytes that are "0" after the translation are digits.
_DIGITS_AS_ZERO: Final = bytes.maketrans(b"123456789", b"0" * 9)
_LONG_NUMBER: Final = b"0" * 19
_SCAN_BLOCK: Final = 8 << 20


def _load_error(exc: duckdb.Error, fleet: Sequence[LedgerInfo], tmp: Path) -> AuditError:
    """An AuditError for a table DuckDB could not build, naming the ledger and record when it can.

    The ledger accepts what msgpack holds, e.g. integers up to 2**64 - 1, while the audit
    columns are BIGINT: such a record reaches DuckDB, whose error names a temporary file
    that is deleted by the time anyone reads it. The record is found in the extracted files
    themselves (each line names its ledger, ``agent_ix``, and seq; the file's name is the
    kind), not in DuckDB's words, which differ between releases; they are shown as they are.
    """
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    where = ", ".join(info.path for info in fleet)
    if isinstance(exc, duckdb.OutOfMemoryException):
        # Loading needs some memory that does not spill (read buffers of 32 MiB per thread).
        return AuditError(
            f"cannot load {where} into DuckDB: {detail}; give DuckDB more memory "
            "(--memory-limit / memory_limit=, e.g. 1GB; at least about 150MB for the smallest ledger)"
        )
    found = _beyond_64_bits(tmp)
    if found is not None:
        kind, origin, (field, value) = found
        path = next(info.path for info in fleet if info.agent_ix == origin.agent_ix)
        return AuditError(
            f"cannot audit {path}: the {kind} record at seq {origin.seq} holds {value} in "
            f"{field}, beyond the 64-bit integers of the audit tables (-2**63 .. "
            f"2**63 - 1). See the record with `holon get {path} ledger:{origin.seq}`"
        )
    return AuditError(f"cannot load {where} into DuckDB: {detail}")


def _beyond_64_bits(tmp: Path) -> tuple[str, _Where, tuple[str, int]] | None:
    """The first extracted record holding an integer a BIGINT cannot: its kind, origin, field and value."""
    for job in sorted(tmp.iterdir()):
        for file in sorted(job.glob("*.jsonl")):
            kind = file.name.split(".", 1)[0]
            with file.open("rb") as lines:
                rest = b""
                while True:
                    block = lines.read(_SCAN_BLOCK)
                    data = rest + block
                    cut = len(data) if not block else data.rfind(b"\n") + 1
                    data, rest = data[:cut], data[cut:]
                    found = _line_beyond_64_bits(data, kind)
                    if found is not None:
                        return kind, found[0], found[1]
                    if not block:
                        break
    return None


def _line_beyond_64_bits(data: bytes, kind: str) -> tuple[_Where, tuple[str, int]] | None:
    """In JSON lines ``data`` of ``kind``, the first with too large an integer for a BIGINT: where, what."""
    digits = data.translate(_DIGITS_AS_ZERO)
    at = digits.find(_LONG_NUMBER)
    while at >= 0:  # only lines with a long run of digits are decoded
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        line = data[start:end]
        try:
            field = _in_a_bigint(msgspec.json.decode(line), kind)
            if field is not None:
                return msgspec.json.decode(line, type=_Where), field
        except (ValueError, RecursionError):
            pass  # not a line holon extracted
        at = digits.find(_LONG_NUMBER, end)
    return None


def _in_a_bigint(record: object, kind: str) -> tuple[str, int] | None:
    """The first field of an extracted record that the audit types BIGINT and that holds more."""
    if not isinstance(record, dict):
        return None
    for name in ("seq", "ts", "turn"):
        found = _field_beyond_64_bits(record.get(name), name)
        if found is not None:
            return found
    body = record.get("body")
    if kind not in BODY_TYPES or not isinstance(body, dict):
        return None  # read only as the JSON of the records table
    for key, value in body.items():
        if key not in JSON_BODY_FIELDS:
            found = _field_beyond_64_bits(value, f"body.{key}")
            if found is not None:
                return found
    return None


def _field_beyond_64_bits(value: object, where: str) -> tuple[str, int] | None:
    """The first field (as ``body.omitted[2].tokens``) holding an integer a BIGINT cannot, and it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (where, value) if not -(2**63) <= value < 2**63 else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _field_beyond_64_bits(item, f"{where}.{key}" if where else str(key))
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _field_beyond_64_bits(item, f"{where}[{index}]")
            if found is not None:
                return found
    return None


class _Steps:
    """Counts the steps of a load and reports each to a ``progress(done, total)`` callback."""

    def __init__(self, total: int, progress: Callable[[int, int], None]) -> None:
        self.total = total
        self.done = 0
        self._progress = progress

    def __call__(self) -> None:
        self.done += 1
        self._progress(self.done, self.total)


def _build(
    con: duckdb.DuckDBPyConnection,
    fleet: Sequence[LedgerInfo],
    tmp: Path,
    done: Callable[[], None] | None = None,
) -> None:
    """Create every table from the extracted files; ``done()`` after each table."""
    con.execute(
        "CREATE TEMP TABLE _fleet (agent_ix INTEGER, agent_id VARCHAR, path VARCHAR, records BIGINT, "
        "head_seq BIGINT, head_hash VARCHAR)"
    )
    con.executemany(
        "INSERT INTO _fleet VALUES (?, ?, ?, ?, ?, ?)",
        [(i.agent_ix, i.agent_id, i.path, i.records, i.head_seq, i.head_hash) for i in fleet],
    )
    present: set[str] = set()  # kinds with at least one file
    for job_dir in tmp.iterdir():
        if job_dir.is_dir():  # not the simulated calls beside the jobs' directories
            present.update(name.split(".", 1)[0] for name in os.listdir(job_dir))
    sources: dict[str, str] = {}
    # The patterns are globs: `*`, `?` or `[` in the temporary directory's own path (from
    # $TMPDIR) must match only themselves.
    root = glob.escape(str(tmp))
    for kind, body in BODY_TYPES.items():
        files = os.path.join(root, "*", f"{kind}.jsonl")
        sources[kind] = _read_json(files, body) if kind in present else _empty(body)
    sources["records"] = _read_json(os.path.join(root, "*", "*.jsonl"), None) if present else _empty("JSON")
    sources["simulated_calls"] = _simulated_source(tmp, (tmp / _SIMULATED_FILE).is_file())
    # `agents` reads the projection configs of the derived and prompt tables: built last.
    for table in sorted(TABLES.values(), key=lambda table: table.name == "agents"):
        run_statement(con, f"CREATE TABLE {table.name} AS {table.sql.format(**sources)}")
        if done is not None:
            done()
    con.execute("DROP TABLE _fleet")
    add_models(con, materialize=True)
