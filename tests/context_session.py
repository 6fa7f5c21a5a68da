"""A generated long agent session with planted facts, rendered turn by turn like the runtime.

:func:`run_session` drives :class:`tests.live.LiveLedger` through ``turns`` turns of a
database-migration job and, at the start of every turn, renders the prompt with
:func:`holon.context.build_context` and appends its ``PromptRendered`` record — the
runtime's loop. Planted facts (see :data:`CONSTRAINT` and friends):

- turn 1: work item ``w-migrate`` with the scope constraint :data:`CONSTRAINT`;
- turn 2: the plan (:data:`PLAN_V1`), edited at turn :data:`PLAN_EDIT_TURN`;
- turns 3-5: an unrelated side topic (``w-zebra``, :data:`UNRELATED`), finished at turn 5;
- turn 40: decision :data:`DECISION`;
- turn 300: a wait on :data:`WAIT`, never resolved.

Tool outputs vary in size; some are stored as blobs (kept in ``blobs`` by hash) so
restoration can be checked byte for byte. Used by the continuity test, the property
tests and the benchmark.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import blake3

from holon import records as r
from holon.context import Budget, EpisodeIndex, Prompt, RenderConfig, build_context, prompt_rendered
from holon.errors import RefNotFound
from tests.live import LiveLedger

AGENT = "agent-7"
CONSTRAINT = "never push directly to main; every change goes through a reviewed pull request"
UNRELATED = "zebra"
DECISION = "export the schema with pg_dump --schema-only --no-owner"
WAIT = "operator approval for the production cutover window"
PLAN_EDIT_TURN = 150
POLICY = r.SystemPolicy(
    text=(
        "You are a careful infrastructure agent. Prefer small, reversible steps and report what you verified."
    ),
    tools=(
        r.ToolDefinition(
            name="bash",
            description="Run a shell command in the workspace.",
            parameters={
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        ),
        r.ToolDefinition(
            name="read_file",
            description="Read a file.",
            parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        ),
    ),
)
PLAN_V1 = (
    ("s1", "inventory the billing tables and their owners"),
    ("s2", "export the schema and dry-run it on a Postgres 16 replica"),
    ("s3", "port the stored procedures that use deprecated syntax"),
    ("s4", "rehearse the data copy on the staging cluster"),
    ("s5", "cut over production behind the feature flag"),
)
PLAN_V2_EXTRA = ("s6", "rehearse the rollback path and time it")

_FILES = (
    "billing/schema.sql",
    "billing/procs/invoice.sql",
    "billing/procs/refund.sql",
    "deploy/pg16.tf",
    "scripts/copy_data.py",
    "docs/cutover.md",
)
_WORDS = (
    *("replica", "lag", "vacuum", "index", "constraint", "sequence", "owner", "grant", "role", "invoice"),
    *("refund", "ledger", "cursor", "trigger", "partition", "tablespace", "checkpoint", "wal", "archive"),
    *("snapshot", "restore", "latency", "throughput"),
)


@dataclass
class Session:
    """A rendered session: the live ledger, blobs by hash, and each turn's prompt."""

    live: LiveLedger
    blobs: dict[str, bytes] = field(default_factory=dict)
    prompts: dict[int, Prompt] = field(default_factory=dict)
    index: EpisodeIndex = field(default_factory=EpisodeIndex)

    def record(self, seq: int) -> r.Record:
        if not 0 <= seq < len(self.live.records):
            raise RefNotFound(f"ledger:{seq}")
        return self.live.records[seq]

    def blob(self, blob_hash: str) -> bytes:
        try:
            return self.blobs[blob_hash]
        except KeyError:
            raise RefNotFound(f"blob:{blob_hash}") from None

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
        found = self.index.get(episode_id)
        if found is None:
            raise RefNotFound(f"episode:{episode_id}")
        return found


def _plan(version: int, progress: int) -> r.WorkPlan:
    steps = list(PLAN_V1) + ([PLAN_V2_EXTRA] if version > 1 else [])
    out = []
    for i, (sid, text) in enumerate(steps):
        status = "done" if i < progress else "in_progress" if i == progress else "pending"
        out.append(r.PlanStep(id=sid, text=text, status=status))  # type: ignore[arg-type]
    return r.WorkPlan(work_item_id="w-migrate", steps=tuple(out))


def _output(rng: random.Random, turn: int) -> str:
    lines = rng.randrange(3, 40)
    return "\n".join(
        f"{turn}:{i} " + " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(4, 12)))
        for i in range(lines)
    )


