"""Child process of test_runtime_crash: the example daemon, with its phases marked.

``python -m tests.runtime_crash_child LEDGER TURNS [PHASE OCCURRENCE]`` runs the example
daemon until the ledger holds TURNS turns. It writes lines to stdout (each flushed, so
what the parent reads happened before any kill):

- ``ack <turn> <head seq> <head hash>`` after each turn returns (its records flushed and
  fsynced): an acknowledgement the parent holds it to after a SIGKILL.
- ``hold <phase> <turn> <detail>``: with PHASE and OCCURRENCE given, the child stops at
  the OCCURRENCE-th point of PHASE (see :data:`PHASES`) and sleeps there until the
  parent kills it, so the kill lands in that phase for certain.
- ``enter <phase>`` / ``leave <phase>``: with PHASE ``random``, every phase is entered
  with a marker and slowed down by a small random delay, and the parent kills at a
  random moment; the markers say which phase the kill landed in.

Without PHASE the daemon just runs (no markers, no delays). The points of each phase are
reached by wrapping the runtime's and the ledger's own functions (monkeypatching, in
this process only); nothing is simulated except in the ``refresh_missing_*``
and ``recovery`` phases, whose hold first makes the records appended so far durable —
the state a segment rollover at that record, or ``fsync="always"``, leaves on disk.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import holon.records as r
from holon.context import Prompt
from holon.ledger import Ledger, segments, writer
from holon.projections import derived_after
from holon.runtime import Agent, AgentConfig, Turn, checkpoints
from holon.runtime.core import AgentCore
from tests.runtime_support import load_daemon

#: The config both the child and the parent use: a checkpoint every 4 turns and 16 KiB
#: segments (a rollover every few turns), so kills land in checkpoint writes and seals.
CONFIG = AgentConfig(checkpoint_every=4, checkpoints_kept=2, segment_bytes=16 << 10)
#: The example daemon's job (its --seed).
JOB_SEED: Final = 11

#: Where the child can be held, in the order a turn reaches them:
PHASES: Final = (
    # inside the flush at turn.context(): the turn's records are still buffered
    "context_flush",
    # after turn.context() returned: the model call
    "model_call",
    # a tool's side effect ran (logged to .effects.log), its result is not recorded
    "tool_effect",
    # the report step's intent is durable, reports/<item>.md not written yet
    "report_unwritten",
    # the report step wrote reports/<item>.md, its result is not recorded
    "report_written",
    # turn_ended appended with none, some or all of its derived records, all still buffered
    "turn_end",
    # turn_ended durable, none of its refresh's derived records appended
    "refresh_missing_all",
    # turn_ended and some of its derived records durable, the others not appended
    "refresh_missing_some",
    # while a checkpoint's files are written (before or after each rename)
    "checkpoint",
    # a segment rollover: the full segment is durable and plain, the next one created
    "rollover",
    # the sealing thread: before compressing, or with the .zst durable and the plain file not removed
    "seal",
    # after a turn was acknowledged, before the next one starts
    "between_turns",
    # resuming a ledger a crash left open: Agent.open appended some of its repair
    # records (unknown outcomes, the interrupted turn_ended, its derived records)
    "recovery",
)
TOOL_SLEEP_S: Final = 0.015  # in random rounds: kills often land inside a side effect
PHASE_SLEEP_S: Final = 0.004  # in random rounds: the most a phase is slowed down by
HOLD_S: Final = 60.0  # a held child waits this long for its kill


class Phases:
    """The phase markers of this process: holds the target point, or slows phases down."""

    def __init__(self, target: str | None, occurrence: int) -> None:
        self.target = target
        self.occurrence = occurrence
        self.counts: dict[str, int] = dict.fromkeys(PHASES, 0)
        self.agent: Agent | None = None
        self.rng = random.Random(occurrence)
        self._lock = threading.Lock()

    def say(self, line: str) -> None:
        with self._lock:  # the sealing thread writes too
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def at(self, phase: str, detail: str = "-", *, before_hold: Callable[[], None] | None = None) -> None:
        """A point of ``phase``: hold here if it is the target, else (random rounds) slow down."""
        if self.target is None:
            return
        if self.target == "random":
            if phase.startswith("refresh_missing"):
                return  # not a window of its own without the flush a hold makes
            self.say(f"enter {phase}")
            time.sleep(TOOL_SLEEP_S if phase == "tool_effect" else self.rng.uniform(0, PHASE_SLEEP_S))
            self.say(f"leave {phase}")
            return
        if phase != self.target:
            return
        self.counts[phase] += 1
        if self.counts[phase] != self.occurrence:
            return
        if before_hold is not None:
            before_hold()
        turn = self.agent.current_turn if self.agent is not None else None
        self.say(f"hold {phase} {turn.index if turn is not None else '-'} {detail}")
        time.sleep(HOLD_S)
        raise SystemExit(f"held in {phase} for {HOLD_S} s and not killed")


def _install(phases: Phases, daemon: ModuleType) -> None:
    """Wrap the functions at whose points the phases are marked."""
    state = threading.local()

    real_open = Agent.open.__func__  # type: ignore[attr-defined]

    def open_(cls: type[Agent], *args: Any, **kwargs: Any) -> Agent:
        state.opening = True
        try:
            agent: Agent = real_open(cls, *args, **kwargs)
        finally:
            state.opening = False
        phases.agent = agent
        return agent

    Agent.open = classmethod(open_)  # type: ignore[assignment,method-assign]

    real_context = Turn.context

    def context(self: Turn) -> Prompt:
        rendered = self.prompts_rendered
        state.in_context = True
        try:
            prompt = real_context(self)
        finally:
            state.in_context = False
        if self.prompts_rendered > rendered:
            phases.at("model_call", f"call={self.prompts_rendered}")
        return prompt

    Turn.context = context  # type: ignore[method-assign]

    real_flush = Ledger.flush

    def flush(self: Ledger) -> None:
        if getattr(state, "in_context", False):
            phases.at("context_flush")
        real_flush(self)

    Ledger.flush = flush  # type: ignore[method-assign]

    real_execute = daemon.Tools.execute

    def execute(self: Any, name: str, args: dict[str, Any], key: str | None) -> tuple[str, int]:
        parts = (key or "").split(":")
        report = (
            len(parts) >= 2 and parts[1] == "report" and (len(parts) == 2 or parts[2].startswith("retry"))
        )
        if report:
            phases.at("report_unwritten", str(key))
        result: tuple[str, int] = real_execute(self, name, args, key)
        phases.at("report_written" if report else "tool_effect", str(key))
        return result

    daemon.Tools.execute = execute

    # turn_ended and the derived records of its refresh, as the runtime appends them.
    real_append = AgentCore.append
    refresh_left = 0  # derived records of the running post-turn refresh not appended yet

    def append(self: AgentCore, body: r.Body, turn: int | None, *, ts: int | None = None) -> r.Record:
        nonlocal refresh_left
        stored = real_append(self, body, turn, ts=ts)
        if getattr(state, "opening", False):
            # Agent.open repairing what a crash left: hold with what it appended so far
            # durable (the state a rollover at this record would leave on disk).
            phases.at("recovery", f"{stored.kind}@{stored.seq}", before_hold=self.ledger.flush)
            return stored
        if isinstance(body, r.TurnEnded):
            refresh_left = len(derived_after(self.state, stored))
        elif stored.kind in r.DERIVED_KINDS and refresh_left:
            refresh_left -= 1
        else:
            return stored
        left = refresh_left
        phases.at("turn_end", f"{stored.kind}@{stored.seq} left={left}")
        if left:
            phase = "refresh_missing_all" if isinstance(body, r.TurnEnded) else "refresh_missing_some"
            phases.at(phase, f"{stored.kind}@{stored.seq} left={left}", before_hold=self.ledger.flush)
        return stored

    AgentCore.append = append  # type: ignore[method-assign]

    # Checkpoint files: each is written to a temp file, fsynced and renamed into place.
    real_os = checkpoints.os

    class CheckpointOs:
        """The ``os`` the checkpoint module sees: ``replace`` (the rename) marked."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real_os, name)

        def replace(self, src: Path, dst: Path) -> None:
            phases.at("checkpoint", f"before-rename:{dst.name}")
            real_os.replace(src, dst)
            phases.at("checkpoint", f"renamed:{dst.name}")

    checkpoints.os = CheckpointOs()  # type: ignore[assignment]

    # Segment rollover (the main thread) and seal (the sealing thread).
    real_rollover = writer.Writer._rollover
    real_create = writer.create_segment

    def rollover(self: writer.Writer) -> None:
        state.rolling = True
        try:
            real_rollover(self)
        finally:
            state.rolling = False

    def create_segment(seg_dir: Path, start_seq: int, prev_hash: bytes) -> Path:
        path = real_create(seg_dir, start_seq, prev_hash)
        if getattr(state, "rolling", False):
            phases.at("rollover", path.name)
        return path

    writer.Writer._rollover = rollover  # type: ignore[method-assign]
    writer.create_segment = create_segment

    real_seal = writer.seal_segment
    real_write_atomic = segments.write_atomic

    def seal_segment(plain: Path, data: bytes) -> Path:
        phases.at("seal", f"start:{plain.name}")
        return real_seal(plain, data)

    def write_atomic(path: Path, data: bytes, **options: Any) -> None:
        real_write_atomic(path, data, **options)
        if path.suffix == ".zst" and threading.current_thread().name.startswith("holon-seal-"):
            phases.at("seal", f"sealed-not-unlinked:{path.name}")

    writer.seal_segment = seal_segment
    segments.write_atomic = write_atomic


def main(ledger: Path, turns: int, target: str | None, occurrence: int) -> None:
    if target is not None and target != "random" and target not in PHASES:
        raise SystemExit(f"unknown phase {target!r}; one of: random, {', '.join(PHASES)}")
    daemon = load_daemon()
    phases = Phases(target, occurrence)
    _install(phases, daemon)

    def ack(agent: Agent, line: Any) -> None:
        seq, digest = agent.ledger.head()
        phases.say(f"ack {line.turn} {seq} {digest}")
        phases.at("between_turns")

    daemon.run(ledger, turns=turns, seed=JOB_SEED, quiet=True, on_turn=ack, config=CONFIG)


if __name__ == "__main__":
    argv = sys.argv[1:]
    main(
        Path(argv[0]),
        int(argv[1]),
        argv[2] if len(argv) > 2 else None,
        int(argv[3]) if len(argv) > 3 else 1,
    )
