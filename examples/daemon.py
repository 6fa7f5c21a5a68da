"""A long-running agent daemon on holon, with a scripted "model" and real local tools.

Run it from the repository root with the venv ``make demo`` creates (no API key, no
network)::

    .venv/bin/python examples/daemon.py                      # 200 turns into .demo/ledger
    .venv/bin/python examples/daemon.py --turns 400          # continue that ledger to 400 turns
    .venv/bin/python examples/daemon.py --fresh --turns 400  # start over, longer
    .venv/bin/python examples/daemon.py --fresh --kill-at-turn 13  # kill -9 itself in turn 13's report step
    .venv/bin/python examples/daemon.py                      # after kill -9: resumes where it stopped

A ledger that already holds ``--turns`` turns is left as it is (the run says so).
``--fresh`` removes only what an earlier run made: it refuses a directory that is not
this example's ledger, one a process is writing to, and a workspace holding other files.

The job: inventory a generated source tree, module by module. Each module is a work
item with a plan (survey, read, count, checksum, load data, aggregate, sometimes an
operator review wait or a background build, report, verify, deliver). The "model" is a
deterministic script that reads the agent's working memory (active work item, plan,
open waits, running tasks) to decide its next action, so it continues correctly after
being killed at any point. Tools really run: read a file, list a directory, and run a
shell command in the workspace (a directory next to the ledger).

Every tool call goes through the write-ahead log with an idempotency key
(``<work item>:<step>``): a step redone after a crash gets its recorded result back
instead of running twice; a call whose outcome was lost in the crash comes back as
``unknown``. The script then checks the step's effect — whether ``reports/<item>.md``
already holds the report the step would write — and runs the step again under a new key
(``<key>:retry1``) only when it is not in place; a step that only reads is run again.
It records what it decided as a message.

When it verifies a report, it checks the report's total value against the data the load
step read. That output went to the blob store, so the prompt shows only its preview and
a placeholder once the history needed the room (``[cleared: 4,769 bytes — restore with ref
blob:…]``): it restores the data with the ``holon_get`` recall tool, as a model would
(``turn.recall``), and records what it found.

Per turn it prints prompt tokens by stability class (Stable / AgentScoped /
TurnScoped), the working-memory revision and compression epoch, whether the cache key
changed, and episodes finalized; at the end a summary table.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from holon.context import Prompt
from holon.errors import HolonError, LedgerCorrupt, LedgerLocked, NotALedger, UsageError
from holon.ledger import HEADER_NAME, Ledger
from holon.records import PlanStep, SystemPolicy, ToolDefinition
from holon.runtime import RECALL_TOOLS, Agent, AgentConfig, ToolCall, Turn

#: The agent id of the example's ledger.
AGENT_ID = "inventory-agent"
#: Where the ledger goes unless --ledger says otherwise (`make demo` uses it too).
DEFAULT_LEDGER = Path(".demo/ledger")
#: What a run puts in its workspace; ``--fresh`` removes a workspace holding nothing else.
WORKSPACE_ENTRIES = frozenset({"src", "reports", ".effects.log"})

#: Scripted time: every record is one second after the previous one, from this instant.
START_TS = 1_700_000_000_000
STEP_MS = 1_000

MODULES = (
    "ledger", "parser", "scheduler", "billing", "gateway", "search", "auth", "mailer",
    "metrics", "storage", "router", "cache", "importer", "exporter", "planner", "notifier",
)  # fmt: skip
WORDS = (
    "alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "token", "frame", "chain",
    "hash", "seq", "blob", "turn", "plan", "step", "work", "wait", "task", "epoch",
)  # fmt: skip

POLICY = SystemPolicy(
    text=(
        "You are an inventory agent. Work through the queued modules one work item at a time: "
        "follow the plan, use the tools, record decisions, and deliver a report per module. "
        "Never re-run a tool call whose outcome is unknown without checking its effects first."
    ),
    tools=(
        ToolDefinition(
            name="read_file",
            description="Read a text file in the workspace.",
            parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        ),
        ToolDefinition(
            name="list_dir",
            description="List a directory of the workspace (sorted; directories end in /).",
            parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        ),
        ToolDefinition(
            name="shell",
            description="Run a POSIX shell command in the workspace; returns its output and exit code.",
            parameters={"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        ),
        *RECALL_TOOLS,
    ),
)


# --------------------------------------------------------------------------- workspace and tools


def workspace_for(ledger: Path) -> Path:
    """The tools' workspace: a directory next to the ledger."""
    # Normalised first: `--ledger .` or `..` names a directory whose name is not its last part.
    whole = Path(os.path.abspath(ledger))
    if not whole.name:
        raise UsageError(f"--ledger {ledger}: the ledger cannot be the root directory; pass a new directory")
    return whole.with_name(whole.name + "-workspace")


