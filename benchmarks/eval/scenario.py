"""Scenarios: long generated agent runs with planted ground truth, and imported real transcripts.

A :class:`Scenario` is an evidence stream (what a daemon or importer appends), the model
call positions in it (:func:`~benchmarks.eval.trace.call_positions`), and, for generated
runs, the planted facts with the calls at which each must be in the prompt (*live*) or
must not be (*stale*).

:func:`generate` builds a seeded run of a database-migration agent: hundreds to thousands
of turns, several tool rounds per turn, outputs from a few lines to tens of kilobytes,
side work items (finished or abandoned), waits that stay open for several turns,
background tasks, plan progress and plan edits, decisions and their revisions. Planted
facts and their lifetimes:

=====================  ====================================================  ============
kind                   text                                                   lifetime
=====================  ====================================================  ============
constraint             the scope constraint given in turn 1                  live to the end
objective              the active work item's objective                      live while active
plan                   each open step of the active item's current plan      live while open
waiting                what an open wait waits on                            live while open
decision               the active item's latest decision                     live while latest
abandoned (stale)      the objective of an abandoned work item               stale after
superseded_plan        a plan step text replaced by a plan edit              stale after
superseded_decision    a decision text replaced by a revision of it          stale after
=====================  ====================================================  ============

Fact texts appear only in the structured records that establish them (and the turn-1
request for the constraint); operator messages paraphrase, so a fact is in a prompt only
when the policy kept the record or holon's projection of it.

:mod:`benchmarks.eval.unstructured` generates runs that declare no work items, plans or
decisions (a coding session, a multi-session conversation, a run of background tasks and
sub-agents), with their own kinds: ``instruction``, ``correction``, ``last_edit``,
``failing_test``, ``task_result`` (live), ``superseded_instruction``, ``superseded_task``
(stale) and ``evidence`` (answer evidence, scored at the calls that ask for it).

A stale fact is carried over when its text is in the prompt — except one with a
``superseded_by`` fact (an operator's instruction and its correction, a task result and
the newer run's): it is carried over when its text is in the prompt *and* the text that
supersedes it does not appear after it. An instruction followed by its correction is how
a person reads a thread; one whose correction was lost is read as current.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import holon.records as r
from benchmarks.eval.trace import call_positions
from holon.importers import read_transcript

__all__ = [
    "CONSTRAINT",
    "FactKind",
    "LIVE_KINDS",
    "SAMPLES",
    "STALE_KINDS",
    "Fact",
    "Scenario",
    "generate",
    "load_samples",
]

FactKind = Literal[
    "constraint",
    "objective",
    "plan",
    "waiting",
    "decision",
    "abandoned",
    "superseded_plan",
    "superseded_decision",
    "instruction",
    "correction",
    "last_edit",
    "failing_test",
    "task_result",
    "superseded_instruction",
    "superseded_task",
    "evidence",
]
LIVE_KINDS: Final[tuple[FactKind, ...]] = (
    *("constraint", "objective", "plan", "waiting", "decision"),
    *("instruction", "correction", "last_edit", "failing_test", "task_result"),
)
STALE_KINDS: Final[tuple[FactKind, ...]] = (
    *("abandoned", "superseded_plan", "superseded_decision"),
    *("superseded_instruction", "superseded_task"),
)

#: The real transcripts under ``samples_dir`` (see /work/shared/samples/README.md): relative path, format.
SAMPLES: Final = (
    ("claude-code/claude-reliability__coverage-test-fix/transcript.jsonl", "claude-code"),
    ("claude-code/claude-reliability__python-to-rust-port/transcript.jsonl", "claude-code"),
    ("swe-agent/marshmallow-1867__function_calling.traj", "swe-agent"),
    ("tau-bench/gpt-4o-airline__top3_longest.json", "openai-chat"),
    ("openhands/multi_swe_bench_examples_output.jsonl", "openhands"),
)

CONSTRAINT: Final = "never push directly to main; every change goes through a reviewed pull request"
_MAIN: Final = "w-main"
_START_TS: Final = 1_700_000_000_000


@dataclass(frozen=True, slots=True)
class Fact:
    """A planted ground-truth string and what kind of fact it is.

    ``superseded_by``: for a stale fact that a later one replaced (an instruction and
    its correction), the id of that fact: the stale text is carried over only when the
    replacement does not follow it in the prompt (see the module docstring).
    """

    id: int
    kind: FactKind
    text: str
    superseded_by: int | None = None


@dataclass(frozen=True)
class Scenario:
    """An evidence stream with its model calls and (for generated runs) planted facts.

    ``live[k]`` / ``stale[k]`` are the fact ids that the prompt of call ``k`` must /
    must not contain; ``evidence[k]`` the ids of the answer evidence call ``k`` is asked
    about (empty, or no tuple at all, where nothing is asked). ``family`` says which
    generator made it (``generated``, ``coding-unstructured``, ``conversation-sessions``,
    ``tasks-subagents``; ``sample`` for a real transcript): the targets checked on it
    depend on it.
    """

    name: str
    description: str
    records: tuple[r.Record, ...]
    calls: tuple[int, ...]
    facts: tuple[Fact, ...] = ()
    live: tuple[frozenset[int], ...] = ()
    stale: tuple[frozenset[int], ...] = ()
    evidence: tuple[frozenset[int], ...] = ()
    family: str = "generated"

    @property
    def turns(self) -> int:
        return sum(1 for rec in self.records if rec.kind == r.TurnStarted.KIND)


# --------------------------------------------------------------------------- ground truth


@dataclass
class _Truth:
    """The generator's world: which planted facts are live or stale right now."""

    facts: list[Fact] = field(default_factory=list)
    by_text: dict[str, int] = field(default_factory=dict)
    stack: list[str] = field(default_factory=list)  # active work items, most recent last
    objectives: dict[str, str] = field(default_factory=dict)
    plans: dict[str, list[list[str]]] = field(default_factory=dict)  # item -> [[id, text, status]]
    decisions: dict[str, tuple[str, str]] = field(default_factory=dict)  # item -> latest (id, text)
    waits: dict[str, str] = field(default_factory=dict)
    constraint: bool = False
    stale_ids: set[int] = field(default_factory=set)
    _snapshot: tuple[frozenset[int], frozenset[int]] | None = None

    def fact(self, kind: FactKind, text: str) -> int:
        key = f"{kind}\0{text}"
        found = self.by_text.get(key)
        if found is not None:
            return found
        for other in self.facts:
            # A fact contained in another would be found where only the other is.
            if other.text != text and (other.text in text or text in other.text):
                raise ValueError(f"planted facts overlap: {text!r} / {other.text!r}")
        fid = len(self.facts)
        self.facts.append(Fact(fid, kind, text))
        self.by_text[key] = fid
        return fid

    def changed(self) -> None:
        self._snapshot = None

    def make_stale(self, kind: FactKind, text: str) -> None:
        self.stale_ids.add(self.fact(kind, text))
        self.changed()

    def snapshot(self) -> tuple[frozenset[int], frozenset[int]]:
        if self._snapshot is None:
            live: list[int] = []
            if self.constraint:
                live.append(self.fact("constraint", CONSTRAINT))
            if self.stack:
                active = self.stack[-1]
                live.append(self.fact("objective", self.objectives[active]))
                for _sid, text, status in self.plans.get(active, []):
                    if status not in ("done", "skipped"):
                        live.append(self.fact("plan", text))
                if active in self.decisions:
                    live.append(self.fact("decision", self.decisions[active][1]))
            live.extend(self.fact("waiting", text) for text in self.waits.values())
            self._snapshot = (frozenset(live), frozenset(self.stale_ids))
        return self._snapshot


