"""Audit benchmark: load a 1M-record ledger into DuckDB and run every canned report.

Run with ``python -m benchmarks.audit`` (or ``make bench``). A ledger of ~1,000,000
records (turns with a rendered prompt of 8 sections, messages, 3-5 tool calls, plans,
working-memory deltas and episodes) is generated once into a temporary directory with
the ledger's batch API. Measured in the same run:

* holon load: :func:`holon.audit.connect` with its default workers (every table built),
  median of 3 loads, in records/s; and the same load in one process (``workers=1``);
* baseline 1, row by row: ``Ledger.read()`` then DuckDB ``executemany`` INSERT of each
  record's envelope and JSON body into one table (a 20,000-record sample);
* baseline 2, naive JSON: ``Ledger.read()``, one JSON line per record, and one DuckDB
  ``read_json`` of the file into the ``records`` table only (a 200,000-record sample);
* every canned report on the loaded 1M records: median of 3 runs.

Targets: load >= 200,000 records/s; every canned report < 1 s after load.
"""

from __future__ import annotations

import os
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Literal

import duckdb

from holon import records as r
from holon.audit import REPORTS, connect, run_report
from holon.ledger import Ledger

N_RECORDS = 1_000_000
LOAD_RUNS = 3
REPORT_RUNS = 3
ROW_SAMPLE = 20_000
JSON_SAMPLE = 200_000
LOAD_TARGET = 200_000
REPORT_TARGET_S = 1.0

SECTIONS = (
    "system",
    "tools",
    "working_memory",
    "episodes",
    "pending_delta",
    "active_work",
    "history",
    "current_input",
)
TOOLS = ("bash", "read_file", "edit_file", "grep")
WORDS = ("index", "replica", "schema", "test", "deploy", "lint", "cursor", "vacuum", "lag", "owner")


