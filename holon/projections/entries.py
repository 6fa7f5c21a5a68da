"""The state's entries: what the runtime fold keeps of each thing the agent knows about.

Frozen, keyword-only structs: :class:`RuntimeState` and the entries of its containers
(work items, plans, waits, tasks, decisions, follow-ups, the working set, the recent
windows), and the readings of a state every layer above shares (:func:`derived_work`,
:func:`queued_work`, :func:`waiting_work`, :func:`working_dir`). The fold that builds
them is :mod:`holon.projections.state`.
"""

from __future__ import annotations

import posixpath
from typing import Any, Final, Literal, TypeAlias

import msgspec

import holon.records as r
from holon.projections.evidence import one_line

__all__ = [
    "DERIVED_WORK_PREFIX",
    "TERMINAL_WORK_STATES",
    "BriefEntry",
    "CarriedRecord",
    "DecisionEntry",
    "EnvironmentEntry",
    "FailingCheck",
    "FileTouch",
    "FollowUpEntry",
    "MandateEntry",
    "MessageEntry",
    "PlanEntry",
    "PolicyEntry",
    "PromptEntry",
    "RequestEntry",
    "ResultEntry",
    "RuntimeState",
    "SummaryEntry",
    "TaskEntry",
    "ToolExecution",
    "TurnState",
    "WaitEntry",
    "WorkItemEntry",
    "WorkState",
    "derived_work",
    "queued_work",
    "waiting_work",
    "working_dir",
]

#: Work item states after which an item leaves the open set.
TERMINAL_WORK_STATES: Final = frozenset({"done", "abandoned"})

WorkState: TypeAlias = Literal["queued", "active", "waiting", "done", "abandoned"]

#: The prefix of a derived work item's id: ``request:<seq>`` names the request it comes from.
DERIVED_WORK_PREFIX: Final = "request:"
# A derived objective is the first request on one line, as long as a declared one usually is.
_DERIVED_OBJECTIVE_CHARS: Final = 240


