"""holon's first-class fake: a ledger written the way the runtime writes it, for tests and benchmarks.

What httpx's ``MockTransport`` is to an HTTP client: the real thing's behaviour without
its machinery. A library user, a test suite or a benchmark builds the records an agent
daemon would have appended, with no model, no daemon and no file system, and hands them
to the renderer, memory search or a real :class:`~holon.ledger.Ledger`.

- :class:`LiveLedger` appends records in memory the way the runtime does: gapless seqs
  and caller-supplied timestamps, each record folded, the post-turn refresh run after
  every ``turn_ended`` and its derived records appended right away, and a
  ``prompt_rendered`` confirming the revision and epoch current at that point (after the
  refresh the runtime runs before a prompt).
- :func:`replay_live` does the same for an evidence stream read from a fixture (evidence
  and runtime records only): how a fixture becomes the ledger a live agent had;
  :func:`evidence_of` is the reverse, the records a daemon appends of a live ledger.
- :class:`RecordsSource` restores refs from records in memory (no blobs, no episodes).
- :func:`run_session` generates a long agent session with planted facts (a database
  migration, :data:`CONSTRAINT` and friends) and renders it turn by turn with
  :func:`holon.context.build_context`, as the runtime's loop does: the continuity tests,
  the property tests and the context and search benchmarks run on it.
- :func:`with_real_blobs` stores a generated record's blob in an on-disk ledger, so the
  record can be appended there.

Deterministic: no clock, and randomness only from a seeded ``random.Random``. Not part
of the ``holon`` facade; import it as ``holon.testing``. It composes layers as the
runtime does and may import what the runtime may (tests/test_layers.py).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import blake3
import msgspec

import holon.records as r
from holon.context import (
    Budget,
    EpisodeIndex,
    EvidenceBuffer,
    Prompt,
    RenderConfig,
    build_context,
    prompt_rendered,
)
from holon.errors import RefNotFound
from holon.ledger import Ledger
from holon.projections import (
    DEFAULT_CONFIG,
    ProjectionConfig,
    ProjectionState,
    apply,
    derived_after,
    derived_before,
    initial_state,
    post_turn_refresh,
)

__all__ = [
    "AGENT",
    "CONSTRAINT",
    "DECISION",
    "PLAN_EDIT_TURN",
    "PLAN_V1",
    "PLAN_V2_EXTRA",
    "POLICY",
    "START_TS",
    "UNRELATED",
    "WAIT",
    "LiveLedger",
    "RecordsSource",
    "Session",
    "evidence_of",
    "replay_live",
    "run_session",
    "with_real_blobs",
]

#: Where generated ledgers start their clock (2023-11-14T22:13:20Z), in milliseconds.
START_TS = 1_700_000_000_000


class LiveLedger:
    """Appends records like the runtime: seq, ts, fold, and the post-turn refresh."""

    def __init__(self, config: ProjectionConfig = DEFAULT_CONFIG, *, start_ts: int = START_TS) -> None:
        self.records: list[r.Record] = []
        self.state: ProjectionState = initial_state(config)
        # The evidence a prompt's history is read from, as the runtime keeps it (a record's
        # seq is its index in ``records``, which serve what the buffer dropped).
        self.evidence = EvidenceBuffer(older=lambda first, end: self.records[first:end])
        self.turn: int | None = None
        self.turns = 0
        self.ts = start_ts

    def append(self, body: r.Body, *, step_ms: int = 1000, in_turn: bool = True) -> r.Record:
        """Append one body in the current turn (or outside any turn)."""
        self.ts += step_ms
        return self._append(r.Record(body=body, ts=self.ts, turn=self.turn if in_turn else None))

    def _append(self, record: r.Record) -> r.Record:
        stored = r.Record(body=record.body, ts=record.ts, turn=record.turn, seq=len(self.records))
        self.records.append(stored)
        self.state = apply(self.state, stored)
        self.evidence.add(stored)
        return stored

    def start_turn(self, trigger: str = "user", text: str | None = None) -> r.Record:
        """Open turn ``turns + 1``."""
        self.turns += 1
        self.turn = self.turns
        return self.append(r.TurnStarted(trigger=trigger, input=text))

    def before_prompt(self) -> tuple[r.Record, ...]:
        """Run the refresh the runtime runs before rendering a prompt; append what it returns."""
        ts = self.records[-1].ts if self.records else self.ts
        return tuple(
            self._append(record) for record in derived_before(self.state, r.PromptRendered.KIND, tail_ts=ts)
        )

    def render(self, *, lag: int = 0) -> r.Record:
        """Append a prompt_rendered confirming the current revision and epoch.

        ``lag`` > 0 records an older revision instead (a prompt that does not confirm the
        pending delta, as one rendered from a stale state would be).
        """
        self.before_prompt()
        memory = self.state.memory
        revision = max(0, memory.revision - lag)
        digest = hashlib.blake2b(f"{self.turn}:{revision}".encode(), digest_size=16).hexdigest()
        return self.append(
            r.PromptRendered(
                working_memory_revision=revision,
                compression_epoch=memory.compression_epoch,
                cache_key=f"agent:{revision}:{memory.compression_epoch}",
                prompt_hash=digest,
                total_tokens=1000 + 10 * len(self.records) % 5000,
                budget=100_000,
                estimator="chars/4",
            ),
            step_ms=10,
        )

    def end_turn(self, outcome: str = "completed") -> tuple[r.Record, ...]:
        """Close the turn and append its derived records; returns them."""
        ended = self.append(r.TurnEnded(outcome=outcome))  # type: ignore[arg-type]
        self.turn = None
        return tuple(self._append(record) for record in derived_after(self.state, ended))

    def refresh(self) -> tuple[r.Record, ...]:
        """Run the post-turn refresh on the current state and append what it returns."""
        return tuple(self._append(record) for record in post_turn_refresh(self.state))

    def write(self, record: r.Record) -> r.Record:
        """Append ``record`` (its ts and turn kept) as the runtime writes it, by the one rule of
        :mod:`holon.projections.derive`: what is owed or comes before it, it, what follows it."""
        tail_ts = self.records[-1].ts if self.records else record.ts
        for derived in derived_before(self.state, record.kind, tail_ts=tail_ts):
            self._append(derived)
        stored = self._append(record)
        for derived in derived_after(self.state, stored):
            self._append(derived)
        return stored


def evidence_of(records: Iterable[r.Record]) -> list[r.Record]:
    """The records a daemon appends (derived ones removed), renumbered gaplessly."""
    kept = [rec for rec in records if rec.kind not in r.DERIVED_KINDS]
    return [r.Record(body=rec.body, ts=rec.ts, turn=rec.turn, seq=i) for i, rec in enumerate(kept)]


def replay_live(evidence: Iterable[r.Record], config: ProjectionConfig = DEFAULT_CONFIG) -> LiveLedger:
    """Append an evidence stream as the live runtime would, inserting derived records."""
    live = LiveLedger(config)
    for record in evidence:
        live.write(record)
    return live


class RecordsSource:
    """A RefSource over some records by seq (no blobs, no episodes): where a test restores
    what a prompt clipped from the records a :class:`LiveLedger` (or the test) holds."""

    def __init__(self, records: Iterable[r.Record]) -> None:
        self._by_seq = {rec.seq: rec for rec in records}

    def record(self, seq: int) -> r.Record:
        return self._by_seq[seq]

    def blob(self, blob_hash: str) -> bytes:
        raise KeyError(blob_hash)

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
        raise KeyError(episode_id)


def with_real_blobs(ledger: Ledger, record: r.Record) -> r.Record:
    """Replace a generated record's random BlobRef by one naming a blob stored in ``ledger``."""
    body = record.body
    if isinstance(body, r.ToolResult | r.TaskResult) and body.blob is not None:
        ref = ledger.put_blob(body.blob.preview.encode() + b"#blob", preview=body.blob.preview)
        record = msgspec.structs.replace(record, body=msgspec.structs.replace(body, blob=ref))
    return record