def remove_earlier_run(ledger: Path) -> None:
    """``--fresh``: remove the ledger and the workspace an earlier run made, and nothing else.

    ``--fresh --ledger ~/notes`` must not delete ``~/notes``, nor a ledger another agent
    (or a running copy of this example) writes: those are refused with a UsageError,
    leaving everything in place.
    """
    ws = workspace_for(ledger)
    if ledger.is_symlink() or (ledger.exists() and not ledger.is_dir()):
        raise UsageError(f"--fresh would remove {ledger}, which is not a directory; pass a ledger directory")
    if ledger.is_dir() and any(ledger.iterdir()):
        if not (ledger / HEADER_NAME).is_file():
            raise UsageError(
                f"--fresh would remove {ledger}, which is not a holon ledger (it has no {HEADER_NAME}); "
                "pass --ledger a new path, or the ledger an earlier run of this example made"
            )
        try:
            # The writer lock says whether a process writes to it (the lock is released at once).
            with Ledger.open(ledger) as earlier:
                owner = earlier.agent_id
        except LedgerLocked as exc:
            raise UsageError(
                f"--fresh would remove {ledger} while "
                f"{f'process {exc.pid}' if exc.pid is not None else 'another process'} writes to it; "
                "stop that process first"
            ) from None
        except LedgerCorrupt:
            owner = AGENT_ID  # a damaged run of this example: starting over is what --fresh is for
        if owner != AGENT_ID:
            raise UsageError(
                f"--fresh would remove {ledger}, the ledger of agent {owner!r}, not this example's "
                f"{AGENT_ID!r}; pass --ledger a new path"
            )
    if ws.is_symlink() or (ws.exists() and not ws.is_dir()):
        raise UsageError(f"--fresh would remove the workspace {ws}, which is not a directory; move it away")
    if ws.is_dir():
        others = sorted(p.name for p in ws.iterdir() if p.name not in WORKSPACE_ENTRIES)
        if others:
            raise UsageError(
                f"--fresh would remove the workspace {ws}, which holds files this example did not "
                f"make ({', '.join(others[:5])}); move them away or pass --ledger another path"
            )
        shutil.rmtree(ws)
    if ledger.is_dir():
        shutil.rmtree(ledger)


def module_of(seed: int, k: int) -> str:
    """The module work item ``W<k>`` inventories."""
    return MODULES[(k - 1 + seed) % len(MODULES)] + ("" if k <= len(MODULES) else str(k))


def prepare_workspace(ws: Path, seed: int, k: int) -> None:
    """Create module ``k``'s source files (deterministic from the seed; kept if present)."""
    mod = ws / "src" / module_of(seed, k)
    if mod.exists():
        return
    rng = random.Random(f"{seed}:{k}")
    tmp = mod.with_name(mod.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for part in (1, 2, 3):
        lines = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) for _ in range(rng.randint(5, 14))
        ]
        (tmp / f"part{part}.txt").write_text("\n".join(lines) + "\n")
    rows = [f"{rng.choice(WORDS)}-{i},{rng.randint(1, 999)},{rng.choice(WORDS)}" for i in range(260)]
    (tmp / "data.csv").write_text("name,value,tag\n" + "\n".join(rows) + "\n")
    tmp.rename(mod)


