"""Runtime benchmark: holon's per-turn overhead stays flat; a 1M-record ledger opens fast.

Run: ``python -m benchmarks.runtime`` (also part of ``make bench``).

Measured, side by side in one run:

- **Per-turn overhead** of :class:`holon.runtime.Agent` at turn 100 and at turn 10,000
  of the same generated session (fixtures/make_session.py, through the live append
  loop, written to a real ledger): a probe of identical turns is driven through the
  Agent — open the turn, one tool call through the WAL (intent fsynced, result
  appended; the tool itself is instantaneous), ``turn.context()`` at a 32k budget, a
  reply, sometimes a plan update or a result brief, then the turn end (post-turn refresh,
  derived records, flush). There is no model, so the whole turn is holon's overhead.
  fsync policy ``batch``: one fsync after the context is rendered (before the model
  call), one per tool intent and one per turn end. Targets: p50
  under 5 ms, ratio (turn 10,000 / turn 100) ≤ 1.3. Baseline: a stateless runtime that
  re-folds the whole ledger and renders each turn.
- **Cold open**: ``Agent.open`` on a generated ledger of ≥ 1,000,000 records with a
  checkpoint at its head (target < 1 s), beside the same open without a checkpoint
  (a full fold).
- **First turn after a cold open** on that ledger (target < 100 ms), with the episode
  index restored from the checkpoint's ``.episodes`` file, beside the same first turn
  when that file is absent and the BM25 index over every archived episode is rebuilt
  (the behaviour before the index was saved), and beside the steady-state per-turn p50
  of the turns that follow. Also the cost of writing one checkpoint (with its index).

``python -m benchmarks.runtime footprint`` measures instead what one process holds as a
daemon records large tool outputs: 400 turns of one 500 KB output each through the Agent,
printing RSS and the characters the token-count memo keeps every 100 turns (they must
level off, not grow with the outputs recorded).

``python -m benchmarks.runtime longrun [TURNS]`` (default 30,000) runs the daemon guide's
loop in one process — tool rounds with 200 B-50 KB outputs, a work switch every 20
turns, waits, tasks, plan edits, decisions, follow-ups, a ``holon_search`` recall every
50 turns, ``turn.context()`` before every model call, checkpoints every 100 turns — and
prints per-turn p50 and RSS at turns 100, 1,000, 10,000 and 30,000 with the sizes of what
the agent keeps and what its last 10 checkpoints cost (each ``agent.checkpoint()`` timed
alone: median and mean milliseconds, bytes of the files it added); then it copies the
ledger, reopens the copy, and checks that the next turn's prompt is the one the agent
that kept running renders.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import msgspec

import holon.records as r
from holon.context import Budget, Prompt, build_context, cache_last_block, to_anthropic_messages
from holon.context import render as render_module
from holon.ledger import Ledger
from holon.projections import (
    DEFAULT_CONFIG,
    ProjectionState,
    apply,
    derived_after,
    derived_before,
    initial_state,
)
from holon.runtime import RECALL_TOOLS, Agent, AgentConfig
from holon.runtime.checkpoints import ToolIndex, write_checkpoint

ROOT = Path(__file__).resolve().parent.parent
EARLY, LATE = 100, 10_000
PROBE = 150
ROUNDS = 2
NAIVE_TURNS = 3
TURN_P50_TARGET_MS = 5.0
RATIO_TARGET = 1.3
OPEN_TARGET_S = 1.0
FIRST_TURN_TARGET_MS = 100.0
STEADY_TURNS = 30
MILLION = 1_000_000
CONFIG = AgentConfig(fsync="batch", checkpoint_every=0)


def _make_session() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_session", ROOT / "fixtures" / "make_session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Clock:
    """Deterministic milliseconds, continuing after the generated session."""

    def __init__(self, start: int) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1000
        return self.now


def _session_ledger(path: Path, turns: int) -> int:
    """Write the generated session of ``turns`` turns to a ledger; returns its last ts."""
    records = _make_session().session_multi_work(turns).records
    with Ledger.create(path, agent_id="bench", fsync="never") as ledger:
        for start in range(0, len(records), 10_000):
            ledger.append_many(
                r.Record(body=x.body, ts=x.ts, turn=x.turn) for x in records[start : start + 10_000]
            )
    return int(records[-1].ts)


def _probe_turn(agent: Agent, i: int) -> tuple[float, float]:
    """One probe turn through the Agent: (holon overhead, whole turn) in seconds.

    The overhead is the turn without its tool call: open the turn, render the context,
    record the reply (and plan / brief), end the turn (refresh, derived records, flush).
    The whole turn adds the tool call through the WAL (intent fsynced, result appended).
    """
    clock = time.perf_counter
    started = clock()
    with agent.turn(input=f"probe {i}: check the build output and continue the plan") as turn:
        # Declared by the agent's first probe turn, whatever its i: the cold-open probes start
        # at i = 10**6 on a ledger without it, where the plan and brief below named no item.
        if "PROBE" not in agent.state.work_items:
            turn.add_work_item("PROBE", "keep the build green while the probe runs", state="active")
        turn.context()
        tool_started = clock()
        call = turn.tool("bash", {"cmd": f"make check --part {i % 7}"}, idempotency_key=f"probe-{i}")
        call.finish(f"part {i % 7}: 41 passed, 0 failed\n", exit_code=0)
        tool_span = clock() - tool_started
        turn.record_message(f"part {i % 7} is green; moving on")
        if i % 3 == 0:
            steps = [
                r.PlanStep(id=f"p{j}", text=f"check part {j}", status="done" if j <= i % 7 else "pending")
                for j in range(7)
            ]
            turn.record_plan([*steps, r.PlanStep(id="ship", text="ship the build")], work_item_id="PROBE")
        if i % 10 == 9:
            turn.record_brief("result", f"probe checkpoint {i}: all parts green", work_item_id="PROBE")
    whole = clock() - started
    return whole - tool_span, whole


def _fdatasync_latency(tmp: Path) -> float:
    """Median seconds of one 4 KiB append + fdatasync on this disk (what a flush costs)."""
    path = tmp / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    samples = []
    try:
        for _ in range(50):
            started = time.perf_counter()
            os.write(fd, b"x" * 4096)
            os.fdatasync(fd)
            samples.append(time.perf_counter() - started)
    finally:
        os.close(fd)
    return statistics.median(samples)


def _naive_turn(path: Path, agent_id: str) -> float:
    """A stateless runtime's turn: fold the whole ledger from scratch, then render."""
    started = time.perf_counter()
    with Ledger.open(path, readonly=True) as ledger:
        state = initial_state(CONFIG.projection)
        for record in ledger.read(0):
            state = apply(state, record)
    build_context(state, CONFIG.budget, CONFIG.render, agent_id=agent_id)
    return time.perf_counter() - started


