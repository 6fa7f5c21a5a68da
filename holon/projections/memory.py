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

from collections.abc import Callable, Iterator
from typing import Any, Final, Literal, TypeAlias, cast

import msgspec

import holon.records as r
from holon.projections.config import DEFAULT_CONFIG, ProjectionConfig
from holon.projections.entries import DERIVED_WORK_PREFIX, PlanEntry, RuntimeState, WorkItemEntry, working_dir
from holon.projections.evidence import (
    REQUEST_ROLES,
    VERIFICATION_MARKERS,
    is_verification,
    normalize_path,
    one_line,
    task_job,
)
from holon.projections.snapshot import WorkingMemorySnapshot, derive_snapshot

__all__ = [
    "ARCHIVE_CHUNK",
    "VERIFICATION_MARKERS",
    "ActiveEpisodeBuilder",
    "EpisodeArchive",
    "TurnInterval",
    "WorkingMemoryState",
    "apply_memory",
]

# An episode keeps each of its requests as one line of this many characters at most.
_REQUEST_LINE_CHARS: Final = 400

#: Episodes per archive chunk. Appending copies one chunk and the (short) chunk index,
#: never the whole archive.
ARCHIVE_CHUNK: Final = 64


class EpisodeArchive(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
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


class TurnInterval(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
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


class ActiveEpisodeBuilder(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
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
    last_seq: int | None = None
    tool_calls: int = 0
    failed_calls: int = 0
    files: tuple[str, ...] = ()
    files_omitted: int = 0
    commands: tuple[str, ...] = ()
    verification: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    requests: tuple[str, ...] = ()
    task_runs: tuple[r.TaskRun, ...] = ()


class WorkingMemoryState(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Revisioned working memory and episode state.

    ``snapshot`` is the snapshot at ``revision``; ``pending`` the delta not yet confirmed
    by a prompt_rendered (``pending_base`` the snapshot at its ``from_revision``);
    ``latest_delta`` the delta that made ``revision``, kept after a prompt confirmed it
    (the renderer shows it again so that confirming it does not change the prompt);
    ``confirmed_revision`` the highest revision a prompt confirmed (``None`` before the
    first); ``compression_epoch`` counts finalized episodes; ``interval`` accumulates
    the current turn's evidence and ``closed_interval`` is the one the last turn_ended
    closed (read by the refresh). ``closing`` is the episode a new session ended (its
    work ended with the session), finalized by the next post-turn refresh.
    """

    snapshot: WorkingMemorySnapshot = WorkingMemorySnapshot()
    revision: int = 0
    pending: r.WorkingMemoryDelta | None = None
    pending_base: WorkingMemorySnapshot | None = None
    latest_delta: r.WorkingMemoryDelta | None = None
    confirmed_revision: int | None = None
    compression_epoch: int = 0
    builder: ActiveEpisodeBuilder = ActiveEpisodeBuilder()
    archive: EpisodeArchive = EpisodeArchive()
    interval: TurnInterval = TurnInterval()
    closed_interval: TurnInterval | None = None
    closing: ActiveEpisodeBuilder | None = None

    @property
    def archived_episodes(self) -> int:
        """How many episodes have been finalized."""
        return self.archive.count


def _keep_last(items: tuple[str, ...], item: str, cap: int) -> tuple[str, ...]:
    """Append ``item`` (moving an equal earlier one to the end), keeping the last ``cap``."""
    if items and items[-1] == item:
        return items
    if item in items:
        at = items.index(item)  # items never holds duplicates
        items = items[:at] + items[at + 1 :]
    if len(items) >= cap:
        items = items[len(items) - cap + 1 :]
    return (*items, item)


def _is_derived(work_item_id: str | None) -> bool:
    return work_item_id is not None and work_item_id.startswith(DERIVED_WORK_PREFIX)


def _plan_of(runtime: RuntimeState, work_item_id: str) -> PlanEntry | None:
    # Work derived from the operator's requests has the plan of no work item (the one an
    # agent that declares no work keeps, e.g. Claude Code's TodoWrite list).
    return runtime.unscoped_plan if _is_derived(work_item_id) else runtime.plans.get(work_item_id)


def _fresh_builder(runtime: RuntimeState) -> ActiveEpisodeBuilder:
    work = runtime.current_work
    if work is None:
        return ActiveEpisodeBuilder()
    return ActiveEpisodeBuilder(work_item_id=work.id, work=work, plan=_plan_of(runtime, work.id))


def _track_work(builder: ActiveEpisodeBuilder, runtime: RuntimeState) -> ActiveEpisodeBuilder:
    """Adopt the first work the episode is on, and keep the episode's item and plan current.

    Work derived from the operator's requests yields to a work item the agent declares in
    the session: the declared item is the work those requests started (no episode ends there).
    """
    adopt = builder.work_item_id is None or (
        _is_derived(builder.work_item_id) and runtime.work_declared and runtime.active_stack
    )
    if adopt:
        work = runtime.current_work
        if work is None:
            return builder
        return msgspec.structs.replace(
            builder, work_item_id=work.id, work=work, plan=_plan_of(runtime, work.id)
        )
    work_item_id = builder.work_item_id
    assert work_item_id is not None
    work = builder.work if _is_derived(work_item_id) else runtime.find_work_item(work_item_id)
    plan = _plan_of(runtime, work_item_id) or builder.plan
    if work is builder.work and plan is builder.plan:
        return builder
    return msgspec.structs.replace(builder, work=work if work is not None else builder.work, plan=plan)


def _merge_tool_result(
    builder: ActiveEpisodeBuilder, runtime: RuntimeState, body: r.ToolResult, config: ProjectionConfig
) -> ActiveEpisodeBuilder:
    cap = config.episode_list_cap
    files = builder.files
    omitted = builder.files_omitted
    base = working_dir(runtime) if body.touched_files else None
    for raw in body.touched_files:
        # Keyed as the working set keys files, so `./a.py` and `a.py` are one file.
        path = normalize_path(raw, base=base)
        if not path or path in files:
            continue
        if len(files) < cap:
            files = (*files, path)
        else:
            omitted += 1
    verification = builder.verification
    command = body.tool
    for execution in reversed(runtime.tools):
        if execution.call_id == body.call_id:
            command = execution.command
            break
    if is_verification(command):
        exit_part = f", exit {body.exit_code}" if body.exit_code is not None else ""
        verification = _keep_last(verification, f"{command}: {body.status}{exit_part}", cap)
    return msgspec.structs.replace(
        builder,
        files=files,
        files_omitted=omitted,
        verification=verification,
        failed_calls=builder.failed_calls + (body.status != "ok"),
    )


_Replace = msgspec.structs.replace


def _on_delta(
    memory: WorkingMemoryState, runtime: RuntimeState, record: r.Record, config: ProjectionConfig
) -> WorkingMemoryState:
    body = cast(r.WorkingMemoryDelta, record.body)
    base = memory.pending_base if memory.pending is not None else memory.snapshot
    return _Replace(
        memory,
        snapshot=derive_snapshot(runtime, config),
        revision=body.to_revision,
        pending=body,
        pending_base=base,
        latest_delta=body,
    )


def _on_episode(
    memory: WorkingMemoryState, runtime: RuntimeState, record: r.Record, config: ProjectionConfig
) -> WorkingMemoryState:
    body = cast(r.ContextEpisodeRecord, record.body)
    if memory.closing is not None:
        # The episode of the session that ended: the new session's episode goes on.
        return _Replace(
            memory,
            archive=memory.archive.append(body),
            compression_epoch=memory.compression_epoch + 1,
            closing=None,
        )
    return _Replace(
        memory,
        archive=memory.archive.append(body),
        compression_epoch=memory.compression_epoch + 1,
        builder=_fresh_builder(runtime),
    )


def _on_prompt(
    memory: WorkingMemoryState, runtime: RuntimeState, record: r.Record, config: ProjectionConfig
) -> WorkingMemoryState:
    shown = cast(r.PromptRendered, record.body).working_memory_revision
    confirmed = shown if memory.confirmed_revision is None else max(memory.confirmed_revision, shown)
    if memory.pending is not None and shown >= memory.pending.to_revision:
        return _Replace(memory, confirmed_revision=confirmed, pending=None, pending_base=None)
    return _Replace(memory, confirmed_revision=confirmed)


def _on_turn_ended(
    memory: WorkingMemoryState, runtime: RuntimeState, record: r.Record, config: ProjectionConfig
) -> WorkingMemoryState:
    body = cast(r.TurnEnded, record.body)
    builder = memory.builder
    builder = _Replace(
        builder,
        from_seq=builder.from_seq if builder.from_seq is not None else record.seq,
        first_turn=builder.first_turn if builder.first_turn is not None else record.turn,
        last_turn=record.turn,
        turns=builder.turns + 1,
        last_seq=record.seq,
    )
    interval = memory.interval
    closed = _Replace(
        interval,
        from_seq=interval.from_seq if interval.from_seq is not None else record.seq,
        to_seq=record.seq,
        ended_ts=record.ts,
        ended_turn=record.turn,
        outcome=body.outcome,
    )
    return _Replace(
        memory, builder=builder, interval=TurnInterval(after_outcome=body.outcome), closed_interval=closed
    )


# Evidence handlers merge one record into the episode builder and/or the turn interval;
# they return the new pair (the same objects when nothing changed).
_Merge: TypeAlias = Callable[
    [ActiveEpisodeBuilder, TurnInterval, RuntimeState, r.Record, ProjectionConfig],
    tuple[ActiveEpisodeBuilder, TurnInterval],
]


def _merge_intent(
    builder: ActiveEpisodeBuilder,
    interval: TurnInterval,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig,
) -> tuple[ActiveEpisodeBuilder, TurnInterval]:
    # The runtime fold has just pushed this call as the newest tool execution.
    command = runtime.tools[-1].command
    commands = _keep_last(builder.commands, command, config.episode_list_cap)
    return _Replace(builder, tool_calls=builder.tool_calls + 1, commands=commands), interval


def _merge_result(
    builder: ActiveEpisodeBuilder,
    interval: TurnInterval,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig,
) -> tuple[ActiveEpisodeBuilder, TurnInterval]:
    return _merge_tool_result(builder, runtime, cast(r.ToolResult, record.body), config), interval


def _merge_turn_started(
    builder: ActiveEpisodeBuilder,
    interval: TurnInterval,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig,
) -> tuple[ActiveEpisodeBuilder, TurnInterval]:
    if builder.first_turn is None:
        builder = _Replace(builder, first_turn=record.turn)
    return builder, interval


def _merge_work(
    builder: ActiveEpisodeBuilder,
    interval: TurnInterval,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig,
) -> tuple[ActiveEpisodeBuilder, TurnInterval]:
    return _track_work(builder, runtime), interval


def _merge_request(
    builder: ActiveEpisodeBuilder,
    interval: TurnInterval,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig,
) -> tuple[ActiveEpisodeBuilder, TurnInterval]:
    # An operator's request may start the work the episode is on (derived from it), and
    # is part of what the episode keeps.
    body = cast(r.Message, record.body)
    if body.role not in REQUEST_ROLES:
        return builder, interval
    builder = _track_work(builder, runtime)
    line = one_line(body.text, _REQUEST_LINE_CHARS)
    return _Replace(builder, requests=_keep_last(builder.requests, line, config.episode_list_cap)), interval


def _merge_decision(
    builder: ActiveEpisodeBuilder,
    interval: TurnInterval,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig,
) -> tuple[ActiveEpisodeBuilder, TurnInterval]:
    body = cast(r.Decision, record.body)
    line = one_line(f"{body.id}: {body.text}")
    return _Replace(builder, decisions=_keep_last(builder.decisions, line, config.episode_list_cap)), interval


def _merge_brief(
    builder: ActiveEpisodeBuilder,
    interval: TurnInterval,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig,
) -> tuple[ActiveEpisodeBuilder, TurnInterval]:
    body = cast(r.Brief, record.body)
    if body.status != "ack":
        line = one_line(f"{body.status}: {body.text}")
        builder = _Replace(builder, results=_keep_last(builder.results, line, config.episode_list_cap))
    if body.status == "result":
        interval = _Replace(interval, result_briefs=interval.result_briefs + 1)
    return builder, interval


def _merge_task_result(
    builder: ActiveEpisodeBuilder,
    interval: TurnInterval,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig,
) -> tuple[ActiveEpisodeBuilder, TurnInterval]:
    body = cast(r.TaskResult, record.body)
    line = one_line(f"task {body.id} {body.status}: {body.summary}")
    done = runtime.finished_tasks[-1] if runtime.finished_tasks else None
    if done is None or done.result_seq != record.seq:
        done = None
    if done is not None and done.tool_calls:
        # What the sub-agent did, in a line the summary's clipping cannot cut.
        errors = f", {done.errors} failed" if done.errors else ""
        line = one_line(
            f"task {body.id} {body.status} ({done.tool_calls} tool calls{errors}): {body.summary}"
        )
    builder = _Replace(builder, results=_keep_last(builder.results, line, config.episode_list_cap))
    if done is not None and done.description:  # a result whose start is not in the ledger names no job
        run = r.TaskRun(id=body.id, job=task_job(done.description))
        runs = (*(x for x in builder.task_runs if x.id != body.id), run)
        builder = _Replace(builder, task_runs=runs[-config.episode_list_cap :])
    return builder, _Replace(interval, task_results=interval.task_results + 1)


def _merge_wait(
    builder: ActiveEpisodeBuilder,
    interval: TurnInterval,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig,
) -> tuple[ActiveEpisodeBuilder, TurnInterval]:
    return builder, _Replace(interval, waits_opened=interval.waits_opened + 1)


def _merge_resolved(
    builder: ActiveEpisodeBuilder,
    interval: TurnInterval,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig,
) -> tuple[ActiveEpisodeBuilder, TurnInterval]:
    # Only a resolution of an open wait is a wake: one of an unknown or already resolved
    # wait (carried by the runtime fold) resumes nothing.
    resolved = runtime.resolved_waits
    if not resolved or resolved[-1].resolved_seq != record.seq:
        return builder, interval
    return builder, _Replace(interval, waits_resolved=interval.waits_resolved + 1)


#: The evidence kinds a sub-agent's ``task_id`` tags (a brief's names the task it reports on).
_TASK_TAGGED: Final = frozenset({r.Message, r.ToolIntent, r.ToolResult, r.WorkPlan})
_Tagged: TypeAlias = r.Message | r.ToolIntent | r.ToolResult | r.WorkPlan


def _on_environment(
    memory: WorkingMemoryState, runtime: RuntimeState, record: r.Record, config: ProjectionConfig
) -> WorkingMemoryState:
    if runtime.session_seq == record.seq and memory.builder.turns and memory.closing is None:
        # A new session is new work: the episode in progress ends with the session it was
        # of (the next post-turn refresh finalizes it), and this one's starts here.
        return _Replace(memory, closing=memory.builder, builder=ActiveEpisodeBuilder(from_seq=record.seq))
    return _as_evidence(memory, runtime, record, config)


_MEMORY_HANDLERS: Final[
    dict[
        type[Any],
        Callable[[WorkingMemoryState, RuntimeState, r.Record, ProjectionConfig], WorkingMemoryState],
    ]
] = {
    r.WorkingMemoryDelta: _on_delta,
    r.ContextEpisodeRecord: _on_episode,
    r.PromptRendered: _on_prompt,
    r.TurnEnded: _on_turn_ended,
    r.ExecutionEnvironment: _on_environment,
}

_MERGES: Final[dict[type[Any], _Merge]] = {
    r.ToolIntent: _merge_intent,
    r.ToolResult: _merge_result,
    r.TurnStarted: _merge_turn_started,
    r.WorkItem: _merge_work,
    r.WorkItemState: _merge_work,
    r.WorkPlan: _merge_work,
    r.Message: _merge_request,
    r.Decision: _merge_decision,
    r.Brief: _merge_brief,
    r.TaskResult: _merge_task_result,
    r.WaitingIntent: _merge_wait,
    r.WaitingResolved: _merge_resolved,
}


def apply_memory(
    memory: WorkingMemoryState,
    runtime: RuntimeState,
    record: r.Record,
    config: ProjectionConfig = DEFAULT_CONFIG,
) -> WorkingMemoryState:
    """Fold one record into working memory; ``runtime`` is the state *after* the record."""
    handler = _MEMORY_HANDLERS.get(type(record.body))
    if handler is not None:
        return handler(memory, runtime, record, config)
    return _as_evidence(memory, runtime, record, config)


def _as_evidence(
    memory: WorkingMemoryState, runtime: RuntimeState, record: r.Record, config: ProjectionConfig
) -> WorkingMemoryState:
    """Merge an evidence record: the first one opens the episode's and the interval's seq range."""
    kind = type(record.body)
    builder = memory.builder
    interval = memory.interval
    if builder.from_seq is None:
        builder = _Replace(builder, from_seq=record.seq)
    if interval.from_seq is None:
        interval = _Replace(interval, from_seq=record.seq)
    merge = _MERGES.get(kind)
    if merge is not None and kind in _TASK_TAGGED and cast(_Tagged, record.body).task_id is not None:
        # A sub-agent's record: the runtime fold placed it in its task, and the episode's
        # tool calls, commands, files and plan are the agent's own.
        merge = None
    if merge is not None:
        builder, interval = merge(builder, interval, runtime, record, config)
    if builder is memory.builder and interval is memory.interval:
        return memory
    return _Replace(memory, builder=builder, interval=interval)