@dataclass
class Tools:
    """The real local tools. Every execution is logged to ``.effects.log`` by idempotency key."""

    ws: Path
    executed: int = 0
    #: ``--kill-at-turn``: SIGKILL the process once a tool of this turn (or a later one) ran.
    kill_at_turn: int | None = None
    #: The turn being run (set by :func:`scripted_turn`).
    turn: int = 0

    def execute(self, name: str, args: dict[str, Any], key: str | None) -> tuple[str, int]:
        result = self._execute(name, args, key)
        if self.kill_at_turn is not None and self.turn >= self.kill_at_turn:
            # The effect happened and its result is not recorded yet: the moment a crash
            # leaves an outcome unknown. A timer kill rarely lands there (a tool runs for
            # a few milliseconds of a turn), and on a busy machine lands before the run began.
            print(
                f"daemon.py: --kill-at-turn {self.kill_at_turn}: {key} ran in turn {self.turn}; "
                "killing this process (SIGKILL) before its result is recorded",
                file=sys.stderr,
            )
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    def _execute(self, name: str, args: dict[str, Any], key: str | None) -> tuple[str, int]:
        with (self.ws / ".effects.log").open("a") as log:
            log.write(f"{key}\n")
        self.executed += 1
        if name == "read_file":
            path = self.ws / args["path"]
            try:
                return path.read_text(), 0
            except OSError as exc:
                return f"{type(exc).__name__}: {exc.strerror}", 1
        if name == "list_dir":
            path = self.ws / args["path"]
            if not path.is_dir():
                return f"not a directory: {args['path']}", 1
            names = sorted(
                p.name + ("/" if p.is_dir() else "") for p in path.iterdir() if not p.name.startswith(".")
            )
            return "\n".join(names), 0
        if name == "shell":
            proc = subprocess.run(
                ["/bin/sh", "-c", args["cmd"]],
                check=False,
                cwd=self.ws,
                capture_output=True,
                text=True,
                timeout=20,
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            )
            return proc.stdout + proc.stderr, proc.returncode
        return f"unknown tool {name}", 127


# --------------------------------------------------------------------------- the scripted model


def plan_for(seed: int, k: int) -> tuple[PlanStep, ...]:
    """The plan of work item ``W<k>``: tool steps, and some review waits and builds."""
    steps = [
        ("survey", "list the module's files"),
        ("read1", "read part1.txt"),
        ("read2", "read part2.txt"),
        ("count", "count lines of every part"),
        ("checksum", "checksum every part and record the fingerprint"),
        ("load", "load data.csv (large: goes to the blob store)"),
        ("aggregate", "sum the value column"),
    ]
    if k % 3 == 1:
        steps.append(("review", "ask the operator to review the numbers"))
    if k % 4 == 2:
        steps.append(("build", "start a background build of the module"))
    steps += [
        ("report", "write reports/<item>.md"),
        ("verify", "read the report back"),
        ("deliver", "send the result brief"),
    ]
    return tuple(
        PlanStep(id=s, text=t, status="in_progress" if i == 0 else "pending")
        for i, (s, t) in enumerate(steps)
    )


def _report_text(mod: str, wid: str) -> str:
    """The shell commands that print work item ``wid``'s report (what the report step writes)."""
    src = f"src/{mod}"
    return (
        f"echo '# {wid}: {mod}'; wc -l {src}/*.txt | tail -n 1; "
        f"awk -F, 'NR>1 {{s+=$2}} END {{print \"total value\", s}}' {src}/data.csv"
    )


