"""The commands that write what a ledger holds elsewhere: ``holon export`` (JSONL or Parquet),
``holon simulate`` (a new ledger of the prompts holon would have sent) and ``holon report`` (an HTML page).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click
import msgspec

from holon.cli.group import _MAX_TOKENS, _common
from holon.cli.ledgers import _reading
from holon.cli.printing import _count, _echo, _echo_json, _n, _table
from holon.context import DEFAULT_BUDGET, DEFAULT_ESTIMATOR, available_estimators
from holon.errors import UsageError
from holon.progress import progress_items, progress_total

if TYPE_CHECKING:
    import holon.records as r
    from holon.ledger import Ledger


def _memory_limit(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Refuse a --memory-limit that is not a positive size before anything is loaded."""
    if value is None:
        return None
    # Imported when the option is given: DuckDB stays off the start-up path of a JSONL export.
    from holon.audit import memory_limit_problem

    problem = memory_limit_problem(value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


class _ProgressLedger:
    """A read-only ledger whose ``read`` reports progress; ``export_jsonl`` reads through it."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    @property
    def path(self) -> Path:
        return self._ledger.path

    def read(self, from_seq: int = 0, to_seq: int | None = None) -> Iterator[r.Record]:
        return progress_items(
            self._ledger.read(from_seq, to_seq), length=lambda: self._ledger.head()[0] + 1, label="exporting"
        )

    def get_blob(self, blob_hash: str) -> bytes:
        return self._ledger.get_blob(blob_hash)


@click.command()
@_common
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "parquet"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one canonical record per line, blobs in OUT.blobs/ (lossless; `holon import --from jsonl` "
    "reads it back). parquet: audit tables in the directory OUT (see docs/audit.md).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Parquet only: replace this agent's tables already in OUT (other agents' tables stay). "
    "A JSONL export always replaces OUT.",
)
@click.option(
    "--incremental",
    is_flag=True,
    help="Parquet only: add what the ledger appended since its export in OUT, rewriting only the "
    "partitions that changed (refused if the ledger no longer extends that export; see docs/audit.md).",
)
@click.option(
    "--memory-limit",
    "memory_limit",
    metavar="SIZE",
    callback=_memory_limit,
    help="Parquet only: most memory DuckDB holds while loading, e.g. 2GB; past it, it spills to "
    "a temporary directory (see `holon audit --memory-limit`).",
)
def export(
    *,
    path: Path,
    as_json: bool,
    out: Path,
    fmt: str,
    overwrite: bool,
    incremental: bool,
    memory_limit: str | None,
) -> None:
    """Export the ledger at PATH to OUT as canonical JSONL or as Parquet audit tables.

    Several agents can be exported into one Parquet directory, one at a time; exporting
    an agent already there again needs --overwrite, or --incremental to add only what its
    ledger appended since. OUT is a path: a JSONL export's blobs go beside it, so it
    cannot be standard output.

    Example: holon export runs/agent-7 agent-7.jsonl
    """
    from holon.ledger import export_jsonl

    if str(out) == "-":
        # Not a file named "-" in the working directory, which the user did not ask for.
        raise UsageError(
            "holon export writes OUT as a file (a JSONL export with its blobs in OUT.blobs/ beside it) "
            "or a Parquet directory, not to standard output: pass a path, e.g. `holon export PATH run.jsonl`"
        )
    if memory_limit is not None and fmt != "parquet":
        raise click.UsageError("--memory-limit is for --format parquet (a JSONL export holds no tables)")
    if incremental and fmt != "parquet":
        raise click.UsageError("--incremental is for --format parquet (a JSONL export always replaces OUT)")
    if incremental and overwrite:
        raise click.UsageError("--incremental and --overwrite exclude each other: choose one")
    if fmt == "parquet":
        files = _export_parquet(
            path, out, overwrite=overwrite, incremental=incremental, memory_limit=memory_limit
        )
        if as_json:
            _echo_json({"format": fmt, "files": [str(f) for f in files]})
        else:
            _echo(f"wrote {len(files)} Parquet file(s) to {out}")
            for f in files:
                _echo(f"  {f}")
        return
    with _reading(path) as ledger:
        # export_jsonl only reads records and blobs; the proxy adds the progress bar.
        count = export_jsonl(_ProgressLedger(ledger), out)  # type: ignore[arg-type]
    if as_json:
        _echo_json({"format": fmt, "records": count, "path": str(out)})
    else:
        _echo(f"wrote {_n(count)} records to {out}")


def _export_parquet(
    path: Path, out: Path, *, overwrite: bool, incremental: bool, memory_limit: str | None
) -> list[Path]:
    # Imported on use: DuckDB stays off the start-up path of every other command.
    from holon.audit import export_parquet
    from holon.ledger import Ledger

    Ledger.open(path, readonly=True).close()  # a clear NotALedger before any file is written
    with progress_total("exporting") as advance:
        files: list[Path] = export_parquet(
            [path],
            out,
            overwrite=overwrite,
            incremental=incremental,
            progress=advance,
            memory_limit=memory_limit,
        )
    return files


# --------------------------------------------------------------------------- simulate


@click.command()
@_common
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    metavar="OUT",
    help="The new ledger to write (must not exist); its simulation.json holds the comparison.",
)
@click.option(
    "--budget",
    "window",
    type=click.IntRange(min=1, max=_MAX_TOKENS),
    default=DEFAULT_BUDGET.context_window,
    show_default=True,
    metavar="TOKENS",
    help="Context window of every simulated call.",
)
@click.option(
    "--output-reserve",
    "reserve",
    type=click.IntRange(min=0, max=_MAX_TOKENS),
    metavar="TOKENS",
    help="Tokens kept free for the answer (default: an eighth of --budget, as the evaluation keeps).",
)
@click.option(
    "--estimator",
    type=click.Choice(available_estimators()),
    default=DEFAULT_ESTIMATOR,
    show_default=True,
    help="Token estimator (the tokenizer) to render and count with.",
)
@click.option(
    "--cache-key",
    default="default",
    show_default=True,
    metavar="KEY",
    help="Prompt cache key of the rendered prompts.",
)
@click.option(
    "--agent-id",
    metavar="ID",
    help="Agent id of OUT (default: PATH's); another one lets `holon audit PATH OUT` load both.",
)
@click.option(
    "--layout",
    # The renderer's layouts (holon.context.sections.LAYOUTS; tests/test_simulate.py checks).
    type=click.Choice(["recitation", "rfc"]),
    default="recitation",
    show_default=True,
    help="Order of the prompt's sections (docs/context-rendering.md, Layouts).",
)
def simulate(
    *,
    path: Path,
    as_json: bool,
    out: Path,
    window: int,
    reserve: int | None,
    estimator: str,
    cache_key: str,
    agent_id: str | None,
    layout: str,
) -> None:
    """Replay the model calls of PATH under holon into a new ledger OUT, beside what its tool sent.

    The model calls are found in PATH's evidence (an imported transcript's too: a call
    precedes each run of the model's output), and each gets the prompt holon's runtime
    would have sent with the budget given: OUT holds the evidence, the derived records
    and one prompt_rendered record per rendered prompt, written as the runtime writes
    them, so `holon prompts OUT --check`, `holon stats OUT` and `holon audit OUT --report
    tokens` read them. Beside them, OUT/simulation.json compares every call with what
    the transcript's own tool sent — its whole history, truncated oldest-first at the
    window (the evaluation's full-history policy) — under the same two cache models:
    tokens, cached and written tokens per call, and the input cost (docs/simulate.md).
    PATH is only read.

    Example: holon simulate runs/imported -o runs/imported-sim --budget 128000
    """
    from holon.context import RenderConfig
    from holon.simulate import SIMULATION_FILE, simulate_ledger, simulation_budget

    budget = simulation_budget(window, reserve)
    config = RenderConfig(estimator=estimator, prompt_cache_key=cache_key, layout=layout)  # type: ignore[arg-type]
    with _reading(path) as ledger, progress_total("simulating") as progress:
        result = simulate_ledger(
            ledger, out, budget, config, agent_id=agent_id, source_name=str(path), progress=progress
        )
    if as_json:
        _echo_json(
            {
                "out": str(out),
                "calls": len(result.calls),
                "prompts_rendered": result.prompts_rendered,
                "context_window": result.context_window,
                "output_reserve": result.output_reserve,
                "holon": msgspec.to_builtins(result.holon),
                "tool": msgspec.to_builtins(result.tool),
            }
        )
        return
    ours, theirs = result.holon, result.tool
    _echo(
        f"simulated {_count(len(result.calls), 'model call')} of {path} into {out} "
        f"({_count(result.prompts_rendered, 'prompt')} rendered; window {result.context_window:,}, "
        f"{result.output_reserve:,} kept for the answer)"
    )
    rows = []
    for name, series in (("holon", ours), (f"tool ({result.tool_stand_in})", theirs)):
        rows.append(
            (
                name,
                _n(series.tokens),
                _n(series.max_tokens),
                _share(series.cached_prefix, series.tokens),
                _n(round(series.cost_prefix)),
                _share(series.cached_breakpoints, series.tokens),
                _n(round(series.cost_breakpoints)),
            )
        )
    headers = ("series", "tokens", "max", "cached (prefix)", "cost (prefix)", "cached (bp)", "cost (bp)")
    for line in _table(headers, rows, right=range(1, 7)):
        _echo(line)
    if theirs.cost_prefix and theirs.cost_breakpoints:
        _echo(
            f"input cost, holon / tool: {ours.cost_prefix / theirs.cost_prefix:.2f}x (prefix cache), "
            f"{ours.cost_breakpoints / theirs.cost_breakpoints:.2f}x (breakpoints)"
        )
    _echo(f"every call: {out / SIMULATION_FILE}")
    _echo(f"check the prompts: holon prompts {shlex.quote(str(out))} --check")


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "—"


# --------------------------------------------------------------------------- report


@click.command()
@_common
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=Path("report.html"),
    show_default=True,
    help="The HTML file to write (outside the ledger directory).",
)
@click.option(
    "--memory-limit",
    "memory_limit",
    metavar="SIZE",
    callback=_memory_limit,
    help="Most memory DuckDB holds while loading, e.g. 2GB (see `holon audit --memory-limit`).",
)
def report(*, path: Path, as_json: bool, out: Path, memory_limit: str | None) -> None:
    """Draw one run as a self-contained HTML page: tokens, caching, evictions, tools, episodes.

    The page (one file, nothing fetched, readable offline) shows tokens per model call by
    section, each call's cached share with its prefix breaks and their causes, evictions
    and restores, tool calls by tool with durations and outcomes, episodes over the run,
    and the cost under the cache model. Every figure is a query over the audit tables
    (`holon audit PATH --report calls` has the per-call cache model); a long run is drawn
    in buckets, and the page says so. A ledger with no recorded prompts (an imported
    transcript) gets a page that says how to render them: `holon simulate`.

    Example: holon report runs/agent-7 -o agent-7.html
    """
    from holon.report import write_report

    with progress_total("loading") as advance:
        size = write_report(path, out, progress=advance, memory_limit=memory_limit)
    if as_json:
        _echo_json({"path": str(out), "bytes": size})
    else:
        _echo(f"wrote the report of {path} to {out} ({_n(size)} bytes)")