Samples = tuple[list[float], list[float]]


def _per_turn(tmp: Path, config: AgentConfig) -> tuple[Samples, Samples]:
    """(overhead, whole) probe-turn durations at turn 100 and at turn 10,000 under ``config``."""
    paths = {EARLY: tmp / f"early-{config.fsync}", LATE: tmp / f"late-{config.fsync}"}
    agents: dict[int, Agent] = {}
    for turns, path in paths.items():
        last_ts = _session_ledger(path, turns)
        agents[turns] = Agent.open(path, config=config, clock=Clock(last_ts))
    samples: dict[int, Samples] = {EARLY: ([], []), LATE: ([], [])}
    # The sessions were written without fsync: write their pages back now, so the
    # probe's first fsyncs do not pay for megabytes of someone else's dirty data.
    os.sync()
    gc.collect()
    for i in range(ROUNDS * PROBE):
        # Interleaved turn by turn, so drift on a shared machine (another process's
        # I/O slowing fsync) hits both depths alike.
        for turns, agent in agents.items():
            overhead, whole = _probe_turn(agent, i)
            samples[turns][0].append(overhead)
            samples[turns][1].append(whole)
    for agent in agents.values():
        agent.close()
    return samples[EARLY], samples[LATE]


def _naive(tmp: Path) -> tuple[float, float]:
    """The stateless baseline's turn at both depths (median of a few)."""
    return tuple(  # type: ignore[return-value]
        statistics.median(_naive_turn(tmp / f"{side}-batch", "bench") for _ in range(NAIVE_TURNS))
        for side in ("early", "late")
    )