def tool_for(step: str, mod: str, wid: str) -> tuple[str, dict[str, Any]] | None:
    """The tool call a plan step makes (``None`` for steps without one)."""
    src = f"src/{mod}"
    return {
        "survey": ("list_dir", {"path": src}),
        "read1": ("read_file", {"path": f"{src}/part1.txt"}),
        "read2": ("read_file", {"path": f"{src}/part2.txt"}),
        "count": ("shell", {"cmd": f"wc -l {src}/*.txt | sort"}),
        "checksum": ("shell", {"cmd": f"sha256sum {src}/*.txt | cut -c1-16 | sort"}),
        "load": ("shell", {"cmd": f"cat {src}/data.csv"}),
        "aggregate": ("shell", {"cmd": f"awk -F, 'NR>1 {{s+=$2}} END {{print s}}' {src}/data.csv"}),
        "report": (
            "shell",
            {
                "cmd": f"mkdir -p reports && {{ {_report_text(mod, wid)}; }} > reports/{wid}.md "
                f"&& echo wrote reports/{wid}.md"
            },
        ),
        "verify": ("read_file", {"path": f"reports/{wid}.md"}),
    }.get(step)


def effect_check(step: str, mod: str, wid: str) -> str | None:
    """A read-only command telling whether a step's effect is in place (``None``: the step only reads).

    It prints ``present <file>`` when the file the step writes holds exactly what the
    step would write, else ``absent <file>``.
    """
    if step != "report":
        return None
    out = f"reports/{wid}.md"
    return (
        f'if [ -f {out} ] && [ "$({_report_text(mod, wid)})" = "$(cat {out})" ]; '
        f"then echo present {out}; else echo absent {out}; fi"
    )


def _advance(steps: tuple[PlanStep, ...], done: str) -> list[PlanStep]:
    out: list[PlanStep] = []
    started = False
    for s in steps:
        if s.id == done:
            out.append(PlanStep(id=s.id, text=s.text, status="done"))
        elif not started and s.status == "pending":
            out.append(PlanStep(id=s.id, text=s.text, status="in_progress"))
            started = True
        else:
            out.append(s)
    return out


def _item_number(agent: Agent) -> int:
    st = agent.state
    ids = [w for w in st.work_items] + [w.id for w in st.finished_work]
    return max((int(w[1:]) for w in ids if w[1:].isdigit()), default=0)


def _run(turn: Turn, tools: Tools, name: str, args: dict[str, Any], key: str) -> ToolCall:
    """One call through the WAL: its recorded result when ``key`` has one, else run now."""
    call = turn.tool(name, args, idempotency_key=key)
    if not call.replayed:
        call.run(lambda: tools.execute(name, args, key))
    assert call.result is not None
    return call


def _effect_in_place(turn: Turn, tools: Tools, check: str, key: str) -> tuple[bool, str]:
    """Run a step's read-only effect check; (whether the effect is in place, the check's output).

    The check only reads, so when its own outcome is unknown it is simply run again.
    """
    attempt = 0
    while True:
        call = _run(turn, tools, "shell", {"cmd": check}, f"{key}:check{attempt}")
        assert call.result is not None
        if call.result.status != "unknown":
            output = call.output.strip()
            return output.startswith("present "), output
        turn.record_message(f"check {call.call_id} has an unknown outcome too; it only reads: checking again")
        attempt += 1


def _run_tool(
    turn: Turn, tools: Tools, name: str, args: dict[str, Any], key: str, *, check: str | None = None
) -> tuple[str, str, str | None]:
    """Run one step's tool through the WAL; returns (status, output, note).

    A result recorded as ``unknown`` (the process died during the call) is never
    re-executed blindly. A step with an effect (``check``: a read-only command that says
    whether the effect is in place) is checked first: when its effect is in place the
    step is not run again, otherwise it is retried under a new key. A step that only
    reads is retried under a new key (its output was lost). The decision is recorded as
    a message. ``note`` is ``"replayed"`` when the result is the one recorded under the
    key, ``"retried"`` when it ran again under a new key, ``"checked"`` when it was not run
    again because its effect is in place.
    """
    attempt = 0
    while True:
        attempt_key = key if attempt == 0 else f"{key}:retry{attempt}"
        call = _run(turn, tools, name, args, attempt_key)
        assert call.result is not None
        if call.result.status != "unknown":
            note = "replayed" if call.replayed else ("retried" if attempt else None)
            return call.result.status, call.output, note
        retry_key = f"{key}:retry{attempt + 1}"
        lost = f"call {call.call_id} ({attempt_key}) has an unknown outcome"
        if check is None:
            turn.record_message(f"{lost}; it only reads: running it again as {retry_key}")
        else:
            in_place, found = _effect_in_place(turn, tools, check, attempt_key)
            if in_place:
                turn.record_message(f"{lost}; checked its effect: {found}: not running it again")
                return "ok", found, "checked"
            turn.record_message(f"{lost}; checked its effect: {found}: running it again as {retry_key}")
        attempt += 1


