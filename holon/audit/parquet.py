"""Export the audit tables as Parquet, partitioned by agent, for any Parquet engine."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from holon.audit.query import AuditError
from holon.audit.tables import TABLES, LedgerPaths, connect

__all__ = ["export_parquet"]


def export_parquet(
    paths: LedgerPaths,
    out_dir: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    workers: int | None = None,
) -> list[Path]:
    """Write every audit table of these ledgers as zstd Parquet; returns the files written.

    Layout: ``out_dir/<table>/agent_id=<id>/data_<n>.parquet`` (Hive partitioning; the
    agent id is URL-encoded in the directory name and restored by readers that
    understand Hive partitions, e.g. ``read_parquet('out/tool_calls/*/*.parquet',
    hive_partitioning=true)`` in DuckDB, or Spark and Trino over the same tree). A table
    without rows writes no files. An existing ``out_dir/<table>`` directory is an error
    unless ``overwrite`` is set, which replaces it.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise AuditError(f"cannot export to {out}: it exists and is not a directory")
    if not overwrite:
        taken = [name for name in TABLES if (out / name).exists()]
        if taken:
            raise AuditError(
                f"{out} already holds exported tables ({', '.join(taken)}); "
                "choose an empty directory or pass overwrite=True (--overwrite)"
            )
    con = connect(paths, workers=workers)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        for name in TABLES:
            target = out / name
            if target.exists():  # only with overwrite (checked above): stale agents must go too
                shutil.rmtree(target)
            con.execute(
                f"COPY {name} TO '{_quote(str(target))}' "
                "(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (agent_id))"
            )
            if target.exists():
                written.extend(sorted(target.rglob("*.parquet")))
        return written
    finally:
        con.close()


def _quote(text: str) -> str:
    return text.replace("'", "''")
