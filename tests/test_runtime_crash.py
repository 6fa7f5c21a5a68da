"""Crash recovery of the runtime: SIGKILL the example daemon in every phase of a turn, resume, continue.

Each round runs the daemon (tests/runtime_crash_child.py) and kills it in a phase chosen
for the round: the child stops at the chosen point of that phase and the parent kills it
there, so every phase of docs/daemon-guide.md's failure model is hit for certain — the
flush at ``turn.context()``, the model call, a tool's side effect (the report step before
and after it wrote its file), ``turn_ended`` and its derived records (buffered; or
``turn_ended`` durable and the refresh cut short before or after some of its records), a
checkpoint write, a segment rollover, a seal, between turns, and the repair a resume
makes (a round that first kills in a side effect, then kills the child resuming from
it halfway through recording the unknown outcome and closing the turn). A few rounds
kill at a random moment instead (phases slowed down); their markers say where the kill
landed.

Then the ledger is resumed, by the test's own ``Agent.open`` or — as a user would — by
running examples/daemon.py again, and the test checks what resuming promises: no
acknowledged record lost, the turn left open closed as interrupted, the intents without
a result reported (and recorded) as unknown outcomes, no idempotency key executed twice,
every executed side effect preceded by its durable intent, a refresh cut short completed,
an unsealed segment sealed, no checkpoint rejected. Finally the run continues to
completion with a valid chain, derivations that replay, every recorded prompt re-rendered
byte for byte from the ledger, and the daemon's decisions after unknown outcomes matching
what the kill left in the workspace.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from holon import records as r
from holon.ledger import Ledger
from holon.ledger.segments import list_segments
from holon.projections import apply, initial_state, verify_derivations
from holon.replay import prompt_at
from holon.runtime import Agent
from holon.runtime.checkpoints import chain_hash
from tests.ledger_support import child_env
from tests.runtime_crash_child import CONFIG, JOB_SEED, PHASES
from tests.runtime_support import ROOT, fold_ledger, load_daemon

SEED = 20261122
#: The rounds: every phase twice — resumed once by Agent.open, once by the daemon — and
#: a few kills at random moments.
RANDOM_ROUNDS = 4
#: The chosen point of a phase is its k-th in the child, k drawn from 1..this.
OCCURRENCES = {
    "context_flush": 4,
    "model_call": 4,
    "tool_effect": 4,
    "report_unwritten": 1,
    "report_written": 1,
    "turn_end": 8,
    "refresh_missing_all": 4,
    "refresh_missing_some": 1,
    "checkpoint": 8,
    "rollover": 1,
    "seal": 2,
    "between_turns": 4,
    # the k-th repair record of an Agent.open after a kill in tool_effect (an open turn
    # and an intent without a result leave at least two: the unknown outcome, turn_ended)
    "recovery": 2,
}
TURNS = 220  # the ledger's length at the end; the rounds stop well before it


@dataclass(frozen=True)
class Plan:
    target: str  # a phase, or "random"
    occurrence: int  # the k-th point of the phase (random rounds: the child's delay seed)
    resume: str  # "agent": Agent.open in this process; "daemon": examples/daemon.py


@dataclass
class Kill:
    """What the parent saw of one killed child."""

    hit: str  # the phase the kill landed in ("unmarked": outside every marked phase)
    held_turn: int | None = None
    detail: str = ""


@dataclass
class OnDisk:
    """A read-only look at the ledger: what a resume must repair."""

    records: list[r.Record]
    genesis: str
    open_turn: int | None  # the turn left open
    last_turn: int  # the newest turn index
    pending: dict[str, str | None]  # call id -> idempotency key of intents without a result
    pending_refresh: bool  # a turn_ended on disk without all of its derived records
    unsealed: list[str] = field(default_factory=list)  # plain segments before the active one


def _schedule(rng: random.Random) -> list[Plan]:
    plans = [
        Plan(phase, rng.randint(1, OCCURRENCES[phase]), resume)
        for phase in PHASES
        for resume in ("agent", "daemon")
    ]
    plans += [
        Plan("random", rng.randint(1, 10_000), rng.choice(("agent", "daemon"))) for _ in range(RANDOM_ROUNDS)
    ]
    rng.shuffle(plans)
    return plans


def _spawn(path: Path, plan: Plan | None) -> subprocess.Popen[bytes]:
    extra = [plan.target, str(plan.occurrence)] if plan is not None else []
    return subprocess.Popen(
        [sys.executable, "-m", "tests.runtime_crash_child", str(path), str(TURNS), *extra],
        stdout=subprocess.PIPE,
        env=child_env(),
        cwd=ROOT,
    )


class Acks:
    """The newest acknowledgement the children printed: (head seq, head hash)."""

    def __init__(self) -> None:
        self.last: tuple[int, str] | None = None

    def see(self, line: bytes) -> list[str]:
        words = line.decode().split()
        if words and words[0] == "ack":
            self.last = (int(words[2]), words[3])
        return words


def _kill(path: Path, plan: Plan, rng: random.Random, acks: Acks) -> Kill:
    """Run a child, kill it in the planned phase (or at a random moment), say where it died.

    A ``recovery`` round first kills a child inside a tool's side effect, so the next
    open has a turn to close and an unknown outcome to record, then kills the child
    that resumes in the middle of that repair.
    """
    if plan.target == "recovery":
        _kill(path, Plan("tool_effect", rng.randint(1, OCCURRENCES["tool_effect"]), plan.resume), rng, acks)
    child = _spawn(path, plan)
    assert child.stdout is not None
    kill: Kill | None = None
    stack: list[str] = []  # the phases a random round's child is in

    def follow(words: list[str]) -> None:
        if words[0] == "enter":
            stack.append(words[1])
        elif words[0] == "leave":
            # The sealing thread's phase overlaps the main thread's: remove by name.
            del stack[len(stack) - 1 - stack[::-1].index(words[1])]

    try:
        if plan.target == "random":
            seen = 0
            wanted = rng.randint(1, 4)
            while seen < wanted:
                line = child.stdout.readline()
                assert line, f"the child ended before {wanted} turns"
                words = acks.see(line)
                seen += words[0] == "ack"
                follow(words)
            time.sleep(rng.uniform(0.0, 0.03))
        else:
            while kill is None:
                line = child.stdout.readline()
                assert line, f"the child ended before reaching {plan.target} #{plan.occurrence}"
                words = acks.see(line)
                if words[0] == "hold":
                    assert words[1] == plan.target
                    turn = None if words[2] == "-" else int(words[2])
                    kill = Kill(hit=words[1], held_turn=turn, detail=" ".join(words[3:]))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        for line in child.stdout.read().splitlines():
            words = acks.see(line)
            if plan.target == "random":
                follow(words)
        child.wait(timeout=60)
        child.stdout.close()
    return kill or Kill(hit=stack[-1] if stack else "unmarked")


def _on_disk(path: Path) -> OnDisk:
    """What a reopen must repair, from a read-only fold: the open turn, intents without result."""
    state = initial_state(CONFIG.projection)
    pending: dict[str, str | None] = {}
    with Ledger.open(path, readonly=True) as ledger:
        records = list(ledger.read(0))
        genesis = ledger.header.genesis.hex()
    for record in records:
        state = apply(state, record)
        if isinstance(record.body, r.ToolIntent):
            pending[record.body.call_id] = record.body.idempotency_key
        elif isinstance(record.body, r.ToolResult):
            pending.pop(record.body.call_id, None)
    turn = state.runtime.turn
    segs = list_segments(path / "segments")
    return OnDisk(
        records=records,
        genesis=genesis,
        open_turn=turn.index if turn is not None and turn.open else None,
        last_turn=turn.index if turn is not None and turn.index is not None else 0,
        pending=pending,
        pending_refresh=verify_derivations(records, config=CONFIG.projection).pending_refresh,
        unsealed=[seg.name for seg in segs[:-1] if seg.plain is not None],
    )


def _effects(path: Path) -> list[str]:
    log = load_daemon().workspace_for(path) / ".effects.log"
    return log.read_text().split() if log.exists() else []


def _check_wal(path: Path, records: list[r.Record]) -> None:
    """Every executed side effect has a durable intent; no key was executed twice."""
    executed = Counter(_effects(path))
    twice = [key for key, n in executed.items() if n > 1]
    assert not twice, f"idempotency keys executed more than once: {twice}"
    intents = {rec.body.idempotency_key for rec in records if isinstance(rec.body, r.ToolIntent)}
    assert set(executed) <= intents, f"side effects without a durable intent: {set(executed) - intents}"


def _check_phase(kill: Kill, before: OnDisk, acked: tuple[int, str] | None) -> None:
    """What the kill must have left on disk, given the phase it landed in."""
    hit, turn = kill.hit, kill.held_turn
    if hit in ("model_call", "tool_effect", "report_unwritten", "report_written"):
        # The turn's input and prompt were flushed by turn.context(): the turn is open on disk.
        assert before.open_turn == turn is not None
    if hit in ("tool_effect", "report_unwritten", "report_written"):
        assert kill.detail in before.pending.values(), "the held call's intent is durable, its result not"
    if hit == "context_flush":
        # The turn's records were buffered: it did not happen, unless a rollover wrote part of it.
        assert before.open_turn in (None, turn)
    if hit == "turn_end":
        ended = any(isinstance(x.body, r.TurnEnded) and x.turn == turn for x in before.records)
        assert before.open_turn == turn or ended  # turn_ended buffered, or written by a rollover
    if hit.startswith("refresh_missing"):
        assert before.open_turn is None and before.pending_refresh, "turn_ended durable, derived records not"
        derived = before.records[-1].kind in r.DERIVED_KINDS
        assert derived == (hit == "refresh_missing_some")
    if hit in ("rollover", "seal"):
        assert before.unsealed, "a full segment left plain"
    if hit == "recovery":
        # Part of the repair is durable: the last record is one of its records.
        last = before.records[-1].body
        assert (
            (isinstance(last, r.ToolResult) and last.status == "unknown")
            or (isinstance(last, r.TurnEnded) and last.outcome == "interrupted")
            or before.records[-1].kind in r.DERIVED_KINDS
        ), before.records[-1]
    if hit == "between_turns":
        assert before.open_turn is None and not before.pending and not before.pending_refresh
        assert acked is not None and before.records[-1].seq == acked[0]


def _resume_with_agent(path: Path, before: OnDisk) -> tuple[int | None, set[str]]:
    with Agent.open(path, config=CONFIG) as agent:
        report = agent.report
        assert report.rejected == (), report.rejected
        if report.checkpoint_seq is not None:
            assert report.episode_index == "restored", report.episode_index_rejected
        # The ledger finished the seal of every segment a rollover left plain.
        seals = [a for a in report.ledger_recovery if "'sealed_segment'" in a or "'finished_seal'" in a]
        assert len(seals) == len(before.unsealed), report.ledger_recovery
        for outcome in report.unknown_outcomes:
            result = agent.ledger.get(outcome.recorded_seq)  # type: ignore[arg-type]
            assert isinstance(result.body, r.ToolResult) and result.body.status == "unknown"
            assert result.body.call_id == outcome.call_id
        return report.interrupted_turn, {u.call_id for u in report.unknown_outcomes}


_LEFT_OPEN = re.compile(r"^  turn (\d+) was left open by a crash")
_UNKNOWN = re.compile(r"^  unknown outcome: (\S+) ")
_REJECTED = re.compile(r"^  checkpoint \S+ rejected: ")


def _resume_with_daemon(path: Path, before: OnDisk, turns: int) -> tuple[int | None, set[str]]:
    """Run examples/daemon.py on the ledger, as a user would after a crash; what it reported."""
    proc = subprocess.run(
        [sys.executable, "examples/daemon.py", "--ledger", str(path), "--turns", str(turns),
         "--seed", str(JOB_SEED)],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=ROOT,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert not [x for x in lines if _REJECTED.match(x)], proc.stdout
    interrupted = [int(m.group(1)) for x in lines if (m := _LEFT_OPEN.match(x))]
    assert len(interrupted) <= 1
    return (interrupted[0] if interrupted else None), {m.group(1) for x in lines if (m := _UNKNOWN.match(x))}


def _check_acked(state: OnDisk, acked: tuple[int, str] | None) -> None:
    """No acknowledged record lost: the chain up to the acknowledged seq is intact."""
    if acked is not None:
        seq, digest = acked
        assert len(state.records) > seq, f"acked seq {seq}, ledger has {len(state.records)}"
        assert chain_hash(state.genesis, state.records[: seq + 1]) == digest


def _check_resumed(path: Path, before: OnDisk, acked: tuple[int, str] | None) -> list[r.Record]:
    """What the resume recorded, read back from the ledger."""
    after = _on_disk(path)
    records = after.records
    _check_acked(after, acked)
    assert records[: len(before.records)] == before.records
    if before.open_turn is not None:
        ended = [x for x in records if isinstance(x.body, r.TurnEnded) and x.turn == before.open_turn]
        assert [x.body.outcome for x in ended] == ["interrupted"]  # type: ignore[union-attr]
    results = {x.body.call_id: x for x in records if isinstance(x.body, r.ToolResult)}
    for call_id in before.pending:
        result = results[call_id].body
        assert isinstance(result, r.ToolResult) and result.status == "unknown"
        assert results[call_id].seq > before.records[-1].seq
    assert not after.unsealed, f"segments left unsealed: {after.unsealed}"
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify().ok
    derivations = verify_derivations(records, config=CONFIG.projection)
    assert derivations.ok, derivations.divergence
    assert not derivations.pending_refresh
    _check_wal(path, records)
    return records


@dataclass
class Tally:
    """What the rounds did: the phase each kill hit, the repairs the resumes reported."""

    hits: list[tuple[Plan, str]] = field(default_factory=list)
    held_reports: dict[str, str] = field(default_factory=dict)  # key of a held report call -> phase
    interrupted: int = 0
    unknown: int = 0


@contextmanager
def _noted(where: str) -> Iterator[None]:
    """Name the round in a failing assertion."""
    try:
        yield
    except AssertionError as exc:
        exc.add_note(where)
        raise


def _round(path: Path, plan: Plan, kill: Kill, *, rng: random.Random, acks: Acks, tally: Tally) -> None:
    """Check what a kill left, resume (by Agent.open or by the daemon), check what the resume did."""
    before = _on_disk(path)
    _check_acked(before, acks.last)
    if plan.target != "random":  # a random kill's markers only roughly delimit its phase
        _check_phase(kill, before, acks.last)
    tally.hits.append((plan, kill.hit))
    if kill.hit.startswith("report_") and plan.target != "random":
        # A held kill names the report call; a random one's markers do not.
        tally.held_reports[kill.detail] = kill.hit
    if plan.resume == "agent":
        closed, reported = _resume_with_agent(path, before)
    else:
        closed, reported = _resume_with_daemon(path, before, before.last_turn + rng.randint(1, 3))
    assert closed == before.open_turn
    assert reported == set(before.pending)
    tally.interrupted += closed is not None
    tally.unknown += len(reported)
    _check_resumed(path, before, acks.last)


@pytest.mark.slow
def test_sigkill_in_every_phase_then_resume_to_completion(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    rng = random.Random(SEED)
    acks = Acks()
    tally = Tally()
    for round_no, plan in enumerate(_schedule(rng)):
        with _noted(f"round {round_no}: {plan}"):
            kill = _kill(path, plan, rng, acks)
        with _noted(f"round {round_no}: {plan}, {kill}"):
            _round(path, plan, kill, rng=rng, acks=acks, tally=tally)

    # Every phase was hit, and resumed from by the daemon itself too.
    phases = Counter(hit for _plan, hit in tally.hits)
    by_daemon = Counter(hit for plan, hit in tally.hits if plan.resume == "daemon")
    print("\nkills per phase:", dict(sorted(phases.items())))
    assert not [phase for phase in PHASES if not phases[phase]], tally.hits
    assert not [phase for phase in PHASES if not by_daemon[phase]], tally.hits
    assert tally.interrupted > 0 and tally.unknown > 0, tally

    # The run continues to completion from whatever state the last kill left.
    child = _spawn(path, None)
    child.communicate(timeout=120)
    assert child.returncode == 0
    state, records = fold_ledger(path, CONFIG)
    assert state.runtime.turn is not None and state.runtime.turn.index == TURNS
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify().ok
        agent_id = ledger.agent_id
    assert verify_derivations(records, config=CONFIG.projection).ok
    results = Counter(x.body.call_id for x in records if isinstance(x.body, r.ToolResult))
    intents = [x.body.call_id for x in records if isinstance(x.body, r.ToolIntent)]
    assert all(results[c] == 1 for c in intents), "every intent has exactly one result"
    _check_wal(path, records)
    # Work items were delivered across the crashes.
    assert sum(1 for x in records if isinstance(x.body, r.Brief) and x.body.status == "result") >= 3

    # Every recorded prompt re-renders from the ledger alone (its records and blobs), byte for
    # byte (its hash).
    calls = Counter(x.turn or 0 for x in records if isinstance(x.body, r.PromptRendered))
    with Ledger.open(path, readonly=True) as ledger:
        for turn, count in sorted(calls.items()):
            for call in range(1, count + 1):
                again = prompt_at(
                    records,
                    turn,
                    agent_id=agent_id,
                    call=call,
                    projection=CONFIG.projection,
                    blobs=ledger.get_blob,
                )
                assert again.matches, f"turn {turn} call {call}: {again.mismatch_reasons()}"
    ended = {x.turn for x in records if isinstance(x.body, r.TurnEnded) and x.body.outcome != "interrupted"}
    assert ended <= set(calls), f"turns without a recorded prompt: {sorted(ended - set(calls))}"  # type: ignore[type-var]

    # After an unknown outcome the daemon checked the report's effect, recorded what it
    # found, and ran the step again only when the kill came before the report was written.
    keys = {x.body.idempotency_key for x in records if isinstance(x.body, r.ToolIntent)}
    texts = "\n".join(x.body.text for x in records if isinstance(x.body, r.Message))
    for key, phase in tally.held_reports.items():
        written = phase == "report_written"
        base, _, attempt = key.partition(":retry")
        retry = f"{base}:retry{int(attempt or 0) + 1}"
        assert (retry not in keys) == written, (key, phase)
        found = "present" if written else "absent"
        assert f"({key}) has an unknown outcome; checked its effect: {found} " in texts, (key, phase)

    # Checkpoint debris (temp files, sidecars without their checkpoint) was cleaned up.
    folder = path / "checkpoints"
    debris = [
        p.name for p in folder.iterdir() if p.name.endswith(".tmp") or not p.with_suffix(".ckpt").exists()
    ]
    assert not debris, debris