def _row(label: str, early: float, late: float, unit: str = "ms") -> None:
    print(f"  {label:<44}{early:>9.2f} {unit}{late:>11.2f} {unit}{late / early:>9.2f}")


def _million_records(make: ModuleType) -> Iterator[r.Record]:
    """Evidence of the generated session repeated (turns shifted) until ≥ 1M records with derived."""
    template = [x for x in make.session_multi_work(10_000).records if x.kind not in r.DERIVED_KINDS]
    turns = max(x.turn for x in template if x.turn is not None)
    span = template[-1].ts - template[0].ts + 1000
    rep = 0
    while True:
        for x in template:
            turn = None if x.turn is None else x.turn + rep * turns
            yield r.Record(body=x.body, ts=x.ts + rep * span, turn=turn)
        rep += 1


def _big_ledger(path: Path) -> tuple[int, float]:
    """A ≥1M-record ledger built by the live append loop, checkpointed at its head."""
    started = time.perf_counter()
    state: ProjectionState = initial_state(DEFAULT_CONFIG)
    tools = ToolIndex()
    batch: list[r.Record] = []
    seq = tail_ts = 0
    with Ledger.create(path, agent_id="bench", fsync="never") as ledger:

        def add(record: r.Record) -> r.Record:
            nonlocal state, seq, tail_ts
            stored = r.Record(body=record.body, ts=record.ts, turn=record.turn, seq=seq)
            seq += 1
            tail_ts = stored.ts
            state = apply(state, stored)
            tools.apply(stored)
            batch.append(stored)
            return stored

        for record in _million_records(_make_session()):
            # Each record with what it brings, as the runtime appends it (holon.projections.derive).
            for derived in derived_before(state, record.kind, tail_ts=tail_ts):
                add(derived)
            stored = add(record)
            for derived in derived_after(state, stored):
                add(derived)
            if isinstance(record.body, r.TurnEnded):
                if len(batch) >= 20_000:
                    ledger.append_many(batch)
                    batch.clear()
                if seq >= MILLION:
                    break
        ledger.append_many(batch)
        ledger.flush()
        head_seq, head_hash = ledger.head()
        assert head_seq == state.seq
        write_checkpoint(path, state, tools, head_hash=head_hash, save_index=True)
    return seq, time.perf_counter() - started


