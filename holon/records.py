"""The record vocabulary: every fact a holon ledger can hold.

A :class:`Record` is an envelope (``seq``, ``ts``, ``turn``, ``kind``, schema version
``v``) around a *body*. Bodies are small frozen msgspec Structs, one class per record
kind; the ``kind`` string lives in the envelope so the ledger, the JSONL form and the
audit tables can route a record without decoding its body.

Wire form (msgpack in ledger frames, JSON in the canonical JSONL form)::

    {"seq": 12, "ts": 1700000000000, "turn": 3, "kind": "tool_result", "v": 1,
     "body": {"call_id": "c7", "tool": "bash", "status": "ok", ...}}

Decoding validates once, at the edge: an unknown kind or a wrongly typed field raises
:class:`~holon.errors.InvalidRecord` naming the seq (or JSONL line) and the field.
Inner code trusts the types.

Kinds are grouped as in DESIGN.md: input evidence (appended by a daemon or importer),
runtime records (turn boundaries, rendered prompts) and derived records (appended by the
post-turn refresh, reproducible from the evidence before them).
"""

from __future__ import annotations

import codecs
import difflib
import json
import math
import re
from collections.abc import Callable
from typing import Any, ClassVar, Final, Literal, TypeAlias, Union

import msgspec
import msgspec.inspect

from holon.errors import InvalidRecord

