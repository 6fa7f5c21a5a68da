"""Export the audit tables as Parquet, partitioned by agent, for any Parquet engine."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from holon.audit.query import AuditError, run_statement
from holon.audit.tables import TABLES, LedgerPaths, connect, ledger_paths
from holon.ledger.files import check_outside
from holon.ledger.header import check_outside_ledgers

__all__ = ["export_parquet"]


def export_parquet(
    paths: LedgerPaths,
    out_dir: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    memory_limit: str | None = None,
) -> list[Path]:
    """Write every audit table of these ledgers as zstd Parquet; returns the files written.

    Layout: ``out_dir/<table>/agent_id=<id>/data_<n>.parquet`` (Hive partitioning; the
    agent id is URL-encoded in the directory name and restored by readers that
    understand Hive partitions, e.g. ``read_parquet('out/tool_calls/*/*.parquet',
    hive_partitioning=true, hive_types={'agent_id': 'VARCHAR'})`` in DuckDB, or Spark and
    Trino over the same tree). Readers guess a partition's type from its text, so tell
    them agent_id is text, or an agent "42" reads back as the integer 42.

    Other agents' partitions already in ``out_dir`` are left alone, so agents can be
    exported one at a time into one tree. An agent that already has a partition there
    is an error unless ``overwrite`` is set, which replaces all of that agent's
    partitions. A table without rows for an agent writes no file for it.

    ``progress(done, total)`` is called through the load (as by :func:`connect`) and
    after each table is written. ``memory_limit`` caps DuckDB's memory as for
    :func:`connect` (the load spills past it), for ledgers larger than memory.
    """
    out = Path(out_dir)
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
        # Written beside the target first, then moved in per agent: a failed export leaves
        # the tree as it was, and no name for an agent's partition has to be guessed.
        staging = Path(tempfile.mkdtemp(prefix=".holon-export-", dir=out))
        try:
            # One thread writes the files: with several, DuckDB's partitioned COPY writes
            # rows in whatever order the threads hand them over, so an agent's rows came
            # out shuffled (not by seq, as the tables are) and the bytes differed from run
            # to run. The write is no slower for it (the zstd encode is one thread anyway).
            run_statement(con, "SET threads = 1")
            for copied, name in enumerate(TABLES, 1):
                run_statement(
                    con,
                    f"COPY {name} TO '{_quote(str(staging / name))}' "
                    "(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (agent_id))",
                )
                if progress is not None:
                    progress(loaded + copied, loaded + len(TABLES))
            # Every agent has a row in `agents`, so its partitions name every agent exported.
            partitions = sorted(p.name for p in (staging / "agents").iterdir())
            taken = [
                f"{name}/{part}" for name in TABLES for part in partitions if (out / name / part).exists()
            ]
            if taken and not overwrite:
                shown = ", ".join(taken[:3]) + (f" and {len(taken) - 3} more" if len(taken) > 3 else "")
                raise AuditError(
                    f"{out} already holds these agents' tables ({shown}); choose another directory, "
                    "or replace them with `holon export --overwrite` (overwrite=True)"
                )
            written: list[Path] = []
            for name in TABLES:
                for part in partitions:
                    target = out / name / part
                    if target.exists():
                        shutil.rmtree(target)
                    source = staging / name / part
                    if source.exists():
                        target.parent.mkdir(exist_ok=True)
                        source.rename(target)
                        written.extend(sorted(target.glob("*.parquet")))
            return written
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        con.close()


def _quote(text: str) -> str:
    return text.replace("'", "''")
