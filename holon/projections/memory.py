"""WorkingMemoryState: revisioned working memory, the active episode, archived episodes.

Folded alongside :class:`~holon.projections.RuntimeState` by
:func:`apply_memory`. Evidence records feed the :class:`ActiveEpisodeBuilder` and the
current :class:`TurnInterval` as they are applied (bounded work per record, so the
post-turn refresh never rescans a turn). Derived records then move memory forward
exactly as the live refresh decided: a ``working_memory_delta`` sets the revision and
the pending delta, a ``context_episode`` archives an episode and bumps
``compression_epoch``, a ``prompt_rendered`` confirms a revision. A ledger replayed from
disk therefore reaches exactly the state the live agent had.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, Literal

import msgspec

from holon import records as r
from holon.projections.config import DEFAULT_CONFIG, ProjectionConfig
from holon.projections.snapshot import WorkingMemorySnapshot, derive_snapshot
from holon.projections.state import PlanEntry, RuntimeState, WorkItemEntry

__all__ = [
    "ARCHIVE_CHUNK",
    "VERIFICATION_MARKERS",
    "ActiveEpisodeBuilder",
    "EpisodeArchive",
    "TurnInterval",
    "WorkingMemoryState",
    "apply_memory",
    "command_of",
    "one_line",
]

#: Episodes per archive chunk. Appending copies one chunk and the (short) chunk index,
#: never the whole archive.
ARCHIVE_CHUNK: Final = 64

#: Substrings of a command (lowercased) that make its result a verification result.
VERIFICATION_MARKERS: Final = ("pytest", "test", "mypy", "ruff", "lint", "check", "verify", "tsc")

_COMMAND_CHARS: Final = 120


def one_line(text: str, limit: int = 160) -> str:
    """Collapse whitespace to single spaces and clip to ``limit`` characters (with ``…``)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def command_of(intent: r.ToolIntent) -> str:
    """A short, human-readable form of a tool call: the shell command, else ``tool path``."""
    args = intent.args
    for key in ("command", "cmd"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return one_line(value, _COMMAND_CHARS)
    for key in ("path", "file", "file_path", "filename"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return one_line(f"{intent.tool} {value}", _COMMAND_CHARS)
    return one_line(intent.tool, _COMMAND_CHARS)


class EpisodeArchive(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The finalized episodes, in order, as an append-only chunked sequence.

    ``episode_id`` equals the index, so :meth:`get` is O(1) and :meth:`latest` reads
    only the tail; appending never copies more than one chunk.
    """

    chunks: tuple[tuple[r.ContextEpisodeRecord, ...], ...] = ()
    count: int = 0

    def append(self, episode: r.ContextEpisodeRecord) -> EpisodeArchive:
        """A new archive with ``episode`` at the end."""
        if self.chunks and len(self.chunks[-1]) < ARCHIVE_CHUNK:
            chunks = (*self.chunks[:-1], (*self.chunks[-1], episode))
        else:
            chunks = (*self.chunks, (episode,))
        return EpisodeArchive(chunks=chunks, count=self.count + 1)

    def get(self, episode_id: int) -> r.ContextEpisodeRecord:
        """The episode with this id; raises ``IndexError`` if there is none."""
        if not 0 <= episode_id < self.count:
            raise IndexError(f"no episode {episode_id}; the archive holds {self.count}")
        return self.chunks[episode_id // ARCHIVE_CHUNK][episode_id % ARCHIVE_CHUNK]

    def latest(self, n: int) -> tuple[r.ContextEpisodeRecord, ...]:
        """The last ``n`` episodes, oldest first."""
        out: list[r.ContextEpisodeRecord] = []
        for chunk in reversed(self.chunks):
            if len(out) >= n:
                break
            out[:0] = chunk[max(0, len(chunk) - (n - len(out))) :]
        return tuple(out)

    def __iter__(self) -> Iterator[r.ContextEpisodeRecord]:
        for chunk in self.chunks:
            yield from chunk

    def __len__(self) -> int:
        return self.count


class TurnInterval(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Evidence counters since the previous turn_ended: what the next refresh reacts to.

    ``after_outcome`` is the outcome of the turn that opened the interval (a turn that
    ended ``waiting`` makes the next refresh a wake). ``to_seq``, ``ended_ts``,
    ``ended_turn`` and ``outcome`` are set when a turn_ended closes the interval.
    """

    from_seq: int | None = None
    after_outcome: str | None = None
    task_results: int = 0
    result_briefs: int = 0
    waits_opened: int = 0
    waits_resolved: int = 0
    to_seq: int | None = None
    ended_ts: int | None = None
    ended_turn: int | None = None
    outcome: Literal["completed", "waiting", "failed", "interrupted"] | None = None


class ActiveEpisodeBuilder(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Evidence of the episode in progress, merged record by record (every list bounded).

    ``work_item_id`` is the active work item when the episode began, or the first one
    activated during it; ``work`` and ``plan`` are that item's latest versions.
    """

    work_item_id: str | None = None
    work: WorkItemEntry | None = None
    plan: PlanEntry | None = None
    from_seq: int | None = None
    first_turn: int | None = None
    last_turn: int | None = None
    turns: int = 0
    tool_calls: int = 0
    failed_calls: int = 0
    files: tuple[str, ...] = ()
    files_omitted: int = 0
    commands: tuple[str, ...] = ()
    verification: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    results: tuple[str, ...] = ()


class WorkingMemoryState(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Revisioned working memory and episode state.

    ``snapshot`` is the snapshot at ``revision``; ``pending`` the delta not yet confirmed
    by a prompt_rendered (``pending_base`` the snapshot at its ``from_revision``);
    ``confirmed_revision`` the highest revision a prompt confirmed (``None`` before the
    first); ``compression_epoch`` counts finalized episodes; ``interval`` accumulates
    the current turn's evidence and ``closed_interval`` is the one the last turn_ended
    closed (read by the refresh).
    """

    snapshot: WorkingMemorySnapshot = WorkingMemorySnapshot()
    revision: int = 0
    pending: r.WorkingMemoryDelta | None = None
    pending_base: WorkingMemorySnapshot | None = None
    confirmed_revision: int | None = None
    compression_epoch: int = 0
    builder: ActiveEpisodeBuilder = ActiveEpisodeBuilder()
    archive: EpisodeArchive = EpisodeArchive()
    interval: TurnInterval = TurnInterval()
    closed_interval: TurnInterval | None = None

    @property
    def archived_episodes(self) -> int:
        """How many episodes have been finalized."""
        return self.archive.count


def _keep_last(items: tuple[str, ...], item: str, cap: int) -> tuple[str, ...]:
    """Append ``item`` (moving an equal earlier one to the end), keeping the last ``cap``."""
    if item in items:
        items = tuple(i for i in items if i != item)
    if len(items) >= cap:
        items = items[len(items) - cap + 1 :]
    return (*items, item)


def _fresh_builder(runtime: RuntimeState) -> ActiveEpisodeBuilder:
    active = runtime.active_work_item_id
    if active is None:
        return ActiveEpisodeBuilder()
    return ActiveEpisodeBuilder(
        work_item_id=active, work=runtime.work_items[active], plan=runtime.plans.get(active)
    )


def _track_work(builder: ActiveEpisodeBuilder, runtime: RuntimeState) -> ActiveEpisodeBuilder:
    """Adopt the first activated work item, and keep the episode's item and plan current."""
    if builder.work_item_id is None:
        active = runtime.active_work_item_id
        if active is None:
            return builder
        return msgspec.structs.replace(
            builder, work_item_id=active, work=runtime.work_items[active], plan=runtime.plans.get(active)
        )
    work = runtime.find_work_item(builder.work_item_id)
    plan = runtime.plans.get(builder.work_item_id, builder.plan)
    if work is builder.work and plan is builder.plan:
        return builder
    return msgspec.structs.replace(builder, work=work if work is not None else builder.work, plan=plan)


def _merge_tool_result(
    builder: ActiveEpisodeBuilder, runtime: RuntimeState, body: r.ToolResult, config: ProjectionConfig
) -> ActiveEpisodeBuilder:
    cap = config.episode_list_cap
    files = builder.files
    omitted = builder.files_omitted
    for path in body.touched_files:
        if path in files:
            continue
        if len(files) < cap:
            files = (*files, path)
        else:
            omitted += 1
    verification = builder.verification
    command = body.tool
    for execution in reversed(runtime.tools):
        if execution.call_id == body.call_id:
            if execution.intent is not None:
                command = command_of(execution.intent)
            break
    lowered = command.lower()
    if any(marker in lowered for marker in VERIFICATION_MARKERS):
        exit_part = f", exit {body.exit_code}" if body.exit_code is not None else ""
        verification = _keep_last(verification, f"{command}: {body.status}{exit_part}", cap)
    return msgspec.structs.replace(
        builder,
        files=files,
        files_omitted=omitted,
        verification=verification,
        failed_calls=builder.failed_calls + (body.status != "ok"),
    )


def apply_memory(
    memory: WorkingMemoryState,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig = DEFAULT_CONFIG,
) -> WorkingMemoryState:
    """Fold one record into working memory; ``runtime`` is the state *after* the record."""
    body = record.body
    kind = type(body)

    if kind is r.WorkingMemoryDelta:
        assert isinstance(body, r.WorkingMemoryDelta)
        base = memory.pending_base if memory.pending is not None else memory.snapshot
        return msgspec.structs.replace(
            memory,
            snapshot=derive_snapshot(runtime, config),
            revision=body.to_revision,
            pending=body,
            pending_base=base,
        )
    if kind is r.ContextEpisodeRecord:
        assert isinstance(body, r.ContextEpisodeRecord)
        return msgspec.structs.replace(
            memory,
            archive=memory.archive.append(body),
            compression_epoch=memory.compression_epoch + 1,
            builder=_fresh_builder(runtime),
        )
    if kind is r.PromptRendered:
        assert isinstance(body, r.PromptRendered)
        shown = body.working_memory_revision
        confirmed = shown if memory.confirmed_revision is None else max(memory.confirmed_revision, shown)
        if memory.pending is not None and shown >= memory.pending.to_revision:
            return msgspec.structs.replace(
                memory, confirmed_revision=confirmed, pending=None, pending_base=None
            )
        return msgspec.structs.replace(memory, confirmed_revision=confirmed)

    # Evidence and turn records: merge into the interval and the episode builder.
    builder = memory.builder
    interval = memory.interval
    seq = record.seq
    if builder.from_seq is None:
        builder = msgspec.structs.replace(builder, from_seq=seq)
    if interval.from_seq is None:
        interval = msgspec.structs.replace(interval, from_seq=seq)
    cap = config.episode_list_cap

    if kind is r.ToolIntent:
        assert isinstance(body, r.ToolIntent)
        builder = msgspec.structs.replace(
            builder,
            tool_calls=builder.tool_calls + 1,
            commands=_keep_last(builder.commands, command_of(body), cap),
        )
    elif kind is r.ToolResult:
        assert isinstance(body, r.ToolResult)
        builder = _merge_tool_result(builder, runtime, body, config)
    elif kind is r.TurnStarted:
        if builder.first_turn is None:
            builder = msgspec.structs.replace(builder, first_turn=record.turn)
    elif kind is r.TurnEnded:
        assert isinstance(body, r.TurnEnded)
        builder = msgspec.structs.replace(
            builder,
            first_turn=builder.first_turn if builder.first_turn is not None else record.turn,
            last_turn=record.turn,
            turns=builder.turns + 1,
        )
        closed = msgspec.structs.replace(
            interval, to_seq=seq, ended_ts=record.ts, ended_turn=record.turn, outcome=body.outcome
        )
        return msgspec.structs.replace(
            memory, builder=builder, interval=TurnInterval(after_outcome=body.outcome), closed_interval=closed
        )
    elif kind is r.WorkItem or kind is r.WorkItemState or kind is r.WorkPlan:
        builder = _track_work(builder, runtime)
    elif kind is r.Decision:
        assert isinstance(body, r.Decision)
        builder = msgspec.structs.replace(
            builder, decisions=_keep_last(builder.decisions, one_line(f"{body.id}: {body.text}"), cap)
        )
    elif kind is r.Brief:
        assert isinstance(body, r.Brief)
        if body.status != "ack":
            line = one_line(f"{body.status}: {body.text}")
            builder = msgspec.structs.replace(builder, results=_keep_last(builder.results, line, cap))
        if body.status == "result":
            interval = msgspec.structs.replace(interval, result_briefs=interval.result_briefs + 1)
    elif kind is r.TaskResult:
        assert isinstance(body, r.TaskResult)
        line = one_line(f"task {body.id} {body.status}: {body.summary}")
        builder = msgspec.structs.replace(builder, results=_keep_last(builder.results, line, cap))
        interval = msgspec.structs.replace(interval, task_results=interval.task_results + 1)
    elif kind is r.WaitingIntent:
        interval = msgspec.structs.replace(interval, waits_opened=interval.waits_opened + 1)
    elif kind is r.WaitingResolved:
        interval = msgspec.structs.replace(interval, waits_resolved=interval.waits_resolved + 1)

    if builder is memory.builder and interval is memory.interval:
        return memory
    return msgspec.structs.replace(memory, builder=builder, interval=interval)