class _Entry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Base of state entries (frozen, keyword-only)."""


class TurnState(_Entry, frozen=True, kw_only=True):
    """The current (or last) turn: its index, what woke the agent, and whether it ended.

    ``started_seq`` is ``None`` when a turn_ended arrived without a turn_started;
    ``previous_started_seq`` is the turn before's (``None`` for the first turn, or when
    that one had none).
    """

    index: int | None
    trigger: str
    input: str | None = None
    started_seq: int | None = None
    ended_seq: int | None = None
    outcome: Literal["completed", "waiting", "failed", "interrupted"] | None = None
    previous_started_seq: int | None = None

    @property
    def recent_from(self) -> int | None:
        """The seq from which evidence is this turn's or the turn before's, as the prompts
        of this turn (while it is open) or of the next one (once it ended) count them."""
        return self.previous_started_seq if self.open else self.started_seq

    @property
    def open(self) -> bool:
        """True between turn_started and turn_ended."""
        return self.ended_seq is None


class WorkItemEntry(_Entry, frozen=True, kw_only=True):
    """A work item as last declared, with its current state and provenance seqs."""

    id: str
    objective: str
    state: WorkState
    delivery_target: str | None = None
    scope_constraints: tuple[str, ...] = ()
    summary: str | None = None
    declared_seq: int
    state_seq: int
    state_reason: str | None = None

    @property
    def seqs(self) -> tuple[int, ...]:
        """Seqs this entry came from (last declaration, last state change), in ledger order."""
        if self.state_seq == self.declared_seq:
            return (self.declared_seq,)
        return (min(self.declared_seq, self.state_seq), max(self.declared_seq, self.state_seq))


class PlanEntry(_Entry, frozen=True, kw_only=True):
    """The current plan of one work item (or the unscoped plan) and the seq that wrote it."""

    work_item_id: str | None
    steps: tuple[r.PlanStep, ...]
    seq: int


class WaitEntry(_Entry, frozen=True, kw_only=True):
    """A waiting intent; ``resolved_seq`` and ``resolution`` are set once it ended."""

    id: str
    waiting_on: str
    work_item_id: str | None = None
    resume_hint: str | None = None
    seq: int
    resolved_seq: int | None = None
    resolution: Literal["arrived", "cancelled", "timed_out"] | None = None
    detail: str | None = None


class TaskEntry(_Entry, frozen=True, kw_only=True):
    """A background task (a job, a sub-agent); result fields are set once it rejoined.

    ``started_seq`` is ``None`` for a result whose start is not in the ledger (imported
    or older than the ledger).

    The rest is the fold of the task's own evidence (records whose ``task_id`` is this
    task's id, while it runs), each part bounded by ``task_list_cap``: ``tool_calls``
    intents and ``errors`` results that are not ``ok``; ``commands``, the last distinct
    commands (oldest first); ``files``, the files its calls named or touched, most recently
    used last, ``files_omitted`` counting the times one was pushed out (a file pushed out
    twice counts twice); ``plan``, its latest plan's steps as working memory keeps a plan
    (done and skipped steps dropped first, then the tail), ``plan_omitted`` the rest, from
    the plan at ``plan_seq``; ``last_error``, one line of its newest failed call (the
    command, the status and the last line of the output), at ``last_error_seq``;
    ``last_seq``, its newest record; ``calls``, its newest calls still without a result (call
    id and command), which name the command of a failed result.
    """

    id: str
    description: str = ""
    work_item_id: str | None = None
    started_seq: int | None = None
    result_seq: int | None = None
    status: Literal["ok", "error", "cancelled"] | None = None
    summary: str | None = None
    blob: r.BlobRef | None = None
    tool_calls: int = 0
    errors: int = 0
    commands: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    files_omitted: int = 0
    plan: tuple[r.PlanStep, ...] = ()
    plan_seq: int | None = None
    plan_omitted: int = 0
    last_error: str | None = None
    last_error_seq: int | None = None
    last_seq: int | None = None
    calls: tuple[tuple[str, str], ...] = ()


class DecisionEntry(_Entry, frozen=True, kw_only=True):
    """A decision, as last declared."""

    id: str
    text: str
    rationale: str | None = None
    work_item_id: str | None = None
    seq: int


class FollowUpEntry(_Entry, frozen=True, kw_only=True):
    """A follow-up, with the seq that opened it and the seq that last changed it."""

    id: str
    text: str
    status: Literal["open", "done", "dropped"]
    work_item_id: str | None = None
    first_seq: int
    seq: int

    @property
    def seqs(self) -> tuple[int, ...]:
        """Seqs this entry came from (opening, and the last update if different)."""
        return (self.first_seq,) if self.first_seq == self.seq else (self.first_seq, self.seq)


class FileTouch(_Entry, frozen=True, kw_only=True):
    """A file in the recent working set: who touched it, first and last touch.

    ``first_seq`` is the touch that brought the file into the set *for this work item*;
    it stays put while the file keeps being used, so the snapshot does not churn.
    ``via`` says whether the last touch was a tool result's ``touched_files`` or a
    file-like tool argument.
    """

    path: str
    work_item_id: str | None
    first_seq: int
    last_seq: int
    via: Literal["touched", "argument"]


class MessageEntry(_Entry, frozen=True, kw_only=True):
    """A message in the recent-messages window."""

    seq: int
    ts: int
    turn: int | None
    message: r.Message


class BriefEntry(_Entry, frozen=True, kw_only=True):
    """A brief in the recent-briefs window."""

    seq: int
    ts: int
    turn: int | None
    brief: r.Brief


class ToolExecution(_Entry, frozen=True, kw_only=True):
    """A tool call: intent joined with its result by ``call_id``.

    An intent without a result is in flight, or its outcome is unknown (the process
    died after the intent was written); a result without an intent in the window has
    ``intent`` ``None``. Both seqs are kept so a renderer can cite either record.
    ``command`` is the short readable form of the call (see :func:`command_of`).
    """

    call_id: str
    tool: str
    command: str
    turn: int | None
    ts: int
    intent_seq: int | None = None
    result_seq: int | None = None
    intent: r.ToolIntent | None = None
    result: r.ToolResult | None = None

    @property
    def outcome(self) -> Literal["in_flight", "ok", "error", "interrupted", "unknown"]:
        """``in_flight`` until the result arrives, then the result's status."""
        return "in_flight" if self.result is None else self.result.status

    @property
    def seqs(self) -> tuple[int, ...]:
        """The seqs of the intent and result records present, in ledger order."""
        return tuple(s for s in (self.intent_seq, self.result_seq) if s is not None)


class RequestEntry(_Entry, frozen=True, kw_only=True):
    """An operator's request: a user or operator message of the main agent.

    ``text`` is the message's text up to ``ProjectionConfig.request_chars`` characters;
    ``chars`` is the whole text's length, so a renderer knows when to name the message's
    record (``seq``) for the rest. ``asked`` counts the times the session sent this same
    text since its first request (a "continue" or "keep going" sent every few turns): the
    newest of them is held, once.
    """

    seq: int
    turn: int | None
    text: str
    chars: int
    asked: int = 1

    @property
    def clipped(self) -> bool:
        """True when state holds only the start of the request."""
        return self.chars > len(self.text)