# --------------------------------------------------------------------------- vocabulary

_WORDS: Final = (
    *("replica", "lag", "vacuum", "index", "constraint", "sequence", "owner", "grant", "role", "invoice"),
    *("refund", "ledger", "cursor", "trigger", "partition", "tablespace", "checkpoint", "wal", "archive"),
    *("snapshot", "restore", "latency", "throughput", "bloat", "toast", "analyze", "lock", "deadlock"),
)
_FILES: Final = (
    "billing/schema.sql",
    "billing/procs/invoice.sql",
    "billing/procs/refund.sql",
    "deploy/pg16.tf",
    "scripts/copy_data.py",
    "scripts/verify_counts.py",
    "docs/cutover.md",
    "billing/models.py",
)
_STEP_VERBS: Final = ("inventory", "export", "port", "rehearse", "verify", "benchmark", "document", "migrate")
_STEP_OBJECTS: Final = (
    "the billing tables and their owners",
    "the schema onto a Postgres 16 replica",
    "the stored procedures that use deprecated syntax",
    "the data copy on the staging cluster",
    "the invoice totals against the old cluster",
    "the refund queue workers",
    "the connection pool settings",
    "the cutover runbook",
    "the nightly reporting jobs",
    "the partitioned audit log",
)
_SIDE_ASKS: Final = (
    ("Fix the zebra-stripe colours in the admin table renderer", "the admin table stripes look off"),
    ("Rotate the expiring TLS certificate of the status page", "the status page cert expires soon"),
    ("Upgrade the CI runner image to the new base", "CI runners complain about the old image"),
    ("Investigate the flaky currency-rounding unit test", "a rounding test keeps flaking"),
    ("Add a dashboard panel for queue depth", "ops would like a queue-depth panel"),
    ("Answer the auditor's question about retention", "the auditor sent a retention question"),
)
_DECISIONS: Final = (
    "export the schema with pg_dump --schema-only --no-owner",
    "copy data with logical replication, not dump and restore",
    "keep the old cluster read-only for two weeks after cutover",
    "run the invoice reconciliation nightly during the migration",
    "rewrite the refund procedure in plain SQL",
    "pin the replica to the same availability zone as the primary",
)
_WAITS: Final = (
    "operator approval for the production cutover window",
    "the DBA team's review of the replication slot sizing",
    "security sign-off on the new network rules",
    "the finance team's go-ahead for the invoice freeze",
)