def _shown_result(turn: Turn, key: str) -> tuple[str | None, str | None]:
    """The output of the call under ``key`` as the prompt shows it: ``(output, None)`` when
    the prompt holds all of it, ``(None, ref)`` when it holds a placeholder naming the ref
    that restores it (a cleared result, or a blob-stored one shown as a preview),
    ``(None, None)`` when the prompt does not show the call at all."""
    result = turn.agent.recorded_call(key)
    prompt = turn.prompt
    if result is None or prompt is None:
        return None, None
    # A cleared result keeps its header line (`[ledger:N] result <call id> ok:`), then the
    # placeholder (after a preview, for one over the size cap).
    cleared = re.search(
        rf"\] result {re.escape(result.call_id)} [^\n]*:\n(?:(?!\[ledger:\d+\] )[^\n]*\n)*?"
        r"\[cleared: [\d,]+ bytes — restore with ref ((?:ledger|blob):[0-9a-f]+)\]",
        prompt.text,
    )
    if cleared is not None:
        return None, cleared.group(1)
    if result.blob is not None and f"restore with ref blob:{result.blob.hash}]" in prompt.text:
        return None, f"blob:{result.blob.hash}"
    output = turn.agent.output_of(result)
    return (output, None) if output and output in prompt.text else (None, None)


def _verify_total(turn: Turn, report: str, wid: str) -> str | None:
    """Check the report's total value against the data the load step read, as a model would:
    that output is large, so the prompt shows only its preview (or, later, a cleared
    placeholder); restore it with the holon_get recall tool and add up the value column.
    Returns a note for the turn line."""
    data, ref = _shown_result(turn, f"{wid}:load")
    if data is None and ref is not None:
        call = turn.recall("holon_get", {"ref": ref})
        data = call.output if call.result is not None and call.result.status == "ok" else None
    if data is None:
        return None
    rows = [line.split(",") for line in data.splitlines()[1:] if line.count(",") == 2]
    expected = str(sum(int(row[1]) for row in rows if row[1].isdigit()))
    totals = [line.split()[-1] for line in report.splitlines() if line.startswith("total value")]
    reported = totals[0] if totals else None
    verdict = "matches" if reported == expected else f"does not match {expected}"
    source = f"restored with holon_get {ref}" if ref is not None else "shown in the prompt"
    turn.record_message(
        f"verify: the report's total value {reported} {verdict}, the sum of the {len(rows)} rows "
        f"the load step read ({source})"
    )
    return "recalled" if ref is not None else None


@dataclass
class TurnLine:
    """What one turn printed."""

    turn: int
    action: str
    stable: int
    agent_scoped: int
    turn_scoped: int
    revision: int
    epoch: int
    key_changed: bool
    episodes: int
    outcome: str
    prompt: Prompt


@dataclass
class RunStats:
    """Totals for the summary table."""

    lines: list[TurnLine] = field(default_factory=list)
    replayed: int = 0
    executed: int = 0
    started: float = field(default_factory=time.perf_counter)


