"""What the renderer reads: a small, explicit view of the projection state.

:class:`ContextInputs` lists exactly the facts the sections are built from, so each
section builder can be tested on hand-made inputs; :func:`inputs_from_state` is the
one adapter from :class:`~holon.projections.ProjectionState`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

import holon.records as r
from holon.projections import (
    DEFAULT_CONFIG,
    DERIVED_WORK_PREFIX,
    BriefEntry,
    DecisionEntry,
    FailingCheck,
    MandateEntry,
    MessageEntry,
    PlanEntry,
    ProjectionConfig,
    ProjectionState,
    RuntimeState,
    ToolExecution,
    WaitEntry,
    WorkingMemorySnapshot,
    WorkingMemoryState,
    WorkItemEntry,
    queued_work,
    waiting_work,
)

__all__ = ["ContextInputs", "CurrentInput", "inputs_from_state"]

# Recently resolved waits shown as continuation context when the turn is a wake-up.
_RESOLVED_SHOWN: Final = 4
# Message roles that can be a turn's input (the rest are the agent's own or tool output).
_INPUT_ROLES: Final = frozenset({"user", "operator", "channel"})


class CurrentInput(msgspec.Struct, frozen=True, kw_only=True):
    """The input this turn answers: its text, what triggered it, and the seq it came from
    (``trigger_seq``: the ``turn_started`` record naming the trigger, which restores it
    when the prompt's minimum clips it)."""

    text: str
    trigger: str = "input"
    seq: int | None = None
    trigger_seq: int | None = None


class ContextInputs(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a prompt is rendered from (one turn's view of the ledger).

    - Stable: ``policy`` (system text and tool definitions).
    - AgentScoped: ``snapshot`` at ``working_memory_revision``; ``episodes`` are the
      archived episodes (or use an index, see :func:`~holon.context.build_context`);
      ``context_summary`` (legacy, shown only when the snapshot is empty).
    - TurnScoped: ``pending_delta`` (not yet confirmed by a prompt) and ``latest_delta``
      (the delta that made the current revision, confirmed or not); the live
      ``active_work`` and ``plan``; ``suspended`` (still active, under the current one),
      ``queued``,
      ``waiting`` work items and ``open_waits``; the recent ``messages``, ``briefs`` and
      ``tools`` windows (with their seqs); ``current_input``; ``resolved_waits`` and
      unknown-outcome calls (``tools`` entries without a result) as continuation context;
      ``environment`` and ``environment_seq``, the record that declared it;
      ``new_decisions`` — decisions of the active item (or of none) declared since working
      memory was derived, which the snapshot cannot show until the next revision;
      ``new_failing`` — likewise, verification commands of the active work that failed
      since then (a turn's prompt rendered again may no longer hold the failed run in its
      history, and working memory takes it in only at the turn's end).
    - ``previous`` is the last ``PromptRendered``: at an unchanged revision its episode
      selection is reused, which keeps the cacheable prefix byte-identical, and
      its history anchor is kept while it can be (see :mod:`holon.context.history`).
    - ``mandate``: the operator's requests of the session (the first and the newest);
      ``active_work`` is the work derived from them when the session declares none.
    - ``position``: the seq after the last record folded (``None``: after every record
      the view holds); the history is read from the ledger up to it, through the
      :class:`~holon.context.evidence.EvidenceView` the caller hands
      :func:`~holon.context.build_context`.
    - ``history_floor``: the recent windows hold every message, brief and tool call from
      this seq on (0: they never dropped anything): where the history of inputs rendered
      without a view of the ledger can start.
    - ``abandoned_work``: recently finished work items that were abandoned (their
      episodes are not selected).
    - ``previous_outcome``: how the last turn that ended ended (continuation context
      says so when it was interrupted or failed).
    - ``projection``: the projection config the state was folded under. It changes no
      byte of the prompt, but the renderer records it (when it is not the default) so
      replay can fold the ledger the same way and reproduce the derived records.
    """

    agent_id: str
    policy: r.SystemPolicy | None = None
    snapshot: WorkingMemorySnapshot = WorkingMemorySnapshot()
    working_memory_revision: int = 0
    compression_epoch: int = 0
    pending_delta: r.WorkingMemoryDelta | None = None
    latest_delta: r.WorkingMemoryDelta | None = None
    context_summary: r.ContextSummary | None = None
    context_summary_seq: int | None = None
    episodes: tuple[r.ContextEpisodeRecord, ...] = ()
    active_work: WorkItemEntry | None = None
    plan: PlanEntry | None = None
    new_decisions: tuple[DecisionEntry, ...] = ()
    new_failing: tuple[FailingCheck, ...] = ()
    suspended: tuple[WorkItemEntry, ...] = ()
    queued: tuple[WorkItemEntry, ...] = ()
    waiting: tuple[WorkItemEntry, ...] = ()
    open_waits: tuple[WaitEntry, ...] = ()
    resolved_waits: tuple[WaitEntry, ...] = ()
    environment: r.ExecutionEnvironment | None = None
    environment_seq: int | None = None
    messages: tuple[MessageEntry, ...] = ()
    briefs: tuple[BriefEntry, ...] = ()
    tools: tuple[ToolExecution, ...] = ()
    current_input: CurrentInput | None = None
    turn: int | None = None
    mandate: MandateEntry | None = None
    position: int | None = None
    previous: r.PromptRendered | None = None
    history_floor: int = 0
    abandoned_work: frozenset[str] = frozenset()
    previous_outcome: str | None = None
    projection: ProjectionConfig = DEFAULT_CONFIG


def _window_floor(window: Sequence[Any], cap: int, first_seq: Callable[[Any], int]) -> int:
    """The seq from which one recent window, oldest entry first, holds every entry.

    A window shorter than its cap has never dropped an entry, so it is complete from the
    beginning (0); a full one may have, so it is complete only from its oldest entry.
    """
    if len(window) < cap or not window:
        return 0
    return first_seq(window[0])


def _seq(entry: MessageEntry | BriefEntry) -> int:
    return entry.seq


def _first_seq(execution: ToolExecution) -> int:
    seqs = execution.seqs
    return min(seqs) if seqs else 0


def _turn_message(
    messages: Sequence[MessageEntry], turn: int | None, text: str | None
) -> MessageEntry | None:
    """The newest input message (user, operator or channel) of ``turn``, with ``text`` if given."""
    if turn is None:
        return None
    for entry in reversed(messages):
        if entry.turn == turn and entry.message.role in _INPUT_ROLES and text in (None, entry.message.text):
            return entry
    return None


def _current_input(runtime: RuntimeState) -> CurrentInput | None:
    """The input this turn answers, if any (an ended turn's input the history holds is history)."""
    turn = runtime.turn
    if turn is not None and turn.input is not None:
        # Importers record the input twice: on turn_started and as the turn's message.
        # The message then is the input, so the history must not show it a second time.
        message = _turn_message(runtime.messages, turn.index, turn.input)
        # Once the turn ended, the next model call comes in a turn not yet started: an
        # input the history holds as its message is history there, not a request still to
        # answer. One only turn_started holds stays here, the one place it is shown.
        if turn.open or message is None:
            seq = message.seq if message is not None else turn.started_seq
            return CurrentInput(text=turn.input, trigger=turn.trigger, seq=seq, trigger_seq=turn.started_seq)
    elif turn is not None and turn.open:
        # No explicit input (a wake-up or timer): the newest operator/user message of
        # this turn is what the agent answers.
        message = _turn_message(runtime.messages, turn.index, None)
        if message is not None:
            return CurrentInput(
                text=message.message.text, trigger=turn.trigger, seq=message.seq, trigger_seq=turn.started_seq
            )
    return None


def _new_decisions(
    runtime: RuntimeState, memory: WorkingMemoryState, active: WorkItemEntry | None
) -> tuple[DecisionEntry, ...]:
    """Decisions made this turn: working memory shows them only after the post-turn refresh."""
    since = memory.interval.from_seq
    shown = {(d.id, d.text) for d in memory.snapshot.decisions}
    live = (
        *(runtime.decisions.get(active.id, ()) if active is not None else ()),
        *runtime.unscoped_decisions,
    )
    return tuple(
        sorted(
            (d for d in live if since is not None and d.seq >= since and (d.id, d.text) not in shown),
            key=lambda d: d.seq,
        )
    )


def _new_failing(
    runtime: RuntimeState, memory: WorkingMemoryState, active: WorkItemEntry | None
) -> tuple[FailingCheck, ...]:
    """Checks that failed this turn: working memory shows them after the post-turn refresh."""
    since = memory.interval.from_seq
    known = {(f.command, f.seq) for f in memory.snapshot.failing}
    scope = active.id if active is not None else None
    return tuple(
        f
        for f in runtime.failing
        if since is not None and f.seq >= since and f.work_item_id == scope
        if (f.command, f.seq) not in known
    )


def inputs_from_state(
    state: ProjectionState, *, agent_id: str, include_episodes: bool = True
) -> ContextInputs:
    """The renderer's view of a projection state.

    ``include_episodes=False`` leaves ``episodes`` empty, for callers that keep an
    incremental :class:`~holon.context.search.EpisodeIndex` instead (its cost does not
    grow with the archive).
    """
    runtime = state.runtime
    memory = state.memory
    active = runtime.current_work
    derived = active is not None and active.id.startswith(DERIVED_WORK_PREFIX)
    plan = runtime.plan_of(active.id) if active is not None and not derived else runtime.unscoped_plan
    turn = runtime.turn
    since = memory.interval.from_seq
    resolved = tuple(
        w for w in runtime.resolved_waits if since is not None and (w.resolved_seq or -1) >= since
    )[-_RESOLVED_SHOWN:]
    config = state.config
    floors = (
        _window_floor(runtime.messages, config.messages_window, _seq),
        _window_floor(runtime.briefs, config.briefs_window, _seq),
        _window_floor(runtime.tools, config.tools_window, _first_seq),
    )
    return ContextInputs(
        agent_id=agent_id,
        policy=runtime.policy.policy if runtime.policy is not None else None,
        snapshot=memory.snapshot,
        working_memory_revision=memory.revision,
        compression_epoch=memory.compression_epoch,
        pending_delta=memory.pending,
        latest_delta=memory.latest_delta,
        context_summary=runtime.context_summary.summary if runtime.context_summary is not None else None,
        context_summary_seq=runtime.context_summary.seq if runtime.context_summary is not None else None,
        episodes=tuple(memory.archive) if include_episodes else (),
        active_work=active,
        plan=plan,
        new_decisions=_new_decisions(runtime, memory, active),
        new_failing=_new_failing(runtime, memory, active),
        suspended=tuple(runtime.work_items[i] for i in reversed(runtime.active_stack[:-1])),
        queued=queued_work(runtime),
        waiting=waiting_work(runtime),
        open_waits=tuple(runtime.waits.values()),
        resolved_waits=resolved,
        environment=runtime.environment.environment if runtime.environment is not None else None,
        environment_seq=runtime.environment.seq if runtime.environment is not None else None,
        messages=runtime.messages,
        briefs=runtime.briefs,
        tools=runtime.tools,
        current_input=_current_input(runtime),
        turn=turn.index if turn is not None else None,
        previous=runtime.last_prompt.prompt if runtime.last_prompt is not None else None,
        abandoned_work=frozenset(
            w.id for w in runtime.finished_work if w.state == "abandoned" and w.id not in runtime.work_items
        ),
        previous_outcome=memory.interval.after_outcome,
        history_floor=max(floors),
        mandate=runtime.mandate,
        position=runtime.seq + 1,
        projection=config,
    )