def _turn(rng: random.Random, turn: int, state: dict[str, int]) -> list[r.Body]:
    """The records of one turn, then the derived records the refresh would append."""
    rev, epoch = state["revision"], state["epoch"]
    omitted = tuple(
        r.Omission(
            section="history",
            ref=f"ledger:{rng.randrange(max(state['seq'], 1))}",
            reason="history over budget",
            tokens=rng.randrange(20, 400),
        )
        for _ in range(rng.randrange(1, 4) if turn % 5 == 0 else 0)
    )
    # Drawn in the order they always were: the ledger, and the figures measured on it, stay the same.
    started = r.TurnStarted(trigger="operator", input=f"continue with the {rng.choice(WORDS)} work ({turn})")
    sections = tuple(r.SectionTokens(section=s, tokens=rng.randrange(20, 3000)) for s in SECTIONS)
    bodies: list[r.Body] = [
        started,
        r.PromptRendered(
            working_memory_revision=rev,
            compression_epoch=epoch,
            cache_key=f"holon:bench:main:r{rev}:e{epoch}:{rev * 7919 + epoch:024x}",
            prompt_hash=f"{turn:032x}",
            # as the renderer counts a prompt: its sections and one token per separator
            total_tokens=sum(x.tokens for x in sections) + len(sections) - 1,
            budget=32_000,
            estimator="holon-heuristic",
            sections=sections,
            omitted=omitted,
        ),
        r.Message(role="operator", text=f"please check the {rng.choice(WORDS)} and the {rng.choice(WORDS)}"),
    ]
    for _ in range(rng.randrange(3, 6)):
        state["call"] += 1
        call_id = f"c{state['call']}"
        tool = rng.choice(TOOLS)
        # Some calls repeat a recent one: the duplicate-call report has work to do.
        args = {"command": f"{tool} {rng.choice(WORDS)} {rng.randrange(40 if rng.random() < 0.2 else 4000)}"}
        bodies.append(r.ToolIntent(call_id=call_id, tool=tool, args=args))
        if state["call"] % 500 == 0:
            continue  # the process died: an unknown outcome
        status: Literal["ok", "error"] = "error" if rng.random() < 0.03 else "ok"
        output = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(5, 40)))
        bodies.append(
            r.ToolResult(
                call_id=call_id,
                tool=tool,
                status=status,
                output=output,
                exit_code=0 if status == "ok" else 1,
                duration_ms=rng.randrange(5, 5000),
            )
        )
    if turn % 25 == 1:
        done = (turn // 25) % 6
        steps = tuple(
            r.PlanStep(id=f"s{i}", text=f"step {i}", status="done" if i < done else "pending")
            for i in range(6)
        )
        bodies.append(r.WorkPlan(work_item_id=f"w{turn // 200}", steps=steps))
    bodies.append(
        r.Message(role="assistant", text=f"done with {rng.choice(WORDS)}; next {rng.choice(WORDS)}")
    )
    bodies.append(r.TurnEnded(outcome="completed"))
    if rng.random() < 0.6:
        bodies.append(
            r.WorkingMemoryDelta(
                from_revision=rev,
                to_revision=rev + 1,
                reason="turn_completed",
                changed_fields=("plan", "files"),
                lines=(f"plan: step {turn % 6} in progress",),
                evidence_from_seq=state["seq"],
                evidence_to_seq=state["seq"] + len(bodies),
                projection_version=1,
            )
        )
        state["revision"] += 1
    if turn % 20 == 0:
        bodies.append(
            r.ContextEpisodeRecord(
                episode_id=epoch,
                boundary_reason="result_checkpoint" if epoch % 3 else "active_work_switched",
                work_item_id=f"w{turn // 200}",
                first_turn=turn - 19,
                last_turn=turn,
                from_seq=state["episode_from"],
                to_seq=state["seq"] + len(bodies) - 1,
                summary_lines=(f"episode {epoch}",),
                projection_version=1,
            )
        )
        state["epoch"] += 1
        state["episode_from"] = state["seq"] + len(bodies)
    return bodies


def generate(
    path: Path,
    n: int = N_RECORDS,
    *,
    agent_id: str = "bench-agent",
    seed: int = 7,
    start_ts: int = 1_700_000_000_000,
    step_ms: int = 250,
) -> int:
    """Write a ledger of about ``n`` records with the batch API; returns the record count.

    Records are ``step_ms`` apart from ``start_ts``; ``seed`` varies the content.
    """
    rng = random.Random(seed)
    state = {"revision": 0, "epoch": 0, "call": 0, "seq": 0, "episode_from": 0}
    ts = start_ts
    with Ledger.create(path, agent_id=agent_id, fsync="batch") as ledger:
        batch: list[r.Record] = []
        turn = 0
        while state["seq"] < n:
            turn += 1
            for body in _turn(rng, turn, state):
                ts += step_ms
                batch.append(r.Record(body=body, ts=ts, turn=None if body.KIND in r.DERIVED_KINDS else turn))
                state["seq"] += 1
            if len(batch) >= 20_000:
                with ledger.batch():
                    ledger.append_many(batch)
                batch = []
        with ledger.batch():
            ledger.append_many(batch)
        return ledger.head()[0] + 1


def _cpu_seconds() -> float:
    """CPU time of this process (DuckDB's threads included) and of its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _load_rate(
    path: Path, records: int, workers: int | None
) -> tuple[float, float, duckdb.DuckDBPyConnection]:
    """Records per wall-clock second and CPU seconds of one load, and its connection."""
    cpu = _cpu_seconds()
    started = time.perf_counter()
    con = connect(path, workers=workers)
    return records / (time.perf_counter() - started), _cpu_seconds() - cpu, con


def baseline_row_by_row(path: Path, sample: int) -> float:
    """Ledger.read() then one INSERT per record (executemany): records/s."""
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute("CREATE TABLE records (seq BIGINT, ts BIGINT, turn BIGINT, kind VARCHAR, body JSON)")
    with Ledger.open(path, readonly=True) as ledger:
        rows = [
            (x.seq, x.ts, x.turn, x.kind, r.encode_json_record(x).decode()) for x in ledger.read(0, sample)
        ]
    con.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?)", rows)
    con.close()
    return sample / (time.perf_counter() - started)


def baseline_json(path: Path, sample: int, tmp: Path) -> float:
    """Ledger.read(), a JSON line per record, one read_json into ``records`` only: records/s."""
    started = time.perf_counter()
    lines = tmp / "naive.jsonl"
    with Ledger.open(path, readonly=True) as ledger, lines.open("wb") as out:
        out.writelines(r.encode_json_record(x) + b"\n" for x in ledger.read(0, sample))
    con = duckdb.connect()
    con.execute(
        f"CREATE TABLE records AS SELECT * FROM read_json('{lines}', format='newline_delimited', "
        "columns={seq: 'BIGINT', ts: 'BIGINT', turn: 'BIGINT', kind: 'VARCHAR', v: 'INTEGER', body: 'JSON'})"
    )
    con.close()
    return sample / (time.perf_counter() - started)


def main() -> None:
    """Print load rates beside the baselines and every report's time, with the targets."""
    with tempfile.TemporaryDirectory(prefix="holon-bench-audit-") as tmp_name:
        tmp = Path(tmp_name)
        path = tmp / "ledger"
        started = time.perf_counter()
        records = generate(path)
        print(f"generated {records:,} records in {time.perf_counter() - started:.1f}s (ledger batch API)")

        rates, cpus = [], []
        con: duckdb.DuckDBPyConnection | None = None
        for _ in range(LOAD_RUNS):
            if con is not None:
                con.close()
            rate, cpu, con = _load_rate(path, records, None)
            rates.append(rate)
            cpus.append(cpu)
        assert con is not None
        serial, serial_cpu, serial_con = _load_rate(path, records, 1)
        serial_con.close()
        rows = baseline_row_by_row(path, ROW_SAMPLE)
        naive = baseline_json(path, JSON_SAMPLE, tmp)
        load = statistics.median(rates)
        print("load into DuckDB (every table), records/s:")
        runs = ", ".join(f"{x:,.0f}" for x in rates)
        print(f"  holon connect(), default workers  {load:>10,.0f}   (runs: {runs})")
        print(f"  holon connect(workers=1)          {serial:>10,.0f}   x{load / serial:.2f} parallel gain")
        print(
            f"  baseline: read + executemany      {rows:>10,.0f}   x{load / rows:.1f}  "
            f"({ROW_SAMPLE:,}-record sample)"
        )
        print(
            f"  baseline: read + JSON + read_json {naive:>10,.0f}   x{load / naive:.2f}  "
            f"(records table only, {JSON_SAMPLE:,}-record sample)"
        )
        verdict = "met" if load >= LOAD_TARGET else "MISSED"
        print(f"  target: >= {LOAD_TARGET:,} records/s: {verdict}")
        # CPU time does not depend on what else the (shared) machine runs: it bounds what
        # the load reaches on this many idle cores.
        cpu = statistics.median(cpus)
        print(
            f"  CPU per load: {cpu:.2f}s parallel, {serial_cpu:.2f}s in one process; "
            f"{records / cpu:,.0f} records per CPU-second, {os.cpu_count()} CPUs: "
            f"at most {records / cpu * (os.cpu_count() or 1):,.0f} records/s on idle CPUs"
        )

        print(f"canned reports on {records:,} records (median of {REPORT_RUNS}):")
        slowest = 0.0
        for name in REPORTS:
            times = []
            for _ in range(REPORT_RUNS):
                started = time.perf_counter()
                result = run_report(con, name)
                times.append(time.perf_counter() - started)
            median = statistics.median(times)
            slowest = max(slowest, median)
            print(f"  {name:<18} {median * 1e3:>8.1f} ms   {len(result.rows):>8,} rows")
        verdict = "met" if slowest < REPORT_TARGET_S else "MISSED"
        print(f"  target: every report < {REPORT_TARGET_S:.0f} s: {verdict} (slowest {slowest * 1e3:.0f} ms)")
        con.close()


if __name__ == "__main__":
    main()
