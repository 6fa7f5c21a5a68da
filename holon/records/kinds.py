"""The record vocabulary: every fact a holon ledger can hold, as frozen msgspec Structs.

A :class:`Record` is an envelope (``seq``, ``ts``, ``turn``, ``kind``, schema version
``v``) around a *body*. Bodies are small frozen msgspec Structs, one class per record
kind; the ``kind`` string lives in the envelope so the ledger, the JSONL form and the
audit tables can route a record without decoding its body. The bytes they are written
as are :mod:`holon.records.wire`'s.

Kinds are grouped as in DESIGN.md: input evidence (appended by a daemon or importer),
runtime records (turn boundaries, rendered prompts) and derived records (appended by the
post-turn refresh, reproducible from the evidence before them).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal, TypeAlias

import msgspec

__all__ = [
    "BODY_TYPES",
    "DERIVED_KINDS",
    "JSON",
    "MAX_TS",
    "MIN_TS",
    "SCHEMA_VERSION",
    "BlobRef",
    "Body",
    "Brief",
    "ContextEpisodeRecord",
    "ContextSummary",
    "Decision",
    "ExecutionEnvironment",
    "FollowUp",
    "HistoryAnchor",
    "Message",
    "ModelCall",
    "Omission",
    "PlanStep",
    "ProjectionConfig",
    "PromptRendered",
    "Record",
    "SectionTokens",
    "SystemPolicy",
    "TaskResult",
    "TaskRun",
    "TaskStarted",
    "ToolDefinition",
    "ToolIntent",
    "ToolResult",
    "TurnEnded",
    "TurnStarted",
    "WaitingIntent",
    "WaitingResolved",
    "WorkItem",
    "WorkItemState",
    "WorkPlan",
    "WorkingMemoryDelta",
    "kind_of",
]

#: Version of the record schema written into every envelope (``v``). Readers accept
#: every version up to this one; a newer version is refused with a clear error.
#: Bumped whenever a body gains a field or a kind is added: bodies forbid unknown fields and
#: the codec unknown kinds, so an older reader would otherwise fail on the new field or kind
#: as on a damaged record (docs/ledger-format.md).
SCHEMA_VERSION: Final = 5

#: The ``ts`` a ledger accepts on append (inclusive): milliseconds since the Unix epoch,
#: from 1970 to the year 5138. Below is no time holon records (the importers refuse a
#: transcript's pre-1970 timestamps); above is a micro- or nanosecond clock taken for
#: milliseconds (today's time in microseconds already reads more). The one definition of
#: the range: the ledger's append check, the runtime's clock check and ``holon verify``'s
#: finding for older ledgers holding other values all mean this range.
MIN_TS: Final = 0
MAX_TS: Final = 10**14 - 1

JSON: TypeAlias = Any
"""A JSON-compatible value (tool arguments, tool schemas)."""


class _Body(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Base of all record bodies. ``KIND`` is the envelope tag of the subclass."""

    KIND: ClassVar[str]


# --------------------------------------------------------------------------- shared parts


class BlobRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A payload moved to the content-addressed blob store.

    ``hash`` is the lowercase blake3 hex digest of the original bytes, ``size`` their
    length, ``preview`` a short prefix kept inline so a reader can see what it is, and
    ``tail`` (schema version 4) its end, where a test runner or compiler says what failed.
    """

    hash: str
    size: int
    preview: str = ""
    tail: str = ""


class TaskRun(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A task result an episode lists (schema version 4): the task's ``id`` and its ``job``.

    ``job`` is the digest of the task's description (``holon.projections.task_job``):
    tasks given the same description are runs of one job, and a later run's result
    supersedes an earlier one's, which an archived episode must then not show as current.
    """

    id: str
    job: str