# ------------------------------------------------------------------ a generated session

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


class _Migration:
    """Writes the generated session's turns into its live ledger: requests, planted facts, work.

    Every random choice is drawn from one seeded ``rng`` in the order the turns are written,
    so a seed names one session.
    """

    def __init__(self, session: Session, rng: random.Random) -> None:
        self.session = session
        self.live = session.live
        self.rng = rng
        self.call = 0
        self.progress = 0
        self.plan_version = 1

    def request(self, turn: int) -> str:
        """What the operator asks at the start of ``turn``."""
        if turn == 1:
            return f"Please migrate the billing service to Postgres 16. Hard rule: {CONSTRAINT}."
        if 3 <= turn <= 5:
            return f"Side question: the {UNRELATED}-stripe table renderer shows wrong colours, can you look?"
        focus = f"{self.rng.choice(_WORDS)} and {self.rng.choice(_WORDS)}"
        return f"Continue the migration; focus on {focus} (turn {turn})."

    def tool(
        self,
        name: str,
        args: dict[str, object],
        output: str,
        *,
        files: tuple[str, ...] = (),
        blob: bool = False,
    ) -> None:
        """One tool call and its result; with ``blob``, the output stored as a blob the session holds."""
        live = self.live
        self.call += 1
        cid = f"c{self.call}"
        live.append(r.ToolIntent(call_id=cid, tool=name, args=args))
        if blob:
            data = output.encode()
            digest = blake3.blake3(data).hexdigest()
            self.session.blobs[digest] = data
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

    def plant(self, turn: int) -> None:
        """The planted facts of ``turn`` (see the session's constants), then the plan's progress."""
        live = self.live
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
            live.append(_plan(self.plan_version, self.progress))
        elif turn == 3:
            live.append(
                r.WorkItem(
                    id="w-zebra",
                    objective=f"Fix {UNRELATED}-stripe colours in the table renderer",
                    state="active",
                )
            )
        elif 3 < turn <= 5:
            self.tool(
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
            self.plan_version = 2
            live.append(_plan(self.plan_version, self.progress))
        elif turn == 300:
            live.append(
                r.WaitingIntent(
                    id="wait-cutover",
                    waiting_on=WAIT,
                    work_item_id="w-migrate",
                    resume_hint="operator replies in the channel",
                )
            )
        if turn > 5 and turn % 80 == 0 and self.progress < 4:
            self.progress += 1
            live.append(_plan(self.plan_version, self.progress))

    def work(self, turn: int) -> None:
        """A turn's routine work after the side topic: tool calls, a step update, now and then a brief."""
        rng = self.rng
        for _ in range(rng.randrange(1, 4)):
            path = rng.choice(_FILES)
            if rng.random() < 0.5:
                self.tool("read_file", {"path": path}, _output(rng, turn), files=(path,))
            else:
                big = rng.random() < 0.08
                out = _output(rng, turn) * (40 if big else 1)
                self.tool("bash", {"command": f"psql -f {path} --echo-errors"}, out, files=(path,), blob=big)
        self.live.append(
            r.Message(role="assistant", text=f"Step update for turn {turn}: checked {rng.choice(_WORDS)}.")
        )
        if turn % 9 == 0:
            self.live.append(
                r.Brief(
                    status="result",
                    text=f"verified {rng.choice(_WORDS)} on the replica",
                    work_item_id="w-migrate",
                )
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
    """Generate and render a session of ``turns`` turns of a database-migration job.

    At the start of every turn (from ``render_from`` on, unless ``render`` is false) the
    prompt is rendered with :func:`holon.context.build_context` for :data:`AGENT` and its
    ``PromptRendered`` appended, as the runtime's loop does; ``on_prompt`` sees each one.
    Planted facts: turn 1, work item ``w-migrate`` with the scope constraint
    :data:`CONSTRAINT`; turn 2, the plan (:data:`PLAN_V1`), edited at turn
    :data:`PLAN_EDIT_TURN`; turns 3-5, an unrelated side topic (``w-zebra``,
    :data:`UNRELATED`), finished at turn 5; turn 40, decision :data:`DECISION`; turn 300,
    a wait on :data:`WAIT`, never resolved. Tool outputs vary in size; some are stored as
    blobs (kept in ``Session.blobs`` by hash) so restoration can be checked byte for byte.
    """
    live = LiveLedger()
    session = Session(live=live)
    config = config or RenderConfig(prompt_cache_key="migration")
    migration = _Migration(session, random.Random(seed))
    live.append(POLICY, in_turn=False)
    live.append(
        r.ExecutionEnvironment(workspace="/srv/billing", cwd="/srv/billing", branch="pg16"), in_turn=False
    )
    for turn in range(1, turns + 1):
        live.start_turn("operator", migration.request(turn))
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
        migration.plant(turn)
        if turn > 5:
            migration.work(turn)
        live.end_turn("waiting" if turn == 300 else "completed")
    return session