__all__ = [
    "BODY_TYPES",
    "DECODE_ERRORS",
    "DERIVED_KINDS",
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
    "check_json_fields",
    "check_payload",
    "decode_json_record",
    "decode_msgpack_record",
    "encode_json_record",
    "encode_msgpack_record",
    "encode_msgpack_record_into",
    "json_cut_off",
    "kind_of",
    "lone_surrogate",
    "non_json_value",
    "ts_out_of_range",
    "utf8_error",
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


# --------------------------------------------------------------------------- codec
#
# The msgpack wire form is the map {"seq", "ts", "turn", "kind", "v", "body"}, in that key
# order (the bytes are hashed into the ledger chain, so the encoding must never drift).
#
# Encoding builds the map without an intermediate struct: a 10-element tuple whose odd
# elements are pre-encoded msgpack keys (msgspec.Raw is copied verbatim) encodes as the
# fixarray marker 0x9a followed by exactly the bytes of the 6-entry map, so patching that
# one byte to the fixmap marker 0x86 gives the map. This is byte-identical to encoding a
# struct with those six fields (tests check it) and about 1.5x faster.
#
# Decoding is one msgspec pass over a tagged union of per-kind envelopes (``kind`` is the
# tag), so the body is validated against its class in the same pass as the envelope. When
# that fails, the two-stage decoder (envelope, then body by kind) runs to produce the
# precise error: a newer schema version or an unknown kind is named before a body error.


class _WireOut(msgspec.Struct, frozen=True, array_like=False):
    seq: int
    ts: int
    turn: int | None
    kind: str
    v: int
    body: Any


class _WireIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    seq: int
    ts: int
    turn: int | None
    kind: str
    v: int
    body: msgspec.Raw


_MSGPACK_ENCODER = msgspec.msgpack.Encoder()
_JSON_ENCODER = msgspec.json.Encoder()
_MSGPACK_ENVELOPE = msgspec.msgpack.Decoder(_WireIn)
_JSON_ENVELOPE = msgspec.json.Decoder(_WireIn)
_MSGPACK_BODIES = {kind: msgspec.msgpack.Decoder(cls) for kind, cls in BODY_TYPES.items()}
_JSON_BODIES = {kind: msgspec.json.Decoder(cls) for kind, cls in BODY_TYPES.items()}

_FIXARRAY_10: Final = 0x9A
_FIXMAP_6: Final = 0x86
_KEY_SEQ: Final = msgspec.Raw(_MSGPACK_ENCODER.encode("seq"))
_KEY_TS: Final = msgspec.Raw(_MSGPACK_ENCODER.encode("ts"))
_KEY_TURN: Final = msgspec.Raw(_MSGPACK_ENCODER.encode("turn"))
_KEY_BODY: Final = msgspec.Raw(_MSGPACK_ENCODER.encode("body"))
# "kind" key, the kind string and the "v" key, per body class: one Raw for three items.
_KIND_AND_V_KEY: Final[dict[type, msgspec.Raw]] = {
    cls: msgspec.Raw(
        _MSGPACK_ENCODER.encode("kind") + _MSGPACK_ENCODER.encode(kind) + _MSGPACK_ENCODER.encode("v")
    )
    for kind, cls in BODY_TYPES.items()
}
_encode_into = _MSGPACK_ENCODER.encode_into


def _envelope_struct(kind: str, cls: type[_Body]) -> type[msgspec.Struct]:
    """The single-pass decode target for one kind: the envelope with a typed body."""
    return msgspec.defstruct(
        f"_Wire_{kind}",
        [("seq", int), ("ts", int), ("turn", int | None), ("v", int), ("body", cls)],
        tag_field="kind",
        tag=kind,
        frozen=True,
        forbid_unknown_fields=True,
        gc=False,
    )


_ENVELOPES: Final = tuple(_envelope_struct(kind, cls) for kind, cls in BODY_TYPES.items())
_MSGPACK_FAST: Final = msgspec.msgpack.Decoder(Union[_ENVELOPES])  # noqa: UP007
_JSON_FAST: Final = msgspec.json.Decoder(Union[_ENVELOPES])  # noqa: UP007

_PATH_RE = re.compile(r"at `\$(?P<path>[^`]*)`")


def _split_error(exc: msgspec.DecodeError, prefix: str) -> tuple[str, str | None]:
    """Turn msgspec's "... - at `$.a.b`" into (message, "prefix.a.b").

    The path is found only in msgspec's words; worded otherwise, the whole text is the
    message and no field is named (the record is refused all the same).
    """
    text = str(exc)
    match = _PATH_RE.search(text)
    if match is None:
        return text, None
    message = text[: match.start()].rstrip(" -")
    path = match.group("path").lstrip(".")
    return message, f"{prefix}.{path}".strip(".") if prefix or path else None


_ENVELOPE_FIELDS: Final = ("seq", "ts", "turn", "kind", "v", "body")
_STEP_RE = re.compile(r"\.?([^.\[]+)|\[(\d+)\]")


def _single(t: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """``X | None`` as ``X`` (the type a present value must have); other types unchanged."""
    if isinstance(t, msgspec.inspect.UnionType):
        members = [m for m in t.types if not isinstance(m, msgspec.inspect.NoneType)]
        if len(members) == 1:
            return members[0]
    return t


def _type_at(kind: str | None, field: str | None) -> msgspec.inspect.Type | None:
    """The declared type at ``field`` (``body.steps[0].status``) of a record of ``kind``.

    None when the path leaves the body or cannot be followed (an ambiguous union).
    """
    body = BODY_TYPES.get(kind) if kind is not None else None
    if body is None or field is None or not (field == "body" or field.startswith(("body.", "body["))):
        return None
    current: msgspec.inspect.Type = msgspec.inspect.type_info(body)
    for name, _index in _STEP_RE.findall(field[len("body") :]):
        current = _single(current)
        if name:
            if not isinstance(current, msgspec.inspect.StructType):
                return None
            found = [f.type for f in current.fields if f.encode_name == name]
            if not found:
                return None
            current = found[0]
        elif isinstance(current, msgspec.inspect.ListType | msgspec.inspect.VarTupleType):
            current = current.item_type
        else:
            return None
    return _single(current)


#: What :func:`_value_at` returns for a value it cannot find.
_ABSENT: Final = object()


def _value_at(value: Any, field: str | None) -> Any:
    """The value at ``field`` (``body.steps[0]``) inside a plainly decoded record, or _ABSENT."""
    for name, index in _STEP_RE.findall(field or ""):
        if name and isinstance(value, dict):
            value = value.get(name, _ABSENT)
        elif not name and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return _ABSENT
    return value


def _explain(message: str, kind: str | None, field: str | None, plain: Callable[[], Any]) -> str:
    """msgspec's message with what to do: the accepted values, the nearest field name.

    Which hint is decided by the type declared at ``field`` and by what the record holds
    there (``plain()``: the record decoded without a schema), never by msgspec's words,
    which are shown as they are.
    """
    target = _type_at(kind, field)
    if isinstance(target, msgspec.inspect.LiteralType):
        return f"{message}; expected one of {', '.join(map(repr, target.values))}"
    if field is None:
        names: tuple[str, ...] = _ENVELOPE_FIELDS
    elif isinstance(target, msgspec.inspect.StructType):
        names = tuple(f.encode_name for f in target.fields)
    else:
        return message
    value = _value_at(plain(), field)
    if value is _ABSENT:
        return message
    if isinstance(value, dict):
        unknown = next((key for key in value if isinstance(key, str) and key not in names), None)
        if unknown is not None:
            close = difflib.get_close_matches(unknown, names, n=1, cutoff=0.7)
            if close:
                return f"{message}; did you mean `{close[0]}`?"
            return f"{message}; the fields are: {', '.join(names)}"
    if field is None and not (isinstance(value, dict) and all(name in value for name in names)):
        return f"{message}; a record is an object with the fields {', '.join(_ENVELOPE_FIELDS)}"
    return message


def _to_wire(record: Record) -> _WireOut:
    return _WireOut(record.seq, record.ts, record.turn, type(record.body).KIND, record.v, record.body)


def encode_msgpack_record_into(
    record: Record, buf: bytearray, seq: int | None = None, *, offset: int | None = None
) -> int:
    """Write a record's msgpack wire form into ``buf``; return its length in bytes.

    The bytes go at ``offset`` (default: the end of ``buf``) and ``buf`` ends right after
    them. ``seq`` overrides ``record.seq`` (the ledger assigns seqs without copying the
    record).
    Raises TypeError for a body that is not a record kind, and msgspec.EncodeError /
    TypeError / OverflowError for values msgpack cannot hold.
    """
    start = len(buf) if offset is None else offset
    body = record.body
    try:
        kind_and_v_key = _KIND_AND_V_KEY[type(body)]
    except KeyError:
        raise TypeError(f"{type(body).__name__} is not a record body class") from None
    _encode_into(
        (
            _KEY_SEQ,
            record.seq if seq is None else seq,
            _KEY_TS,
            record.ts,
            _KEY_TURN,
            record.turn,
            kind_and_v_key,
            record.v,
            _KEY_BODY,
            body,
        ),
        buf,
        start,
    )
    buf[start] = _FIXMAP_6
    return len(buf) - start


def encode_msgpack_record(record: Record) -> bytes:
    """Encode a record to its msgpack wire form (the ledger frame payload)."""
    buf = bytearray()
    encode_msgpack_record_into(record, buf)
    return bytes(buf)


def encode_json_record(record: Record) -> bytes:
    """Encode a record to one canonical JSONL line (without the trailing newline)."""
    return _JSON_ENCODER.encode(_to_wire(record))


# --------------------------------------------------------------------------- what bytes hold
#
# msgspec's messages are for people and change between versions (0.23 reports text that is
# not UTF-8 as a DecodeError worded its own way where older versions raised
# UnicodeDecodeError). holon decides nothing by them: what is wrong with bytes a decoder
# refused (text that is not UTF-8, half a surrogate pair, a value cut off) is found in the
# bytes themselves, and only once a decode failed, so the happy path pays nothing.

#: What a msgspec decoder raises for bytes it cannot decode: before 0.23, msgspec raised
#: UnicodeDecodeError for a string that is not UTF-8; from 0.23 on, a DecodeError.
DECODE_ERRORS: Final = (msgspec.DecodeError, UnicodeDecodeError)

_UTF8_PIECE: Final = 1 << 20


def utf8_error(data: bytes | bytearray | memoryview, *, final: bool = True) -> tuple[int, str] | None:
    """The offset of the first byte of ``data`` that is not UTF-8 text, and why; None if all of it is.

    With ``final=False``, a character cut short by the end of ``data`` is no error: more bytes
    may follow (a line cut off mid-character is cut off, not in another encoding). Decoded a
    piece at a time, so checking a large file holds no second copy of it as text.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data).cast("B")
    size = len(view)
    for start in range(0, size, _UTF8_PIECE):
        held = len(decoder.getstate()[0])  # bytes of a character the last piece cut short
        try:
            decoder.decode(view[start : start + _UTF8_PIECE], final=final and start + _UTF8_PIECE >= size)
        except UnicodeDecodeError as exc:
            return start - held + exc.start, exc.reason
    return None


_HIGH_SURROGATE: Final = rb"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW_SURROGATE: Final = rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
# Each starts with its escape, so a search runs at the speed of a plain one; both may also
# find text after an escaped backslash (`\\ud800`), which _escape_starts_at tells apart.
_MAYBE_LONE_HIGH: Final = re.compile(_HIGH_SURROGATE + rb"(?!" + _LOW_SURROGATE + rb")")
_MAYBE_LONE_LOW: Final = re.compile(
    _LOW_SURROGATE
    + rb"(?:(?<!"
    + _HIGH_SURROGATE
    + _LOW_SURROGATE
    + rb")|(?<=\\"
    + _HIGH_SURROGATE
    + _LOW_SURROGATE
    + rb"))"
)
_HIGH_SURROGATE_ESCAPE: Final = re.compile(_HIGH_SURROGATE)


def _escape_starts_at(data: bytes, at: int) -> bool:
    """Whether the backslash at ``at`` starts an escape: an even number of backslashes precede it."""
    before = at
    while before and data[before - 1] == 0x5C:
        before -= 1
    return (at - before) % 2 == 0


def lone_surrogate(data: bytes, start: int = 0) -> tuple[int, bytes] | None:
    """The first escape in JSON text, from ``start``, of half a UTF-16 surrogate pair, and its offset.

    ``\\ud800`` not followed by the escape of a low surrogate, or ``\\udc00`` not preceded by
    that of a high one: valid JSON grammar, but no Unicode text (JavaScript and Python's
    json.dumps write one for a string cut mid-emoji). None when ``data`` holds none.
    """
    found: int | None = None
    pos = start
    while (match := _MAYBE_LONE_HIGH.search(data, pos)) is not None:
        if _escape_starts_at(data, match.start()):
            found = match.start()
            break
        pos = match.start() + 1
    pos = start
    end = len(data) if found is None else found
    while (match := _MAYBE_LONE_LOW.search(data, pos, end)) is not None:
        at = match.start()
        paired = at >= 6 and _HIGH_SURROGATE_ESCAPE.match(data, at - 6) and _escape_starts_at(data, at - 6)
        if _escape_starts_at(data, at) and not paired:
            found = at
            break
        pos = at + 1
    return None if found is None else (found, data[found : found + 6])


# A string the text ends in, an escape it cuts short included (str patterns: the stdlib's
# positions count characters).
_JSON_STRING_START: Final = re.compile(
    r'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+(?:\\(?:u[0-9a-fA-F]{0,3})?)?\Z'
)
# A number the text ends in, perhaps cut short (`-`, `1.`, `2e+`).
_JSON_NUMBER_START: Final = re.compile(
    r"-?(?:(?:0|[1-9][0-9]*)(?:\.(?:[0-9]+(?:[eE][+-]?[0-9]*)?)?|[eE][+-]?[0-9]*)?)?\Z"
)
_JSON_NUMBER_CHARS: Final = frozenset("0123456789.eE+-")
_JSON_WORDS: Final = ("true", "false", "null")


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


_STRICT_JSON: Final = json.JSONDecoder(parse_constant=_no_constant)


def json_cut_off(data: bytes) -> bool:
    """Whether ``data`` is JSON text cut off in the middle of its value.

    True when all of ``data`` is the start of one JSON value and the value has not ended:
    bytes added after it could make it JSON, and none of it needs to change (the whole of a
    copy taken while its writer was still writing); so is text with no value yet (empty, or
    only whitespace). Text is not checked for UTF-8 here (:func:`utf8_error` does that).

    The stdlib's parser reads it (in C): where it stops (its ``pos``, never its words) and
    what the text holds from there say whether the text was cut off there.
    """
    text = data.decode("utf-8", "replace")
    pos = _stops_at(text)
    if pos is None:
        return False  # a whole value; NaN or an infinity (no JSON); or nested too deeply to tell
    if pos >= len(text):
        return True  # a value, a key, a colon or a closing bracket was still to come
    if text[pos - 1 : pos] == "\\":  # at an escape, so in a string: one it cuts short?
        quote = _opening_quote(text, pos)
        return quote >= 0 and _JSON_STRING_START.match(text, quote) is not None
    start = pos
    while start and text[start - 1] in _JSON_NUMBER_CHARS:
        start -= 1
    if start < pos and text[start] in "-0123456789":
        # The parser read the start of a number (`1` of `1.`): is the rest the rest of one?
        return _JSON_NUMBER_START.match(text, start) is not None
    # What came before `pos`: a string may follow "[", "{", ":", "," or nothing; a value may
    # follow "[", ":", nothing, or a "," in an array (the parser is asked which).
    before = pos
    while before and text[before - 1] in " \t\n\r":
        before -= 1
    after = text[before - 1] if before else ""
    if text[pos] == '"':
        return after in ("", "[", "{", ":", ",") and _JSON_STRING_START.match(text, pos) is not None
    rest = text[pos:] if len(text) - pos < len("false") else ""  # the start of a word, or `-`?
    if rest == "-" or any(rest and len(rest) < len(word) and word.startswith(rest) for word in _JSON_WORDS):
        return after in ("", "[", ":") or (after == "," and _accepts(text, pos, "0"))
    return False


def _stops_at(text: str) -> int | None:
    """Where the stdlib's strict JSON parser stops reading ``text``; None if it reads all of it."""
    try:
        _STRICT_JSON.decode(text)
    except json.JSONDecodeError as exc:
        return exc.pos
    except (ValueError, RecursionError):
        return None
    return None


def _accepts(text: str, pos: int, value: str) -> bool:
    """Whether the parser takes ``value`` at ``pos`` of ``text`` (a value or key was due there)."""
    stop = _stops_at(text[:pos] + value)
    return stop is None or stop > pos


def _opening_quote(text: str, pos: int) -> int:
    """The quote opening the string ``pos`` is in: the last one before it no backslash escapes."""
    quote = text.rfind('"', 0, pos)
    while quote >= 0:
        before = quote
        while before and text[before - 1] == "\\":
            before -= 1
        if (quote - before) % 2 == 0:
            return quote
        quote = text.rfind('"', 0, before)
    return -1


# msgpack markers by what follows them: a fixed number of bytes; a length of 1, 2 or 4 bytes,
# then (after the type byte of an ext) that many bytes; or a count of elements.
_MSGPACK_FIXED: Final = {
    0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8,
    0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,
}  # fmt: skip
_MSGPACK_SIZED: Final = {
    0xC4: (1, 0, False), 0xC5: (2, 0, False), 0xC6: (4, 0, False),  # bin
    0xC7: (1, 1, False), 0xC8: (2, 1, False), 0xC9: (4, 1, False),  # ext
    0xD9: (1, 0, True), 0xDA: (2, 0, True), 0xDB: (4, 0, True),  # str
}  # fmt: skip
_MSGPACK_COUNTED: Final = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}
#: What :func:`_msgpack_problem` returns for a value the data ends inside.
_CUT: Final = "cut"


def _msgpack_problem(data: bytes) -> tuple[int, str] | str | None:
    """What is wrong with the bytes of one msgpack value, read as far as they go.

    (offset, why) of the first byte of a string that is not UTF-8; :data:`_CUT` when the
    data ends inside the value; None when neither (the value may still be wrong).
    """
    size = len(data)
    pos = 0
    pending = 1  # values still to read; each takes at least a byte, so the walk ends
    while pending:
        if pos >= size:
            return _CUT
        marker = data[pos]
        pos += 1
        pending -= 1
        if marker < 0x80 or marker >= 0xE0:  # fixint
            continue
        if marker < 0x90:  # fixmap
            pending += 2 * (marker & 0x0F)
            continue
        if marker < 0xA0:  # fixarray
            pending += marker & 0x0F
            continue
        if marker < 0xC0:  # fixstr
            length, text = marker & 0x1F, True
        elif marker in _MSGPACK_FIXED:
            pos += _MSGPACK_FIXED[marker]
            continue
        elif marker in _MSGPACK_COUNTED:
            width, per = _MSGPACK_COUNTED[marker]
            if pos + width > size:
                return _CUT
            pending += per * int.from_bytes(data[pos : pos + width], "big")
            pos += width
            continue
        elif marker in _MSGPACK_SIZED:
            width, extra, text = _MSGPACK_SIZED[marker]
            if pos + width > size:
                return _CUT
            length = int.from_bytes(data[pos : pos + width], "big") + extra
            pos += width
        else:  # 0xC1 starts no value
            return None
        if text:
            bad = utf8_error(data[pos : pos + length], final=pos + length <= size)
            if bad is not None:
                return pos + bad[0], bad[1]
        pos += length
    return _CUT if pos > size else None


_JSON_LINE: Final = "JSON line"
_MSGPACK_PAYLOAD: Final = "msgpack payload"


def _bytes_problem(data: bytes, form: str, where: str | None) -> InvalidRecord | None:
    """The error for what is wrong with ``data`` below its schema, or None when its bytes are sound.

    Text that is not UTF-8 (named by its offset in ``data``: msgspec's own count starts at
    the string holding it), half a surrogate pair, a value cut off. Checked in the bytes once
    msgspec refused them for something other than their schema, so the error is the same
    whatever msgspec raises for them (UnicodeDecodeError before 0.23) and however it words it.
    """
    if form == _JSON_LINE:
        bad = utf8_error(data, final=False)
        cut = False
        if bad is None:
            lone = lone_surrogate(data)
            if lone is not None:
                return InvalidRecord(
                    f"the line holds {lone[1].decode()}, half of a UTF-16 surrogate pair, which is "
                    "not text; write the character itself or its full pair",
                    where=where,
                )
            cut = json_cut_off(data)
    else:
        problem = _msgpack_problem(data)
        bad = problem if isinstance(problem, tuple) else None
        cut = problem == _CUT
    if bad is not None:
        at, why = bad
        return InvalidRecord(
            f"the {form} holds text that is not UTF-8 (byte 0x{data[at]:02x} at byte {at}: {why}); "
            "re-encode it as UTF-8",
            where=where,
        )
    if cut:
        return InvalidRecord(
            "the data ends in the middle of a value; the record was cut off (a partly copied file?)",
            where=where,
        )
    return None


def _plain(data: bytes, form: str) -> Callable[[], Any]:
    """A function decoding ``data`` without a schema (what a record holds), or giving _ABSENT."""

    def decode() -> Any:
        try:
            return msgspec.json.decode(data) if form == _JSON_LINE else msgspec.msgpack.decode(data)
        except (*DECODE_ERRORS, RecursionError):
            return _ABSENT

    return decode


def _refusal(
    exc: msgspec.DecodeError | UnicodeDecodeError,
    data: bytes,
    form: str,
    *,
    kind: str | None,
    prefix: str,
    where: str | None,
) -> InvalidRecord:
    """The error for a record msgspec refused: what its bytes hold, or its words, the field and a hint.

    Which it is follows the exception's class, never its words: a ValidationError is a value
    the schema does not accept; any other error is about the bytes themselves.
    """
    if not isinstance(exc, msgspec.ValidationError):
        problem = _bytes_problem(data, form, where)
        if problem is not None:
            return problem
        if isinstance(exc, UnicodeDecodeError):  # pragma: no cover - _bytes_problem found such text
            return InvalidRecord(
                f"the {form} holds text that is not UTF-8 ({exc.reason}); re-encode it as UTF-8", where=where
            )
    message, field = _split_error(exc, prefix)
    field = field or prefix or None
    return InvalidRecord(_explain(message, kind, field, _plain(data, form)), where=where, field=field)


def _decode_slow(
    data: bytes | bytearray | memoryview,
    envelope: msgspec.msgpack.Decoder[_WireIn] | msgspec.json.Decoder[_WireIn],
    bodies: dict[str, Any],
    where: str | None,
    form: str,
) -> Record:
    """Two-stage decode (envelope, then body by kind): precise errors, in a useful order."""
    raw = bytes(data)
    try:
        wire = envelope.decode(raw)
    except DECODE_ERRORS as exc:
        raise _refusal(exc, raw, form, kind=None, prefix="", where=where) from None
    where = where or f"seq {wire.seq}"
    _check_version(wire.v, where)
    decoder = bodies.get(wire.kind)
    if decoder is None:
        raise InvalidRecord(
            f"unknown kind {wire.kind!r}; expected one of {', '.join(sorted(BODY_TYPES))}",
            where=where,
            field="kind",
        )
    try:
        body = decoder.decode(wire.body)
    except DECODE_ERRORS as exc:
        raise _refusal(exc, raw, form, kind=wire.kind, prefix="body", where=where) from None
    return Record(body=body, ts=wire.ts, turn=wire.turn, seq=wire.seq, v=wire.v)


def _check_version(v: int, where: str) -> None:
    if v > SCHEMA_VERSION:
        raise InvalidRecord(
            f"schema version {v} is not supported (this holon reads up to {SCHEMA_VERSION}); "
            "upgrade holon to read this ledger",
            where=where,
            field="v",
        )
    if v < 1:
        # No holon ever wrote it: a newer holon would not help, the record is damaged.
        raise InvalidRecord(
            f"schema version {v} does not exist (versions start at 1); the record was damaged or "
            "written by another program",
            where=where,
            field="v",
        )


def _decode(
    data: bytes | bytearray | memoryview,
    *,
    fast: msgspec.msgpack.Decoder[Any] | msgspec.json.Decoder[Any],
    envelope: msgspec.msgpack.Decoder[_WireIn] | msgspec.json.Decoder[_WireIn],
    bodies: dict[str, Any],
    where: str | None,
    form: str,
) -> Record:
    try:
        try:
            wire = fast.decode(data)
        except DECODE_ERRORS:
            # Re-decode to say precisely what is wrong (always raises for bad input).
            return _decode_slow(data, envelope, bodies, where, form)
    except RecursionError:
        raise InvalidRecord(
            f"the {form} is nested too deeply to decode; flatten the offending value", where=where
        ) from None
    v = wire.v
    if v != SCHEMA_VERSION:
        _check_version(v, where or f"seq {wire.seq}")
    return Record(body=wire.body, ts=wire.ts, turn=wire.turn, seq=wire.seq, v=v)


_decode_msgpack_fast = _MSGPACK_FAST.decode


def decode_msgpack_record(data: bytes | bytearray | memoryview, *, where: str | None = None) -> Record:
    """Decode a msgpack frame payload; raises :class:`InvalidRecord` naming seq and field."""
    # The happy path is spelled out here rather than through _decode: a ledger scan calls
    # this once per record, and a function layer is a measurable share of its cost.
    try:
        wire = _decode_msgpack_fast(data)
    except (*DECODE_ERRORS, RecursionError):
        return _decode(
            data,
            fast=_MSGPACK_FAST,
            envelope=_MSGPACK_ENVELOPE,
            bodies=_MSGPACK_BODIES,
            where=where,
            form=_MSGPACK_PAYLOAD,
        )
    v = wire.v
    if v != SCHEMA_VERSION:
        _check_version(v, where or f"seq {wire.seq}")
    return Record(body=wire.body, ts=wire.ts, turn=wire.turn, seq=wire.seq, v=v)


def decode_json_record(data: bytes | str, *, where: str | None = None) -> Record:
    """Decode one JSONL line; raises :class:`InvalidRecord` naming ``where`` and the field."""
    if isinstance(data, str):
        try:
            data = data.encode()
        except UnicodeEncodeError as exc:
            raise InvalidRecord(
                f"the JSON line holds text that cannot be UTF-8 encoded ({exc}); "
                "replace lone surrogate characters",
                where=where,
            ) from None
    return _decode(
        data, fast=_JSON_FAST, envelope=_JSON_ENVELOPE, bodies=_JSON_BODIES, where=where, form=_JSON_LINE
    )


# --------------------------------------------------------------------------- JSON fields
#
# ``args``, tool ``parameters`` and ``render_config`` are free-form (typed ``Any``), so no
# decoder checks what they hold. msgpack can carry values JSON cannot: bytes, NaN and the
# infinities, non-string object keys, timestamps. The canonical JSONL form would turn
# them into base64 text, ``null`` or string keys without a word, so an export would no
# longer round-trip. The ledger refuses them on append instead (ledgers written before
# this check still read: the check is not part of decoding).


def _free_json(body: Body) -> list[tuple[str, Any]]:
    """The free-form JSON values of a body, with their field paths."""
    if isinstance(body, ToolIntent):
        return [("body.args", body.args)]
    if isinstance(body, SystemPolicy):
        return [(f"body.tools[{i}].parameters", tool.parameters) for i, tool in enumerate(body.tools)]
    if isinstance(body, PromptRendered):
        return [("body.render_config", body.render_config)]
    return []


_FREE_JSON_KINDS: Final = frozenset({ToolIntent, SystemPolicy, PromptRendered})


def _plain_json(value: Any) -> bool:
    """Whether ``value`` holds only JSON values: the fast test, without paths, of every append."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key, element in item.items():
                if type(key) is not str:
                    return False
                if type(element) is not str:  # most arguments are strings: no stack round trip
                    stack.append(element)
        elif kind is list:
            stack.extend(item)
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif not (kind is str or kind is int or kind is bool or item is None):
            return False
    return True


def non_json_value(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first value under ``value`` that JSON cannot hold, as (its path, why), or None.

    JSON holds str, int, finite float, bool, None, list and str-keyed dict; ``path``
    names ``value`` itself (``body.args``) and the result extends it (``body.args.x[2]``).
    """
    # Iterative: a value nested deeper than the recursion limit must be refused, not crash.
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return where, f"the number {item!r} has no JSON form; record it as a string or null"
        elif kind is list:
            stack.extend((element, f"{where}[{i}]") for i, element in reversed(list(enumerate(item))))
        elif kind is dict:
            for key in item:
                if type(key) is not str:
                    return where, f"object key {key!r} is not a string; JSON object keys are strings"
            stack.extend(
                (element, f"{where}.{key}" if where else key) for key, element in reversed(list(item.items()))
            )
        else:
            return where, (
                f"a {kind.__name__} value has no JSON form; convert it to a string, number, "
                "boolean, null, list or string-keyed object first"
            )
    return None


def check_json_fields(record: Record, *, where: str | None = None) -> None:
    """Raise :class:`InvalidRecord` if a free-form field holds a value JSON cannot hold.

    Run on a record *as decoded from its wire form* (which has only msgpack's types).
    """
    _check_free_json(record.body, where, record.seq)


def _check_free_json(body: Body, where: str | None, seq: int) -> None:
    # ``where`` defaults to the seq, built only on error (this runs for every append).
    if isinstance(body, ToolIntent) and _plain_json(body.args):
        return  # the common case, spelled out: a third of a busy ledger's records
    if type(body) in _FREE_JSON_KINDS:
        for field, value in _free_json(body):
            if not _plain_json(value):
                problem = non_json_value(value, field)
                if problem is not None:
                    raise InvalidRecord(problem[1], where=where or f"seq {seq}", field=problem[0])


def ts_out_of_range(ts: int, *, where: str) -> InvalidRecord:
    """The error for a ``ts`` outside :data:`MIN_TS` .. :data:`MAX_TS`, naming ``where`` and ``ts``.

    Built only once a check failed (``if not MIN_TS <= ts <= MAX_TS``), so the check costs
    a comparison on the append path.
    """
    if ts < MIN_TS:
        why = "a time before 1970, or a difference or counter taken for a time"
    else:
        why = "a micro- or nanosecond clock? time.time_ns() // 1_000_000 gives milliseconds"
    return InvalidRecord(
        f"ts {ts} is out of range: ts is milliseconds since the Unix epoch, "
        f"{MIN_TS} to {MAX_TS:,} (the year 5138) ({why}); nothing was appended",
        where=where,
        field="ts",
    )


def check_payload(data: bytes | bytearray | memoryview, *, seq: int) -> None:
    """Raise :class:`InvalidRecord` (naming ``seq``) unless a reader would accept this payload.

    For writers, before a payload is committed: struct constructors check no types, so
    ``Message(text=123)`` encodes, and once appended every read would fail at its seq.
    Free-form fields must also hold only JSON (see :func:`check_json_fields`). The
    ledger calls this for every record it appends, so the message is built only on error.
    """
    try:
        wire = _decode_msgpack_fast(data)
    except (*DECODE_ERRORS, RecursionError):
        # A reader's own path, which raises the precise error (field, accepted values).
        _check_free_json(decode_msgpack_record(data, where=f"seq {seq}").body, None, seq)
        return
    if not 1 <= wire.v <= SCHEMA_VERSION:
        raise InvalidRecord(
            f"schema version {wire.v} is not one this holon writes (1 to {SCHEMA_VERSION}); "
            "leave `v` at its default",
            where=f"seq {seq}",
            field="v",
        )
    _check_free_json(wire.body, None, seq)