class MandateEntry(_Entry, frozen=True, kw_only=True):
    """The operator's requests of the current session: its first request and the newest ones.

    A session is the stretch of the ledger between two execution environments naming
    different ``extra["session_id"]`` values (the whole ledger when none names one).
    ``recent`` holds the newest distinct requests after the first (a request that repeats a
    held one's text replaces it, counted in its ``asked``): at most ``requests_window``;
    past that, the older half is dropped at once, so the oldest held ones stay put for
    half a window of new requests (they are what a prompt shows once the history moved
    past them); ``count``
    counts every request of the session, so ``omitted`` are the ones between that are no
    longer held (the ledger still has them).
    """

    session: str | None
    first: RequestEntry
    recent: tuple[RequestEntry, ...] = ()
    count: int = 1

    @property
    def requests(self) -> tuple[RequestEntry, ...]:
        """The requests held, oldest first: the first, then the newest ones."""
        return (self.first, *self.recent)

    @property
    def omitted(self) -> int:
        """Requests between the first and the newest held that state no longer holds."""
        return self.count - 1 - sum(q.asked for q in self.recent)


class FailingCheck(_Entry, frozen=True, kw_only=True):
    """A verification command (tests, lint, type check) whose latest run failed.

    Kept until the same command (its :func:`command_of` form) runs again and passes, or the
    session or the active work changes. ``tail`` is the end of its output (the last few
    non-blank lines, clipped), where test runners and compilers say what failed; for an
    output stored as a blob, the blob's own tail.
    """

    command: str
    tool: str
    seq: int
    status: str
    exit_code: int | None = None
    tail: str = ""
    work_item_id: str | None = None


class ResultEntry(_Entry, frozen=True, kw_only=True):
    """The latest result: a result brief or a task result."""

    seq: int
    source: Literal["brief", "task"]
    text: str
    status: str
    work_item_id: str | None = None
    task_id: str | None = None


class EnvironmentEntry(_Entry, frozen=True, kw_only=True):
    """The execution environment as last declared."""

    seq: int
    environment: r.ExecutionEnvironment


class PolicyEntry(_Entry, frozen=True, kw_only=True):
    """The system policy (Stable section source) as last declared."""

    seq: int
    policy: r.SystemPolicy


class SummaryEntry(_Entry, frozen=True, kw_only=True):
    """The latest flat legacy context summary."""

    seq: int
    summary: r.ContextSummary


class PromptEntry(_Entry, frozen=True, kw_only=True):
    """The last prompt_rendered record (the previous cache key, revision and epoch)."""

    seq: int
    prompt: r.PromptRendered


class CarriedRecord(_Entry, frozen=True, kw_only=True):
    """A record state could not place (e.g. a state change for an unknown work item).

    Kept, not dropped: the window shows the most recent ones and ``carried_count``
    counts them all, so nothing disappears silently.
    """

    seq: int
    kind: str
    turn: int | None
    note: str
    # Plain data (the body's msgpack form decoded untyped): a union of every body type
    # cannot be decoded from a checkpoint without the envelope's kind tag.
    body: Any


