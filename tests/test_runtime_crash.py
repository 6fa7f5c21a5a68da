"""Crash recovery of the runtime: SIGKILL the example daemon at random points, reopen, continue.

Each round lets the daemon run a random number of turns, kills it at a random moment
(often inside a tool's side effect, or a checkpoint write), then checks what reopening
promises: no acknowledged record lost, the turn left open closed as interrupted, the
intents without a result reported (and recorded) as unknown outcomes, no idempotency key
executed twice, every executed side effect preceded by its durable intent. Finally the
run continues to completion with a valid chain and derivations that replay.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from holon import records as r
from holon.ledger import Ledger
from holon.projections import apply, initial_state, verify_derivations
from holon.runtime import Agent
from holon.runtime.checkpoints import chain_hash
from tests.ledger_support import child_env
from tests.runtime_crash_child import CONFIG
from tests.runtime_support import ROOT, fold_ledger, load_daemon

ROUNDS = 22
TURNS = 110
SEED = 20261122


def _spawn(path: Path, turns: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.runtime_crash_child", str(path), str(turns)],
        stdout=subprocess.PIPE,
        env=child_env(),
        cwd=ROOT,
    )


def _expected_recovery(path: Path) -> tuple[int | None, set[str]]:
    """What a reopen must repair, from a read-only fold: the open turn, intents without result."""
    state = initial_state(CONFIG.projection)
    pending: dict[str, int] = {}
    with Ledger.open(path, readonly=True) as ledger:
        for record in ledger.read(0):
            state = apply(state, record)
            if isinstance(record.body, r.ToolIntent):
                pending[record.body.call_id] = record.seq
            elif isinstance(record.body, r.ToolResult):
                pending.pop(record.body.call_id, None)
    turn = state.runtime.turn
    open_turn = turn.index if turn is not None and turn.open else None
    return open_turn, set(pending)


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


def test_sigkill_at_random_points_then_resume_to_completion(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    rng = random.Random(SEED)
    acked: tuple[int, str] | None = None
    interrupted = unknown = 0
    for round_no in range(ROUNDS):
        child = _spawn(path, TURNS)
        assert child.stdout is not None
        for _ in range(rng.randint(1, 5)):
            line = child.stdout.readline()
            if not line:
                break
            _turn, seq, digest = line.split()
            acked = (int(seq), digest.decode())
        time.sleep(rng.uniform(0.0, 0.04))
        os.kill(child.pid, signal.SIGKILL)
        for line in child.stdout.read().splitlines():
            _turn, seq, digest = line.split()
            acked = (int(seq), digest.decode())
        child.wait(timeout=60)
        child.stdout.close()
        if acked is None:
            continue  # killed before the first turn ended

        open_turn, pending = _expected_recovery(path)
        with Agent.open(path, config=CONFIG) as agent:
            report = agent.report
            assert report.interrupted_turn == open_turn, f"round {round_no}: {report}"
            assert {u.call_id for u in report.unknown_outcomes} == pending, f"round {round_no}"
            interrupted += open_turn is not None
            unknown += len(pending)
            records = list(agent.ledger.read(0))
            # No acknowledged record lost: the chain up to the acknowledged seq is intact.
            seq, digest = acked
            assert len(records) > seq, f"round {round_no}: acked seq {seq}, ledger has {len(records)}"
            assert chain_hash(agent.ledger.header.genesis.hex(), records[: seq + 1]) == digest
            if open_turn is not None:
                ended = [x for x in records if isinstance(x.body, r.TurnEnded) and x.turn == open_turn]
                assert [x.body.outcome for x in ended] == ["interrupted"]
            for outcome in report.unknown_outcomes:
                result = agent.ledger.get(outcome.recorded_seq)  # type: ignore[arg-type]
                assert isinstance(result.body, r.ToolResult) and result.body.status == "unknown"
                assert result.body.call_id == outcome.call_id
            assert agent.ledger.verify().ok
        _check_wal(path, records)

    assert interrupted > 0 and unknown > 0, (interrupted, unknown)

    # The run continues to completion from whatever state the last kill left.
    child = _spawn(path, TURNS)
    child.communicate(timeout=120)
    assert child.returncode == 0
    state, records = fold_ledger(path, CONFIG)
    assert state.runtime.turn is not None and state.runtime.turn.index == TURNS
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify().ok
    assert verify_derivations(records, config=CONFIG.projection).ok
    results = Counter(x.body.call_id for x in records if isinstance(x.body, r.ToolResult))
    intents = [x.body.call_id for x in records if isinstance(x.body, r.ToolIntent)]
    assert all(results[c] == 1 for c in intents), "every intent has exactly one result"
    _check_wal(path, records)
    # Work items were delivered across the crashes.
    assert sum(1 for x in records if isinstance(x.body, r.Brief) and x.body.status == "result") >= 3