# --------------------------------------------------------------------------- generator


class _Run:
    """Emits records in the order an agent daemon appends them, tracking the ground truth."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.records: list[r.Record] = []
        self.truth_after: list[tuple[frozenset[int], frozenset[int]]] = []
        self.truth = _Truth()
        self.ts = _START_TS
        self.turn: int | None = None
        self.calls = 0
        self.counter = 0

    def emit(self, body: r.Body, *, in_turn: bool = True) -> None:
        self.ts += 1000
        self.records.append(r.Record(body=body, ts=self.ts, turn=self.turn if in_turn else None))
        self.truth_after.append(self.truth.snapshot())

    def operator_turn(self, text: str) -> None:
        """Open a turn on the operator's ``text``, recorded as ``holon.Agent.turn(input=...)`` records it."""
        self.emit(r.TurnStarted(trigger="operator"))
        self.emit(r.Message(role="operator", text=text))

    def unique(self) -> int:
        self.counter += 1
        return self.counter

    # -- tool output

    def output(self, lines: int) -> str:
        rng = self.rng
        return "\n".join(
            f"{i:04d} " + " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(4, 14)))
            for i in range(lines)
        )

    def output_lines(self) -> int:
        roll = self.rng.random()
        if roll < 0.70:
            return self.rng.randrange(2, 30)
        if roll < 0.95:
            return self.rng.randrange(30, 150)
        return self.rng.randrange(150, 700)  # tens of kilobytes

    def tool_round(self, item: str) -> None:
        rng = self.rng
        self.calls += 1
        cid = f"c{self.calls}"
        path = rng.choice(_FILES) if item == _MAIN else f"ui/{item}.css"
        files: tuple[str, ...] = ()
        if rng.random() < 0.45:
            tool, args = "read_file", {"path": path}
        else:
            tool, files = "bash", (path,) if rng.random() < 0.3 else ()
            args = {"command": f"psql -f {path} --echo-errors # {rng.choice(_WORDS)}"}
        self.emit(r.ToolIntent(call_id=cid, tool=tool, args=args))
        status: Literal["ok", "error"] = "error" if rng.random() < 0.08 else "ok"
        self.emit(
            r.ToolResult(
                call_id=cid,
                tool=tool,
                status=status,
                output=self.output(self.output_lines()),
                exit_code=0 if status == "ok" else 1,
                touched_files=files if status == "ok" else (),
            )
        )

    # -- work items, plans, decisions

    def new_step(self) -> str:
        verb = self.rng.choice(_STEP_VERBS)
        obj = self.rng.choice(_STEP_OBJECTS)
        return f"{verb} {obj} (step {self.unique()})"

    def plan(self, item: str) -> None:
        steps = self.truth.plans[item]
        self.truth.changed()
        self.emit(
            r.WorkPlan(
                work_item_id=item,
                steps=tuple(r.PlanStep(id=s, text=t, status=st) for s, t, st in steps),  # type: ignore[arg-type]
            )
        )

    def activate(
        self, item: str, objective: str, *, constraint: bool = False, target: str | None = None
    ) -> None:
        self.truth.objectives[item] = objective
        self.truth.stack.append(item)
        self.truth.changed()
        self.emit(
            r.WorkItem(
                id=item,
                objective=objective,
                state="active",
                delivery_target=target,
                scope_constraints=(CONSTRAINT,) if constraint else (),
            )
        )

    def finish(self, item: str, state: Literal["done", "abandoned"]) -> None:
        self.truth.stack.remove(item)
        if state == "abandoned":
            self.truth.make_stale("abandoned", self.truth.objectives[item])
        self.truth.plans.pop(item, None)
        self.truth.decisions.pop(item, None)
        self.truth.changed()
        reason = "finished" if state == "done" else "the operator dropped the request"
        self.emit(r.WorkItemState(id=item, state=state, reason=reason))

    def advance(self, item: str) -> None:
        steps = self.truth.plans[item]
        for step in steps:
            if step[2] == "in_progress":
                step[2] = "done"
                break
        pending = [s for s in steps if s[2] == "pending"]
        if pending:
            pending[0][2] = "in_progress"
        else:
            # The plan ran out: the agent plans the next stretch of work.
            steps.append([f"s{len(steps) + 1}", self.new_step(), "in_progress"])
            steps.append([f"s{len(steps) + 1}", self.new_step(), "pending"])
        self.plan(item)

    def edit_plan(self, item: str) -> None:
        steps = self.truth.plans[item]
        pending = [s for s in steps if s[2] == "pending"]
        if pending:
            victim = self.rng.choice(pending)
            self.truth.make_stale("superseded_plan", victim[1])
            victim[1] = self.new_step()
        steps.append([f"s{len(steps) + 1}", self.new_step(), "pending"])
        self.plan(item)

    def decide(self, item: str, *, revise: bool) -> None:
        n = self.unique()
        if revise and item in self.truth.decisions:
            did, old = self.truth.decisions[item]
            self.truth.make_stale("superseded_decision", old)
            text = f"{self.rng.choice(_DECISIONS)} (revised, decision {n})"
        else:
            did = f"d{n}"
            text = f"{self.rng.choice(_DECISIONS)} (decision {n})"
        self.truth.decisions[item] = (did, text)
        self.truth.changed()
        self.emit(r.Decision(id=did, text=text, rationale="measured on the replica", work_item_id=item))