class PlanStep(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One step of a work plan."""

    id: str
    text: str
    status: Literal["pending", "in_progress", "done", "blocked", "skipped"] = "pending"


class ToolDefinition(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """A tool the model may call, as shown in the Stable section."""

    name: str
    description: str = ""
    parameters: dict[str, JSON] = {}


class SectionTokens(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Tokens one rendered section took, and the form it was admitted in."""

    section: str
    tokens: int
    form: Literal["full", "compact", "truncated", "omitted"] = "full"


class Omission(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Something left out of (or shortened in) a prompt, with the ref that restores it."""

    section: str
    ref: str
    reason: str
    tokens: int = 0


# --------------------------------------------------------------------------- input evidence


class Message(_Body, frozen=True, kw_only=True):
    """A conversational message: operator/user input, assistant output, system or channel text.

    ``task_id`` (schema version 4), on this and on :class:`ToolIntent`, :class:`ToolResult`
    and :class:`WorkPlan`, says the record is the evidence of a sub-agent: the task it
    belongs to (:class:`TaskStarted` ``id``), not the agent whose ledger holds it. A
    sub-agent's prompt, steps and findings are kept as ordinary evidence in the main
    agent's ledger, tagged, rather than in a ledger of their own (docs/memory-model.md).
    """

    KIND: ClassVar[str] = "message"
    role: Literal["user", "operator", "assistant", "system", "channel"]
    text: str
    channel: str | None = None
    name: str | None = None
    task_id: str | None = None


class Brief(_Body, frozen=True, kw_only=True):
    """A short structured report from the agent: acknowledgement, result or failure."""

    KIND: ClassVar[str] = "brief"
    status: Literal["ack", "result", "failure"]
    text: str
    work_item_id: str | None = None
    task_id: str | None = None


class ToolIntent(_Body, frozen=True, kw_only=True):
    """The agent is about to run a tool. Written *before* the side effect (tool WAL)."""

    KIND: ClassVar[str] = "tool_intent"
    call_id: str
    tool: str
    args: dict[str, JSON] = {}
    idempotency_key: str | None = None
    task_id: str | None = None


class ToolResult(_Body, frozen=True, kw_only=True):
    """The outcome of a tool call, joined to its intent by ``call_id``.

    Output is inline in ``output`` or, when large, stored as a blob (``blob``) with
    ``output`` left empty. ``unknown`` is recorded by the runtime when it reopens a ledger
    whose intent has no result (the process died during the side effect): whether the
    effect happened is not known, and the call is never re-executed silently.
    """

    KIND: ClassVar[str] = "tool_result"
    call_id: str
    tool: str
    status: Literal["ok", "error", "interrupted", "unknown"]
    output: str = ""
    blob: BlobRef | None = None
    exit_code: int | None = None
    touched_files: tuple[str, ...] = ()
    duration_ms: int | None = None
    task_id: str | None = None


class WorkItem(_Body, frozen=True, kw_only=True):
    """Declares (or redeclares, replacing every field) a unit of work."""

    KIND: ClassVar[str] = "work_item"
    id: str
    objective: str
    state: Literal["queued", "active", "waiting", "done", "abandoned"] = "queued"
    delivery_target: str | None = None
    scope_constraints: tuple[str, ...] = ()
    summary: str | None = None


class WorkItemState(_Body, frozen=True, kw_only=True):
    """Moves an existing work item to a new state (activate, wait, finish, abandon)."""

    KIND: ClassVar[str] = "work_item_state"
    id: str
    state: Literal["queued", "active", "waiting", "done", "abandoned"]
    reason: str | None = None


class WorkPlan(_Body, frozen=True, kw_only=True):
    """The current plan of a work item, replacing any earlier plan of that item whole.

    With a ``task_id`` it is that sub-agent's plan, replacing the task's earlier plan (it
    is neither a work item's plan nor the unscoped one).
    """

    KIND: ClassVar[str] = "work_plan"
    work_item_id: str | None
    steps: tuple[PlanStep, ...]
    task_id: str | None = None


class WaitingIntent(_Body, frozen=True, kw_only=True):
    """The agent is waiting on something outside itself (an operator, a task, a timer)."""

    KIND: ClassVar[str] = "waiting_intent"
    id: str
    waiting_on: str
    work_item_id: str | None = None
    resume_hint: str | None = None


class WaitingResolved(_Body, frozen=True, kw_only=True):
    """A wait ended: what was waited for arrived, was cancelled, or timed out."""

    KIND: ClassVar[str] = "waiting_resolved"
    id: str
    resolution: Literal["arrived", "cancelled", "timed_out"] = "arrived"
    detail: str | None = None


class TaskStarted(_Body, frozen=True, kw_only=True):
    """A background task (job, sub-agent) was started."""

    KIND: ClassVar[str] = "task_started"
    id: str
    description: str
    work_item_id: str | None = None


class TaskResult(_Body, frozen=True, kw_only=True):
    """A background task finished and its result rejoined the agent."""

    KIND: ClassVar[str] = "task_result"
    id: str
    status: Literal["ok", "error", "cancelled"]
    summary: str
    output: str = ""
    blob: BlobRef | None = None


class Decision(_Body, frozen=True, kw_only=True):
    """A decision the agent or operator made, with its rationale."""

    KIND: ClassVar[str] = "decision"
    id: str
    text: str
    rationale: str | None = None
    work_item_id: str | None = None


class FollowUp(_Body, frozen=True, kw_only=True):
    """Something to come back to; redeclared with ``status="done"`` when handled."""

    KIND: ClassVar[str] = "follow_up"
    id: str
    text: str
    status: Literal["open", "done", "dropped"] = "open"
    work_item_id: str | None = None


class ExecutionEnvironment(_Body, frozen=True, kw_only=True):
    """Where the agent works: workspace, current directory, VCS branch."""

    KIND: ClassVar[str] = "execution_environment"
    workspace: str | None = None
    cwd: str | None = None
    branch: str | None = None
    extra: dict[str, str] = {}


class SystemPolicy(_Body, frozen=True, kw_only=True):
    """The system/policy prompt and tool definitions: the Stable section's source."""

    KIND: ClassVar[str] = "system_policy"
    text: str
    tools: tuple[ToolDefinition, ...] = ()


class ContextSummary(_Body, frozen=True, kw_only=True):
    """A flat legacy summary (e.g. another tool's compaction). Shown only without working memory."""

    KIND: ClassVar[str] = "context_summary"
    text: str
    source: str | None = None


# --------------------------------------------------------------------------- runtime records


class TurnStarted(_Body, frozen=True, kw_only=True):
    """A turn begins: what woke the agent, and its input."""

    KIND: ClassVar[str] = "turn_started"
    trigger: str
    input: str | None = None


class TurnEnded(_Body, frozen=True, kw_only=True):
    """A turn ends, with how it ended."""

    KIND: ClassVar[str] = "turn_ended"
    outcome: Literal["completed", "waiting", "failed", "interrupted"]
    error: str | None = None


class HistoryAnchor(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Where a prompt's recent history began, and through which seq tool results were cleared.

    The next render keeps both while the history still fits, so between two moves the
    history only grows at its end (docs/context-rendering.md, "Stable history").
    """

    from_seq: int
    cleared_through: int = -1


class PromptRendered(_Body, frozen=True, kw_only=True):
    """A prompt was built and sent: the assembly plan's durable summary.

    Confirms that ``working_memory_revision`` was shown to the model, which clears a
    pending delta with that target revision. ``episodes`` lists the ids of the episodes
    rendered, so the next render at the same revision and epoch can keep the same
    selection (and a byte-identical cacheable prefix); ``history`` is where the recent
    history started, which the next render keeps while it can (schema version 2).
    """

    KIND: ClassVar[str] = "prompt_rendered"
    working_memory_revision: int
    compression_epoch: int
    cache_key: str
    prompt_hash: str
    total_tokens: int
    budget: int
    estimator: str
    sections: tuple[SectionTokens, ...] = ()
    omitted: tuple[Omission, ...] = ()
    render_config: dict[str, JSON] = {}
    episodes: tuple[int, ...] = ()
    history: HistoryAnchor | None = None


class ModelCall(_Body, frozen=True, kw_only=True):
    """One model call and the usage its provider reported (runtime record, schema version 5).

    Appended by :mod:`holon.runtime.loop` right after the provider answered, in the turn
    of the call. ``prompt_seq`` is the seq of the ``prompt_rendered`` record the request
    was built from; the request also held the turn's rounds after it (``round`` counts
    the calls made on that prompt, from 1). The provider's figures are normalised to one
    meaning for every provider: ``input_tokens`` is every input token of the request,
    cache reads and writes included (Anthropic reports the uncached rest as its
    ``input_tokens``; OpenAI's ``prompt_tokens`` / ``input_tokens`` already include the
    cached ones), ``cache_read_tokens`` what was read from the provider's prompt cache,
    ``cache_write_tokens`` what was written to it, ``output_tokens`` what the model wrote;
    a figure the provider did not report is None.
    ``estimated_input_tokens`` and ``estimated_cache_read_tokens`` are holon's own
    estimate of the same request (the render estimator's count of the prompt and rounds,
    and of the prefix the previous call of the agent sent as well), so the audit can put
    the real cache share beside the estimated one.
    """

    KIND: ClassVar[str] = "model_call"
    #: The API called: ``anthropic``, ``openai-chat``, ``openai-responses`` (the dialects of
    #: holon.runtime.loop), or the name a daemon's own dialect gives.
    provider: str
    model: str
    prompt_seq: int
    round: int
    input_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    estimated_input_tokens: int | None = None
    estimated_cache_read_tokens: int | None = None
    response_id: str | None = None
    stop_reason: str | None = None


# --------------------------------------------------------------------------- derived records


class ProjectionConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Caps and thresholds of the memory projections (see docs/memory-model.md).

    ``turn_cap`` is the hard episode length in turns; the ``*_cap`` values bound the
    lists of a :class:`~holon.projections.WorkingMemorySnapshot`, the ``*_window``
    values bound what :class:`~holon.projections.RuntimeState` keeps (``requests_window``:
    the newest distinct operator requests of a session held besides its first, each up to
    ``request_chars`` characters), and the
    ``episode_*`` values bound what one :class:`~holon.records.ContextEpisodeRecord`
    lists; ``task_list_cap`` bounds the commands, files and plan steps kept per task.
    Every list being bounded is what keeps the post-turn refresh flat in the length of
    the ledger.

    Defined here, in the vocabulary, because derived records state the config they were
    derived under (``projection``); it is the memory layer's, and exported from
    :mod:`holon.projections` with the rest of it (docs/memory-model.md).
    """

    turn_cap: int = 12
    # snapshot caps
    scope_cap: int = 12
    plan_cap: int = 24
    files_cap: int = 16
    decisions_cap: int = 8
    follow_ups_cap: int = 8
    waiting_cap: int = 6
    delta_lines_cap: int = 12
    # runtime windows
    messages_window: int = 24
    briefs_window: int = 12
    tools_window: int = 24
    files_window: int = 64
    finished_window: int = 16
    carried_window: int = 16
    requests_window: int = 64
    request_chars: int = 8_000
    failing_cap: int = 4
    # per-episode list caps
    episode_summary_cap: int = 8
    episode_list_cap: int = 16
    # tasks (schema version 4): running tasks and finished ones working memory shows,
    # and the commands, files and plan steps kept per task
    tasks_cap: int = 4
    task_list_cap: int = 8

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            if getattr(self, name) < 1:
                raise ValueError(f"ProjectionConfig.{name} must be at least 1, got {getattr(self, name)}")


class WorkingMemoryDelta(_Body, frozen=True, kw_only=True):
    """What changed in working memory between two revisions (derived).

    Appended after a turn_ended (the post-turn refresh), or right before a mid-turn
    prompt when evidence of the turn made something working memory shows untrue
    (reason ``superseded``, or the reason of what changed; schema version 2).

    ``projection`` is the projection config it was derived under (schema version 3; see
    :class:`ContextEpisodeRecord`).
    """

    KIND: ClassVar[str] = "working_memory_delta"
    from_revision: int
    to_revision: int
    reason: Literal[
        "active_work_changed", "task_rejoined", "wake_resumed", "plan_changed", "superseded", "turn_completed"
    ]
    changed_fields: tuple[str, ...]
    lines: tuple[str, ...]
    evidence_from_seq: int
    evidence_to_seq: int
    projection_version: int
    projection: ProjectionConfig | None = None


class ContextEpisodeRecord(_Body, frozen=True, kw_only=True):
    """An immutable archive of a finished stretch of work (derived, post-turn).

    ``work_state`` is the state of ``work_item_id`` when the episode was finalized
    (schema version 2; ``None`` in older records): episode selection leaves out the
    episodes of abandoned work. ``requests`` (schema version 4) are the operator's
    requests made during the episode, one line each: what was asked is part of what
    happened, and the words a later question is most likely to share. ``task_runs``
    (schema version 4) name the job of each task result its summary lines list (those
    whose start is in the ledger), oldest first: a later run of the job supersedes it.

    ``projection`` is the projection config it was derived under (schema version 3), or
    ``None`` for the default config of its ``projection_version``: the records of most
    ledgers stay as short as before, and from projection version 9 on a missing one states
    the default, where an older record states nothing. Replay folds a ledger under the
    config its derived records state, and an agent refuses to derive under another.
    """

    KIND: ClassVar[str] = "context_episode"
    episode_id: int
    boundary_reason: Literal[
        "active_work_switched", "wait_boundary", "task_rejoined", "result_checkpoint", "turn_cap"
    ]
    work_item_id: str | None
    first_turn: int
    last_turn: int
    from_seq: int
    to_seq: int
    objective: str | None = None
    delivery_target: str | None = None
    summary_lines: tuple[str, ...] = ()
    scope_hints: tuple[str, ...] = ()
    touched_files: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    verification: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    follow_ups: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    projection_version: int
    projection: ProjectionConfig | None = None
    work_state: Literal["queued", "active", "waiting", "done", "abandoned"] | None = None
    requests: tuple[str, ...] = ()
    task_runs: tuple[TaskRun, ...] = ()


Body: TypeAlias = (
    Message
    | Brief
    | ToolIntent
    | ToolResult
    | WorkItem
    | WorkItemState
    | WorkPlan
    | WaitingIntent
    | WaitingResolved
    | TaskStarted
    | TaskResult
    | Decision
    | FollowUp
    | ExecutionEnvironment
    | SystemPolicy
    | ContextSummary
    | TurnStarted
    | TurnEnded
    | PromptRendered
    | ModelCall
    | WorkingMemoryDelta
    | ContextEpisodeRecord
)

#: kind string -> body class, in declaration order.
BODY_TYPES: Final[dict[str, type[_Body]]] = {
    cls.KIND: cls
    for cls in (
        Message,
        Brief,
        ToolIntent,
        ToolResult,
        WorkItem,
        WorkItemState,
        WorkPlan,
        WaitingIntent,
        WaitingResolved,
        TaskStarted,
        TaskResult,
        Decision,
        FollowUp,
        ExecutionEnvironment,
        SystemPolicy,
        ContextSummary,
        TurnStarted,
        TurnEnded,
        PromptRendered,
        ModelCall,
        WorkingMemoryDelta,
        ContextEpisodeRecord,
    )
}

#: Kinds written by the post-turn refresh; replay verification re-derives them.
DERIVED_KINDS: Final = frozenset({WorkingMemoryDelta.KIND, ContextEpisodeRecord.KIND})


def kind_of(body: Body) -> str:
    """The envelope kind string of a body."""
    return type(body).KIND


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """A ledger entry: envelope plus body.

    ``seq`` is assigned by the ledger on append (pass ``-1``, the default, when building
    a record to append). ``ts`` is integer milliseconds supplied by the caller: holon
    never reads the clock on behalf of a record. ``turn`` is the turn index the record
    belongs to, or ``None`` for records outside any turn.
    """

    body: Body
    ts: int
    turn: int | None = None
    seq: int = -1
    v: int = SCHEMA_VERSION

    @property
    def kind(self) -> str:
        return type(self.body).KIND