def scripted_turn(agent: Agent, tools: Tools, seed: int, previous_key: str | None) -> TurnLine:
    """One turn of the scripted model: pick the trigger, render, act, update the plan."""
    st = agent.state
    index = agent.next_turn_index
    tools.turn = index
    wait = next(iter(st.waits.values()), None)
    due = next((t for t in st.tasks.values() if int(t.id.rsplit("due", 1)[1]) <= index), None)
    if wait is not None:
        trigger, text, role = (
            "operator",
            f"reviewed {wait.work_item_id}: numbers approved",
            "operator",
        )
    elif due is not None:
        trigger, text, role = "task", f"background task {due.id} finished", "channel"
    elif index % 4 == 0 and st.active_work_item is not None:
        # The operator asks for a status now and then: a turn that changes nothing in
        # working memory, so its cacheable prefix (and cache key) is the previous one's.
        trigger, text, role = "operator", "status?", "operator"
    else:
        trigger, text, role = "timer", None, "user"
    action = trigger
    status_only = trigger == "operator" and wait is None
    with agent.turn(input=text, trigger=trigger, role=role) as turn:
        if wait is not None:
            turn.resolve_wait(wait.id, detail="approved")
        if due is not None:
            mod = due.description.split()[-1]
            turn.task_result(
                due.id, status="ok", summary=f"build of {mod} passed", output=f"built {mod}: 0 errors\n"
            )
        prompt = turn.context()
        active = agent.state.active_work_item
        if status_only and active is not None:
            plan = agent.state.plan_of(active.id)
            done = sum(1 for s in plan.steps if s.status == "done") if plan is not None else 0
            total = len(plan.steps) if plan is not None else 0
            turn.record_message(f"{active.id}: {done}/{total} steps done; continuing")
            action = f"{active.id} status"
        elif active is None:
            k = _item_number(agent) + 1
            wid, mod = f"W{k}", module_of(seed, k)
            prepare_workspace(tools.ws, seed, k)
            turn.add_work_item(
                wid,
                f"inventory module {mod}: line counts, checksums, value total, report",
                state="active",
                delivery_target=f"reports/{wid}.md",
                scope_constraints=(f"only read src/{mod}", "write only under reports/"),
            )
            turn.record_plan(plan_for(seed, k), work_item_id=wid)
            turn.record_message(f"starting {wid} ({mod})")
            action = f"{wid} plan"
        else:
            wid = active.id
            k = int(wid[1:])
            mod = module_of(seed, k)
            prepare_workspace(tools.ws, seed, k)
            plan = agent.state.plan_of(wid)
            steps = plan.steps if plan is not None else ()
            if not steps:
                turn.record_plan(plan_for(seed, k), work_item_id=wid)
                steps = plan_for(seed, k)
            step = next((s for s in steps if s.status not in ("done", "skipped")), None)
            action = f"{wid} {step.id if step else 'done'}"
            if step is None or step.id == "deliver":
                turn.record_brief(
                    "result", f"{wid}: report for {mod} delivered to reports/{wid}.md", work_item_id=wid
                )
                turn.record_plan(
                    [PlanStep(id=s.id, text=s.text, status="done") for s in steps], work_item_id=wid
                )
                turn.finish_work(wid, reason="report delivered")
            elif step.id == "review":
                if wait is None:
                    turn.wait_for(
                        f"review-{wid}", f"operator review of {wid}", work_item_id=wid, resume_hint="approve"
                    )
                    turn.record_message(f"asked the operator to review {wid}")
                else:
                    turn.record_plan(_advance(steps, "review"), work_item_id=wid)
            elif step.id == "build":
                ids = [t.id for t in agent.state.tasks.values()] + [t.id for t in agent.state.finished_tasks]
                if not any(t.startswith(f"T{k}-") for t in ids):
                    turn.start_task(f"T{k}-due{index + 2}", f"build module {mod}", work_item_id=wid)
                turn.record_plan(_advance(steps, "build"), work_item_id=wid)
            else:
                call = tool_for(step.id, mod, wid)
                assert call is not None
                status, output, note = _run_tool(
                    turn, tools, call[0], call[1], f"{wid}:{step.id}", check=effect_check(step.id, mod, wid)
                )
                turn.messages()  # the model's second call sees the tool round appended
                first = output.strip().splitlines()[:1]
                turn.record_message(
                    f"{step.id}: {status}, {len(output)} chars{': ' + first[0] if first else ''}"
                )
                if step.id == "verify" and status == "ok":
                    recalled = _verify_total(turn, output, wid)
                    if recalled is not None:
                        note = f"{note}, {recalled}" if note is not None else recalled
                if step.id == "checksum":
                    turn.record_decision(
                        f"{wid}-fp", f"fingerprint of {mod}: {output.split()[0] if output else '-'}"
                    )
                turn.record_plan(_advance(steps, step.id), work_item_id=wid)
                if note is not None:
                    action += f" ({note})"
    summary = turn.summary
    assert summary is not None
    tokens = {"stable": 0, "agent": 0, "turn": 0}
    for section in prompt.sections:
        tokens[section.stability] += section.tokens
    return TurnLine(
        turn=index,
        action=action,
        stable=tokens["stable"],
        agent_scoped=tokens["agent"],
        turn_scoped=tokens["turn"],
        revision=prompt.identity.working_memory_revision,
        epoch=prompt.identity.compression_epoch,
        key_changed=prompt.cache_key != previous_key,
        episodes=len(summary.episodes),
        outcome=summary.outcome,
        prompt=prompt,
    )