def _timed_open(path: Path) -> tuple[float, Agent]:
    started = time.perf_counter()
    agent = Agent.open(path, config=CONFIG)
    return time.perf_counter() - started, agent


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="holon-bench-runtime-"))
    try:
        (early, early_whole), (late, late_whole) = _per_turn(tmp, CONFIG)
        (cpu_early, _), (cpu_late, _) = _per_turn(tmp, msgspec.structs.replace(CONFIG, fsync="never"))
        naive_early, naive_late = _naive(tmp)
        p50_early, p50_late = _p50(early), _p50(late)
        ratio = p50_late / p50_early
        print(f"per-turn overhead ({len(early)} probe turns at each depth, 32k budget)")
        print(f"  {'':<44}{'turn 100':>12}{'turn 10,000':>14}{'ratio':>9}")
        _row("overhead p50, fsync=batch (target)", p50_early, p50_late)
        _row("overhead p90, fsync=batch", _p90(early), _p90(late))
        _row("overhead p50, fsync=never (CPU only)", _p50(cpu_early), _p50(cpu_late))
        _row("whole turn p50 incl. tool WAL, fsync=batch", _p50(early_whole), _p50(late_whole))
        _row("baseline: re-fold ledger + render", naive_early * 1e3, naive_late * 1e3)
        print(f"  (one 4 KiB append + fdatasync on this disk: {_fdatasync_latency(tmp) * 1e3:.2f} ms)")

        big = tmp / "million"
        count, built = _big_ledger(big)
        print()
        print(f"cold open: {count:,} records (built and checkpointed in {built:.1f}s)")
        opens = []
        for _ in range(3):
            seconds, agent = _timed_open(big)
            assert agent.report.checkpoint_seq == agent.seq, agent.report
            agent.close()
            opens.append(seconds)
        open_s = statistics.median(opens)
        # The first turn after a cold open, the episode index restored from the
        # checkpoint vs rebuilt from the archive (its .episodes file moved away), then
        # the steady turns after it; each variant twice, alternating, medians reported.
        first_turns: dict[str, list[float]] = {"restored": [], "rebuilt": []}
        steady: list[float] = []
        probe = 10**6
        for _ in range(2):
            for variant in ("restored", "rebuilt"):
                saved = sorted((big / "checkpoints").glob("*.episodes"))
                if variant == "rebuilt":
                    for path in saved:
                        path.rename(path.with_name("moved-" + path.name))
                _, agent = _timed_open(big)
                assert agent.report.episode_index == variant.replace("rebuilt", "built"), agent.report
                first_turns[variant].append(_probe_turn(agent, probe)[0])
                probe += 1
                if variant == "restored":
                    for _ in range(STEADY_TURNS):
                        steady.append(_probe_turn(agent, probe)[0])
                        probe += 1
                else:
                    for path in saved:
                        path.with_name("moved-" + path.name).rename(path)
                agent.close()
        _, agent = _timed_open(big)
        episodes = len(agent.memory.archive)
        started = time.perf_counter()
        written = agent.checkpoint()
        checkpoint_s = time.perf_counter() - started
        index_bytes = (big / "checkpoints" / f"{written:012d}.episodes").stat().st_size
        agent.close()
        first_restored = statistics.median(first_turns["restored"]) * 1e3
        first_rebuilt = statistics.median(first_turns["rebuilt"]) * 1e3
        steady_p50 = _p50(steady)
        for ckpt in (big / "checkpoints").iterdir():
            ckpt.rename(ckpt.with_name("moved-" + ckpt.name))
        full_s, agent = _timed_open(big)
        assert agent.report.checkpoint_seq is None and agent.report.folded == agent.seq + 1
        agent.close()
        print(f"  {'Agent.open with checkpoint, median of 3':<44}{open_s:>9.3f} s")
        print(f"  {'baseline: Agent.open, full fold':<44}{full_s:>9.3f} s  ({full_s / open_s:.0f}x)")
        print(f"  {'first turn after open, index restored':<44}{first_restored:>9.2f} ms")
        print(
            f"  {'baseline: first turn, index rebuilt':<44}{first_rebuilt:>9.2f} ms"
            f"  ({first_rebuilt / first_restored:.0f}x; {episodes:,} episodes)"
        )
        print(f"  {f'steady turn p50 after open ({len(steady)} turns)':<44}{steady_p50:>9.2f} ms")
        print(
            f"  {'checkpoint write (state + tools + index)':<44}{checkpoint_s * 1e3:>9.2f} ms"
            f"  (episode index file {index_bytes / 2**20:.1f} MiB)"
        )
        print()
        worst = max(p50_early, p50_late)
        ok_turn = _verdict(worst < TURN_P50_TARGET_MS)
        print(f"turn p50 {worst:.2f} ms (target < {TURN_P50_TARGET_MS} ms): {ok_turn}")
        print(f"turn ratio {ratio:.2f} (target <= {RATIO_TARGET}): {_verdict(ratio <= RATIO_TARGET)}")
        print(f"cold open {open_s:.3f} s (target < {OPEN_TARGET_S} s): {_verdict(open_s < OPEN_TARGET_S)}")
        ok_first = _verdict(first_restored < FIRST_TURN_TARGET_MS)
        target = f"target < {FIRST_TURN_TARGET_MS:.0f} ms"
        print(f"first turn after open {first_restored:.1f} ms ({target}): {ok_first}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


FOOTPRINT_TURNS = 400
FOOTPRINT_OUTPUT = 500_000


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def footprint() -> None:
    """RSS and token-count memo size of one process recording a 500 KB tool output per turn."""
    tmp = Path(tempfile.mkdtemp(prefix="holon-bench-footprint-"))
    config = AgentConfig(fsync="never", checkpoint_every=0)
    line = "log line with words\n"
    try:
        with Agent.open(tmp / "l", agent_id="bench", config=config, clock=Clock(1_700_000_000_000)) as agent:
            for i in range(1, FOOTPRINT_TURNS + 1):
                with agent.turn(input=f"turn {i}: read the log") as turn:
                    turn.context()
                    call = turn.tool("cat", {"path": f"log{i}"})
                    call.finish((f"{i} " + line * (FOOTPRINT_OUTPUT // len(line)))[:FOOTPRINT_OUTPUT])
                    turn.context()
                if i % 100 == 0:
                    held = sum(len(text) for memo in render_module._COUNTS.values() for text in memo)
                    memo = f"token-count memo {held / 2**20:.0f} Mi characters"
                    print(f"turn {i}: RSS {_rss_mb():.0f} MB, {memo}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "kappa",
    "sigma",
    "omega",
    "token",
    "frame",
    "chain",
    "hash",
    "seq",
    "blob",
    "turn",
    "plan",
    "step",
    "work",
    "wait",
    "task",
    "epoch",
    "build",
    "deploy",
    "migrate",
    "index",
    "cache",
    "router",
    "parser",
    "ledger",
]
_SIZES = (200, 400, 1_000, 3_000, 8_000, 20_000, 50_000)
LONG_TURNS = 30_000
LONG_MARKS = (100, 1_000, 10_000, 30_000)
LONG_CHECKPOINT = 100


def _outputs() -> list[str]:
    """Tool outputs of 200 B to 50 KB, made once (generating text is not what is measured)."""
    rng = random.Random(1)
    pool = []
    for k in range(70):
        size = _SIZES[k % len(_SIZES)]
        lines, total = [], 0
        while total < size:
            line = f"{k}:{total} " + " ".join(rng.choice(_WORDS) for _ in range(10))
            lines.append(line)
            total += len(line) + 1
        pool.append("\n".join(lines)[:size])
    return pool


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _daemon_turn(agent: Agent, i: int, rng: random.Random, pool: list[str]) -> Prompt:
    """One turn of the daemon guide's loop, with a scripted model; returns its last prompt."""
    with agent.turn(input=f"turn {i}: {_words(rng, 12)}", trigger="operator", role="operator") as turn:
        if i % 20 == 1 or agent.state.active_work_item_id is None:
            old = agent.state.active_work_item_id
            if old is not None:
                turn.finish_work(old, reason="done")
            turn.add_work_item(
                f"W{i}",
                f"module W{i}: {_words(rng, 6)}",
                state="active",
                scope_constraints=("no network", f"only src/W{i}"),
            )
            turn.record_plan(
                [r.PlanStep(id=f"s{j}", text=f"step {j} {rng.choice(_WORDS)}") for j in range(6)]
            )
        held = None
        for rnd in range(rng.randint(1, 4)):
            prompt = turn.context()  # before every model call
            if prompt is not held:
                held = prompt
                messages = to_anthropic_messages(prompt, model="m", max_tokens=8_000)["messages"]
            cache_last_block(messages)
            turn.record_message(f"round {rnd}: {_words(rng, 20)}")
            call = turn.tool(
                "bash",
                {"command": f"make part-{i}-{rnd}"},
                idempotency_key=f"k{i}.{rnd}" if rnd == 0 else None,
            )
            out = f"call {i}.{rnd} {rng.random()}\n{rng.choice(pool)}"
            code = 0 if rng.random() < 0.9 else 1

            def execute(out: str = out, code: int = code) -> tuple[str, int]:
                return out, code

            call.run(execute)
            messages.append({"role": "user", "content": [{"type": "tool_result", "content": call.output}]})
        if i % 3 == 0:
            turn.record_plan(
                [
                    r.PlanStep(id=f"s{j}", text=f"step {j}", status="done" if j < i % 6 else "pending")
                    for j in range(6)
                ]
            )
        if i % 5 == 0:
            turn.record_decision(f"D{i}", f"decision {i}: {rng.choice(_WORDS)}")
        if i % 11 == 0:
            turn.follow_up(f"F{i}", f"follow up {i}")
        if i % 11 == 5:
            for follow_up in list(agent.state.follow_ups)[:1]:
                turn.follow_up(follow_up, "closed", status="done")
        if i % 13 == 0:
            for task in list(agent.state.tasks):
                turn.task_result(task, status="ok", summary=f"task {task} ok", output=rng.choice(pool))
            turn.start_task(f"T{i}", f"build {i}")
        if i % 17 in (0, 4):
            for wait in list(agent.state.waits):
                turn.resolve_wait(wait)
            if i % 17 == 0:
                turn.wait_for(f"Q{i}", f"QA sign-off {i}")
        if i % 50 == 25:
            turn.recall("holon_search", {"query": rng.choice(_WORDS)})
        prompt = turn.context()
        turn.record_message(f"done {i}")
    return prompt


def longrun(turns: int = LONG_TURNS) -> None:
    """The daemon guide's loop for ``turns`` turns in one process, then a reopen beside it."""
    tmp = Path(tempfile.mkdtemp(prefix="holon-bench-longrun-"))
    # Checkpoints are written by the loop (after every LONG_CHECKPOINT-th turn, between
    # turns, as checkpoint_every does) so that each one is timed on its own.
    config = AgentConfig(
        budget=Budget(context_window=200_000, output_reserve=8_000), fsync="never", checkpoint_every=0
    )
    policy = r.SystemPolicy(text="You maintain the service.", tools=RECALL_TOOLS)
    pool, rng, clock = _outputs(), random.Random(7), Clock(1_700_000_000_000)
    times: list[float] = []
    checkpoints: list[tuple[float, int]] = []
    try:
        agent = Agent.open(tmp / "a", agent_id="bench", config=config, clock=clock, policy=policy)
        for i in range(1, turns + 1):
            started = time.perf_counter()
            _daemon_turn(agent, i, rng, pool)
            times.append(time.perf_counter() - started)
            if i % LONG_CHECKPOINT == 0:
                checkpoints.append(_timed_checkpoint(agent))
            if i in LONG_MARKS:
                recent = checkpoints[-10:]
                spent = [s for s, _ in recent]
                mean_ms, mean_kb = statistics.mean(spent) * 1e3, statistics.mean(b for _, b in recent) / 1024
                print(
                    f"turn {i:>6,}: checkpoint {_p50(spent):6.1f} ms median, {mean_ms:.1f} ms mean, "
                    f"{mean_kb:,.0f} KB written on average (the last {len(recent)}); checkpoints/ holds "
                    f"{_tree_bytes(agent.ledger.path / 'checkpoints') / 1024:,.0f} KB",
                    flush=True,
                )
                held = sum(len(text) for memo in render_module._COUNTS.values() for text in memo)
                print(
                    f"turn {i:>6,}: {agent.seq + 1:>9,} records, p50 {_p50(times[-100:]):6.2f} ms "
                    f"(last 100 turns), RSS {_rss_mb():4.0f} MB; episodes {len(agent.memory.archive):,}, "
                    f"idempotency keys {len(agent._core.tools.keys):,}, search documents "
                    f"{len(agent._search) if agent._search is not None else 0:,}, count memo "
                    f"{held / 2**20:.1f} Mi chars",
                    flush=True,
                )
        agent.ledger.flush()
        shutil.copytree(tmp / "a", tmp / "b")
        started = time.perf_counter()
        other = Agent.open(tmp / "b", config=config, clock=Clock(clock.now), policy=policy)
        opened = time.perf_counter() - started
        print(
            f"reopen after {turns:,} turns: {opened:.3f} s ({other.report.folded} records folded after "
            f"checkpoint {other.report.checkpoint_seq}, episode index {other.report.episode_index})"
        )
        prompts = [_daemon_turn(each, turns + 1, random.Random(8), pool) for each in (agent, other)]
        same = prompts[0].text == prompts[1].text and prompts[0].cache_key == prompts[1].cache_key
        print(f"next prompt of the reopened agent is the running one's: {same}")
        agent.close()
        other.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _files(folder: Path) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in folder.rglob("*") if path.is_file()}


def _tree_bytes(folder: Path) -> int:
    return sum(_files(folder).values())


def _timed_checkpoint(agent: Agent) -> tuple[float, int]:
    """Seconds one ``agent.checkpoint()`` takes and the bytes of the files it added."""
    folder = agent.ledger.path / "checkpoints"
    before = _files(folder) if folder.is_dir() else {}
    started = time.perf_counter()
    agent.checkpoint()
    spent = time.perf_counter() - started
    written = sum(size for name, size in _files(folder).items() if name not in before)
    return spent, written


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1] * 1e3


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISSED"


if __name__ == "__main__":
    if sys.argv[1:] == ["footprint"]:
        footprint()
    elif sys.argv[1:2] == ["longrun"]:
        longrun(*(int(arg) for arg in sys.argv[2:3]))
    else:
        main()