def generate(name: str, turns: int, *, seed: int, max_rounds: int = 6) -> Scenario:
    """A seeded generated run of ``turns`` turns (see the module docstring)."""
    run = _Run(seed)
    rng = run.rng
    truth = run.truth
    run.emit(
        r.SystemPolicy(
            text=(
                "You are a careful infrastructure agent. "
                "Prefer small, reversible steps and report what you verified."
            ),
            tools=(
                r.ToolDefinition(
                    name="bash",
                    description="Run a shell command in the workspace.",
                    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
                ),
                r.ToolDefinition(
                    name="read_file",
                    description="Read a file.",
                    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
                ),
            ),
        ),
        in_turn=False,
    )
    run.emit(
        r.ExecutionEnvironment(workspace="/srv/billing", cwd="/srv/billing", branch="pg16"), in_turn=False
    )

    side: str | None = None  # the side item in progress
    side_left = 0
    next_side = rng.randrange(20, 50)
    next_wait = rng.randrange(30, 60)
    wait_until: dict[str, int] = {}
    task_due: dict[str, int] = {}
    next_task = rng.randrange(15, 40)
    next_progress = rng.randrange(6, 14)
    next_edit = rng.randrange(40, 80)
    next_decision = rng.randrange(5, 20)

    for turn in range(1, turns + 1):
        run.turn = turn
        resolved = [w for w, due in wait_until.items() if due == turn]
        rejoined = [t for t, due in task_due.items() if due == turn]
        start_side = side is None and turn >= next_side and not resolved and not rejoined
        if turn == 1:
            text = (
                f"Please migrate the billing service to Postgres 16. Hard rule for all of it: {CONSTRAINT}."
            )
            truth.constraint = True
            truth.changed()
            run.operator_turn(text)
        elif resolved:
            run.emit(r.TurnStarted(trigger="wake", input=None))
        elif rejoined:
            run.emit(r.TurnStarted(trigger="task", input=None))
        elif start_side:
            side_objective, ask = _SIDE_ASKS[rng.randrange(len(_SIDE_ASKS))]
            ticket = run.unique()
            text = f"Side request (ticket T-{ticket}): {ask}, can you look when you have a minute?"
            run.operator_turn(text)
        else:
            focus = f"{rng.choice(_WORDS)} and {rng.choice(_WORDS)}"
            run.operator_turn(f"Continue; focus on {focus} (turn {turn}).")
        for wait_id in resolved:
            del wait_until[wait_id]
            truth.waits.pop(wait_id)
            truth.changed()
            run.emit(r.WaitingResolved(id=wait_id, resolution="arrived", detail="approved in the channel"))
        for task_id in rejoined:
            del task_due[task_id]
            run.emit(
                r.TaskResult(
                    id=task_id,
                    status="ok",
                    summary=f"row counts match on {rng.choice(_WORDS)}",
                    output=run.output(rng.randrange(5, 60)),
                )
            )

        # The agent's structured actions this turn (each made by a model call).
        if turn == 1:
            truth.plans[_MAIN] = [[f"s{i + 1}", run.new_step(), "pending"] for i in range(6)]
            truth.plans[_MAIN][0][2] = "in_progress"
            run.activate(
                _MAIN,
                "Migrate the billing service database to Postgres 16",
                constraint=True,
                target="billing on Postgres 16 in production, zero lost invoices",
            )
            run.plan(_MAIN)
        elif start_side:
            side = f"w-side-{ticket}"
            side_left = rng.randrange(3, 9)
            truth.plans[side] = [["s1", run.new_step(), "in_progress"], ["s2", run.new_step(), "pending"]]
            run.activate(side, f"{side_objective} (ticket T-{ticket})")
            run.plan(side)
            next_side = turn + side_left + rng.randrange(25, 70)
        active = truth.stack[-1]
        if turn == next_progress:
            run.advance(active)
            next_progress = turn + rng.randrange(6, 14)
        if turn == next_edit and active == _MAIN:
            run.edit_plan(_MAIN)
            next_edit = turn + rng.randrange(40, 80)
        if turn >= next_decision:
            run.decide(active, revise=rng.random() < 0.3)
            next_decision = turn + rng.randrange(8, 25)
        if turn >= next_wait and not truth.waits and active == _MAIN:
            wait_id = f"wait-{run.unique()}"
            truth.waits[wait_id] = f"{rng.choice(_WAITS)} (request R-{run.counter})"
            truth.changed()
            run.emit(r.WaitingIntent(id=wait_id, waiting_on=truth.waits[wait_id], work_item_id=_MAIN))
            wait_until[wait_id] = turn + rng.randrange(4, 20)
            next_wait = wait_until[wait_id] + rng.randrange(20, 50)
        if turn >= next_task and not task_due:
            task_id = f"task-{run.unique()}"
            run.emit(
                r.TaskStarted(id=task_id, description="compare row counts on the replica", work_item_id=_MAIN)
            )
            task_due[task_id] = turn + rng.randrange(2, 8)
            next_task = task_due[task_id] + rng.randrange(15, 40)

        for _ in range(rng.randrange(1, max_rounds + 1)):
            run.tool_round(active)
        run.emit(
            r.Message(role="assistant", text=f"Turn {turn}: checked {rng.choice(_WORDS)}; next step queued.")
        )
        if turn % 9 == 0:
            run.emit(
                r.Brief(
                    status="result", text=f"verified {rng.choice(_WORDS)} on the replica", work_item_id=active
                )
            )
        if side is not None and active == side:
            side_left -= 1
            if side_left == 0:
                run.finish(side, "abandoned" if rng.random() < 0.4 else "done")
                side = None
        waiting = bool(truth.waits) and any(due > turn for due in wait_until.values())
        run.emit(r.TurnEnded(outcome="waiting" if waiting and rng.random() < 0.5 else "completed"))
        run.turn = None

    records = tuple(run.records)
    calls = call_positions(records)
    live = tuple(run.truth_after[p - 1][0] for p in calls)
    stale = tuple(run.truth_after[p - 1][1] for p in calls)
    described = (
        f"generated, seed {seed}: {turns:,} turns, 1-{max_rounds} tool rounds per turn, side work items, "
        "waits, background tasks, plan edits, decision revisions"
    )
    return Scenario(
        name=name,
        description=described,
        records=records,
        calls=calls,
        facts=tuple(truth.facts),
        live=live,
        stale=stale,
    )


def load_samples(samples_dir: Path) -> Iterator[Scenario]:
    """The real transcripts under ``samples_dir`` imported with holon's importers (no planted facts)."""
    for rel, fmt in SAMPLES:
        path = samples_dir / rel
        if not path.exists():
            continue
        report = read_transcript(path, fmt)
        records = tuple(report.records)
        name = rel.split("/")[1] if rel.count("/") > 1 else Path(rel).stem
        yield Scenario(
            name=name.removeprefix("claude-reliability__"),
            description=f"{rel} (--from {fmt}): {len(records)} records, {report.tool_calls} tool calls",
            records=records,
            calls=call_positions(records),
            family="sample",
        )