# --------------------------------------------------------------------------- driver


class TickClock:
    """Deterministic time: each reading is ``STEP_MS`` after the previous one."""

    def __init__(self, start: int = START_TS) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += STEP_MS
        return self.now


def run(
    ledger: Path,
    *,
    turns: int,
    seed: int = 7,
    fresh: bool = False,
    quiet: bool = False,
    out: Callable[[str], None] = print,
    on_turn: Callable[[Agent, TurnLine], None] | None = None,
    config: AgentConfig | None = None,
    kill_at_turn: int | None = None,
) -> RunStats:
    """Drive the agent until the ledger holds ``turns`` turns; returns the run's stats.

    ``kill_at_turn``: SIGKILL this process right after the first tool of that turn (or of
    the first later turn that runs one) ran, before its result is recorded.
    """
    ws = workspace_for(ledger)
    if fresh:
        remove_earlier_run(ledger)
    clock = TickClock()
    config = config or AgentConfig(checkpoint_every=50)
    stats = RunStats()
    tools = Tools(ws, kill_at_turn=kill_at_turn)
    with Agent.open(ledger, agent_id=AGENT_ID, config=config, clock=clock, policy=POLICY) as agent:
        # After the open, so a path that is no ledger leaves no workspace behind.
        ws.mkdir(parents=True, exist_ok=True)
        clock.now = max(clock.now, agent.last_ts)
        report = agent.report
        if not quiet:
            where = "created" if report.created else f"resumed at seq {agent.seq}"
            via = (
                f"checkpoint seq {report.checkpoint_seq}"
                if report.checkpoint_seq is not None
                else "full fold"
            )
            out(f"ledger {ledger}: {where} ({via}, {report.folded} records folded)")
            for name, why in report.rejected:
                out(f"  checkpoint {name} rejected: {why.reason}: {why.detail}")
            if report.interrupted_turn is not None:
                out(f"  turn {report.interrupted_turn} was left open by a crash: closed as interrupted")
            for unknown in report.unknown_outcomes:
                out(f"  unknown outcome: {unknown.call_id} {unknown.tool} (key {unknown.idempotency_key})")
        if agent.next_turn_index > turns:
            # Run again after it finished (`make demo`, then this script): a table of no
            # turns and a summary of zeros would look like a failure.
            if not quiet:
                out(
                    f"nothing to run: the ledger holds {agent.next_turn_index - 1} turns (--turns {turns}); "
                    f"pass --turns {agent.next_turn_index - 1 + 200} to continue it, or --fresh to start over"
                )
            return stats
        if not quiet:
            out(
                f"{'turn':>5} {'action':<22} {'stable':>6} {'agent':>6} {'turn':>6} {'rev':>4} {'ep':>3} "
                "key   episodes"
            )
        last = agent.state.last_prompt
        previous_key = last.prompt.cache_key if last is not None else None
        while agent.next_turn_index <= turns:
            line = scripted_turn(agent, tools, seed, previous_key)
            stats.lines.append(line)
            last = agent.state.last_prompt
            previous_key = last.prompt.cache_key if last is not None else None
            if on_turn is not None:
                on_turn(agent, line)
            if not quiet:
                out(
                    f"{line.turn:>5} {line.action:<22} {line.stable:>6} {line.agent_scoped:>6} "
                    f"{line.turn_scoped:>6} {line.revision:>4} {line.epoch:>3} "
                    f"{'NEW ' if line.key_changed else 'same'}  "
                    f"{'+' + str(line.episodes) if line.episodes else ''}"
                    f"{'  (' + line.outcome + ')' if line.outcome != 'completed' else ''}"
                )
        stats.executed = tools.executed
        if not quiet:
            _summary(agent, stats, out)
    return stats