class RuntimeState(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """What the agent knows now: the fold of every record up to ``seq``.

    Open things are held whole (``work_items`` holds only queued / active / waiting
    items; ``waits``, ``tasks`` and ``follow_ups`` only open ones), finished things go
    to bounded windows. ``decisions`` holds, per open work item, its newest
    ``decisions_cap`` decisions (``unscoped_decisions`` those of no item), oldest first;
    ``decisions_over_cap`` (``unscoped_decisions_over_cap``) counts the decisions the cap
    pushed out of each of them, which still hold but are no longer kept.
    Dicts are in deterministic insertion order: for ``waits`` and ``follow_ups`` that is
    the order of their last update, for ``tasks`` the order they were (last) started; for
    ``files`` it is least-recently touched first.

    A sub-agent's evidence (a record with a ``task_id``) is not the agent's own: it is
    folded into its running task's entry (see :class:`TaskEntry`), and enters neither the
    recent windows, the working set, the plans nor the tool calls.

    ``session`` is the session the ledger is in (the last ``session_id`` an execution
    environment named; ``session_seq`` the environment record that started it, ``None``
    for the session the ledger began in), ``mandate`` the operator's requests of that session, and
    ``work_declared`` whether a work item was declared in it: where none was, the active
    work is derived from the requests (:func:`derived_work`). ``failing`` holds the
    verification commands whose latest run failed, oldest first.
    """

    seq: int = -1
    applied: int = 0
    turn: TurnState | None = None
    work_items: dict[str, WorkItemEntry] = {}
    active_stack: tuple[str, ...] = ()
    finished_work: tuple[WorkItemEntry, ...] = ()
    plans: dict[str, PlanEntry] = {}
    unscoped_plan: PlanEntry | None = None
    waits: dict[str, WaitEntry] = {}
    resolved_waits: tuple[WaitEntry, ...] = ()
    tasks: dict[str, TaskEntry] = {}
    finished_tasks: tuple[TaskEntry, ...] = ()
    decisions: dict[str, tuple[DecisionEntry, ...]] = {}
    unscoped_decisions: tuple[DecisionEntry, ...] = ()
    decisions_over_cap: dict[str, int] = {}
    unscoped_decisions_over_cap: int = 0
    follow_ups: dict[str, FollowUpEntry] = {}
    closed_follow_ups: tuple[FollowUpEntry, ...] = ()
    files: dict[str, FileTouch] = {}
    environment: EnvironmentEntry | None = None
    policy: PolicyEntry | None = None
    context_summary: SummaryEntry | None = None
    last_prompt: PromptEntry | None = None
    messages: tuple[MessageEntry, ...] = ()
    briefs: tuple[BriefEntry, ...] = ()
    tools: tuple[ToolExecution, ...] = ()
    latest_result: ResultEntry | None = None
    carried: tuple[CarriedRecord, ...] = ()
    carried_count: int = 0
    session: str | None = None
    session_seq: int | None = None
    mandate: MandateEntry | None = None
    work_declared: bool = False
    failing: tuple[FailingCheck, ...] = ()

    @property
    def active_work_item_id(self) -> str | None:
        """The active work item: the most recently activated item still active."""
        return self.active_stack[-1] if self.active_stack else None

    @property
    def active_work_item(self) -> WorkItemEntry | None:
        """The entry of :attr:`active_work_item_id`, if any."""
        return self.work_items[self.active_stack[-1]] if self.active_stack else None

    @property
    def current_work(self) -> WorkItemEntry | None:
        """The work the agent is on: the declared active item, else the work derived from the
        operator's requests (:func:`derived_work`), else ``None``."""
        return self.active_work_item if self.active_stack else derived_work(self)

    def find_work_item(self, work_item_id: str) -> WorkItemEntry | None:
        """An open work item, or a recently finished one, by id."""
        entry = self.work_items.get(work_item_id)
        if entry is not None:
            return entry
        for done in reversed(self.finished_work):
            if done.id == work_item_id:
                return done
        return None

    def plan_of(self, work_item_id: str | None) -> PlanEntry | None:
        """The plan of a work item, or the unscoped plan for ``None``."""
        if work_item_id is None:
            return self.unscoped_plan
        return self.plans.get(work_item_id)


def derived_work(state: RuntimeState) -> WorkItemEntry | None:
    """The active work derived from the operator's requests, when the session declares none.

    Most agents never declare a work item: their work is what the operator asked for. In a
    session in which no work item was declared, the first request of the session is the
    objective of one active work item, ``request:<seq>`` (its message's seq); every later
    request of the session belongs to it (a correction, an added constraint). A new
    session starts new work. ``None`` when the session declared a work item (the agent
    says what its work is) or holds no request yet.
    """
    mandate = state.mandate
    if mandate is None or state.work_declared:
        return None
    first = mandate.first
    return WorkItemEntry(
        id=f"{DERIVED_WORK_PREFIX}{first.seq}",
        objective=one_line(first.text, _DERIVED_OBJECTIVE_CHARS),
        state="active",
        declared_seq=first.seq,
        state_seq=first.seq,
    )


def queued_work(state: RuntimeState) -> tuple[WorkItemEntry, ...]:
    """Queued work items, oldest state change first (then id)."""
    return _work_in(state, "queued")


def waiting_work(state: RuntimeState) -> tuple[WorkItemEntry, ...]:
    """Waiting work items, oldest state change first (then id)."""
    return _work_in(state, "waiting")


def _work_in(state: RuntimeState, work_state: str) -> tuple[WorkItemEntry, ...]:
    items = [e for e in state.work_items.values() if e.state == work_state]
    items.sort(key=lambda e: (e.state_seq, e.id))
    return tuple(items)


def working_dir(state: RuntimeState) -> str | None:
    """The absolute directory the agent works in, without a final ``/``.

    The declared ``cwd``; a relative one is taken inside the ``workspace`` (``src`` in
    ``/repo`` is ``/repo/src``); no cwd is the workspace. None when none is declared, it
    is still relative, or it is the root (where every absolute path would lose its
    meaning-bearing ``/``).
    """
    entry = state.environment
    if entry is None:
        return None
    env = entry.environment
    directory = env.cwd or env.workspace or ""
    if env.cwd and not env.cwd.startswith("/") and env.workspace and env.workspace.startswith("/"):
        directory = posixpath.join(env.workspace, env.cwd)
    directory = posixpath.normpath(directory) if directory.startswith("/") else ""
    return directory.rstrip("/") or None