def run_session(
    turns: int,
    budget: Budget,
    config: RenderConfig | None = None,
    *,
    seed: int = 7,
    render: bool = True,
    render_from: int = 1,
    on_prompt: Callable[[int, Prompt, Session], None] | None = None,
) -> Session:
    """Generate and render a session of ``turns`` turns (see the module docstring)."""
    rng = random.Random(seed)
    live = LiveLedger()
    session = Session(live=live)
    config = config or RenderConfig(prompt_cache_key="migration")
    call = 0
    progress = 0
    plan_version = 1
    live.append(POLICY, in_turn=False)
    live.append(
        r.ExecutionEnvironment(workspace="/srv/billing", cwd="/srv/billing", branch="pg16"), in_turn=False
    )

    def tool(
        name: str, args: dict[str, object], output: str, *, files: tuple[str, ...] = (), blob: bool = False
    ) -> None:
        nonlocal call
        call += 1
        cid = f"c{call}"
        live.append(r.ToolIntent(call_id=cid, tool=name, args=args))
        if blob:
            data = output.encode()
            digest = blake3.blake3(data).hexdigest()
            session.blobs[digest] = data
            ref = r.BlobRef(hash=digest, size=len(data), preview=output[:120])
            live.append(
                r.ToolResult(call_id=cid, tool=name, status="ok", blob=ref, exit_code=0, touched_files=files)
            )
        else:
            live.append(
                r.ToolResult(
                    call_id=cid, tool=name, status="ok", output=output, exit_code=0, touched_files=files
                )
            )

    for turn in range(1, turns + 1):
        if turn == 1:
            text = f"Please migrate the billing service to Postgres 16. Hard rule: {CONSTRAINT}."
        elif 3 <= turn <= 5:
            text = f"Side question: the {UNRELATED}-stripe table renderer shows wrong colours, can you look?"
        else:
            focus = f"{rng.choice(_WORDS)} and {rng.choice(_WORDS)}"
            text = f"Continue the migration; focus on {focus} (turn {turn})."
        live.start_turn("operator", text)
        # Keep the incremental index in step with the archive, as the runtime does.
        session.index.extend(
            live.state.memory.archive.get(i)
            for i in range(len(session.index), live.state.memory.archive.count)
        )
        if render and turn >= render_from:
            live.before_prompt()
            prompt = build_context(
                live.state, budget, config, agent_id=AGENT, index=session.index, history=live.evidence
            )
            session.prompts[turn] = prompt
            if on_prompt is not None:
                on_prompt(turn, prompt, session)
            live.append(prompt_rendered(prompt), step_ms=5)

        if turn == 1:
            live.append(
                r.WorkItem(
                    id="w-migrate",
                    objective="Migrate the billing service database to Postgres 16",
                    state="active",
                    delivery_target="billing on Postgres 16 in production, zero lost invoices",
                    scope_constraints=(CONSTRAINT,),
                )
            )
        elif turn == 2:
            live.append(_plan(plan_version, progress))
        elif turn == 3:
            live.append(
                r.WorkItem(
                    id="w-zebra",
                    objective=f"Fix {UNRELATED}-stripe colours in the table renderer",
                    state="active",
                )
            )
        elif 3 < turn <= 5:
            tool(
                "bash",
                {"command": f"grep -n stripe ui/{UNRELATED}.css"},
                f"ui/{UNRELATED}.css:12: .{UNRELATED} {{ color: #eee }}",
                files=(f"ui/{UNRELATED}.css",),
            )
            if turn == 5:
                live.append(r.WorkItemState(id="w-zebra", state="done", reason="colours fixed"))
        elif turn == 40:
            live.append(
                r.Decision(
                    id="d-export",
                    text=DECISION,
                    rationale="owners differ on the replica",
                    work_item_id="w-migrate",
                )
            )
        elif turn == PLAN_EDIT_TURN:
            plan_version = 2
            live.append(_plan(plan_version, progress))
        elif turn == 300:
            live.append(
                r.WaitingIntent(
                    id="wait-cutover",
                    waiting_on=WAIT,
                    work_item_id="w-migrate",
                    resume_hint="operator replies in the channel",
                )
            )
        if turn > 5 and turn % 80 == 0 and progress < 4:
            progress += 1
            live.append(_plan(plan_version, progress))

        if turn > 5:
            for _ in range(rng.randrange(1, 4)):
                path = rng.choice(_FILES)
                if rng.random() < 0.5:
                    tool("read_file", {"path": path}, _output(rng, turn), files=(path,))
                else:
                    big = rng.random() < 0.08
                    out = _output(rng, turn) * (40 if big else 1)
                    tool("bash", {"command": f"psql -f {path} --echo-errors"}, out, files=(path,), blob=big)
            live.append(
                r.Message(
                    role="assistant", text=f"Step update for turn {turn}: checked {rng.choice(_WORDS)}."
                )
            )
            if turn % 9 == 0:
                live.append(
                    r.Brief(
                        status="result",
                        text=f"verified {rng.choice(_WORDS)} on the replica",
                        work_item_id="w-migrate",
                    )
                )
        live.end_turn("waiting" if turn == 300 else "completed")
    return session