def _summary(agent: Agent, stats: RunStats, out: Callable[[str], None]) -> None:
    lines = stats.lines
    n = max(len(lines), 1)
    st = agent.state
    mem = agent.memory
    reused = sum(1 for line in lines if not line.key_changed)
    rows = [
        ("turns run now / in ledger", f"{len(lines)} / {agent.next_turn_index - 1}"),
        ("records in ledger", f"{agent.seq + 1}"),
        ("work items finished (recent)", f"{len(st.finished_work)}"),
        ("tool executions this run", f"{stats.executed}"),
        ("unknown outcomes recorded", f"{len(agent.unknown_outcomes())}"),
        ("episodes archived", f"{len(mem.archive)}"),
        ("working-memory revision / epoch", f"{mem.revision} / {mem.compression_epoch}"),
        ("turns with unchanged cache key", f"{reused} of {len(lines)} ({100 * reused / n:.0f}%)"),
        (
            "mean prompt tokens S / A / T",
            f"{sum(x.stable for x in lines) // n} / {sum(x.agent_scoped for x in lines) // n} / "
            f"{sum(x.turn_scoped for x in lines) // n}",
        ),
        ("wall time", f"{time.perf_counter() - stats.started:.1f} s"),
    ]
    width = max(len(k) for k, _ in rows)
    out("")
    out("summary")
    out("-" * (width + 24))
    for key, value in rows:
        out(f"{key:<{width}}  {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ledger", type=Path, default=DEFAULT_LEDGER, help="ledger directory")
    parser.add_argument("--turns", type=int, default=200, help="run until the ledger holds this many turns")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="first remove the ledger and workspace an earlier run made (refuses any other directory)",
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing per turn, and no summary")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated job")
    parser.add_argument(
        "--kill-at-turn",
        type=int,
        metavar="N",
        help="kill -9 this process in turn N, after its tool ran and before the result is recorded "
        "(to see a crash recovered: run again without it)",
    )
    args = parser.parse_args(argv)
    try:
        run(
            args.ledger,
            turns=args.turns,
            seed=args.seed,
            fresh=args.fresh,
            quiet=args.quiet,
            kill_at_turn=args.kill_at_turn,
        )
    except HolonError as exc:
        # A wrong --ledger, a ledger in use or refused by --fresh: one line saying what to
        # do, as the holon CLI does, not a traceback (exit codes as the CLI's).
        print(f"daemon.py: error: {exc}", file=sys.stderr)
        if isinstance(exc, NotALedger):
            # Its advice (holon init) is for other programs: this one creates its own ledger.
            print(
                "daemon.py: it creates its ledger at a path that does not exist yet: "
                f"pass --ledger NEW_PATH (default {DEFAULT_LEDGER})",
                file=sys.stderr,
            )
        return 3 if isinstance(exc, LedgerCorrupt) else 2
    except KeyboardInterrupt:
        # The open turn was recorded as interrupted on the way out; the next run resumes.
        print("\ninterrupted: run the same command again to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed: the ledger is consistent (the agent was
        # closed on the way out); stop quietly, like any well-behaved CLI.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (interpreter shutdown flushes it)
        return 1
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        print(f"daemon.py: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 74
    return 0


if __name__ == "__main__":
    sys.exit(main())
