"""RuntimeState: the fold of evidence and runtime records into what the agent knows now.

:func:`apply_runtime` is a pure step ``(state, record) -> state``. Every container in
the state is either bounded by a :class:`~holon.projections.ProjectionConfig` window or
holds only *open* things (non-terminal work items, open waits, running tasks, open
follow-ups), so one step costs the same at seq 100 and at seq 10,000,000. State is
never mutated: a step copies only the containers the record touches (copy-on-write),
which keeps every earlier state valid for checkpoints and property tests.

Window entries keep the seq of the record(s) they came from, so a renderer can cite
``ledger:<seq>`` and ``holon get`` can restore the original bytes.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Callable
from typing import Any, Final, Literal, TypeAlias

import msgspec

import holon.records as r
from holon.projections.config import DEFAULT_CONFIG, ProjectionConfig

__all__ = [
    "FILE_ARGUMENT_KEYS",
    "TERMINAL_WORK_STATES",
    "VERIFICATION_MARKERS",
    "DERIVED_WORK_PREFIX",
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
    "REQUEST_ROLES",
    "RequestEntry",
    "ResultEntry",
    "RuntimeState",
    "SummaryEntry",
    "TaskEntry",
    "ToolExecution",
    "TurnState",
    "WaitEntry",
    "WorkItemEntry",
    "apply_runtime",
    "cap_plan",
    "command_of",
    "derived_work",
    "is_verification",
    "file_arguments",
    "normalize_path",
    "one_line",
    "task_job",
    "queued_work",
    "waiting_work",
    "working_dir",
]

#: Work item states after which an item leaves the open set.
TERMINAL_WORK_STATES: Final = frozenset({"done", "abandoned"})

#: Tool argument keys whose string (or list-of-strings) values name files.
FILE_ARGUMENT_KEYS: Final = ("path", "file", "file_path", "filename", "paths", "files")
_FILE_KEY_SET: Final = frozenset(FILE_ARGUMENT_KEYS)

# A single tool argument can list many files; the working set only needs a handful.
_MAX_ARGUMENT_FILES: Final = 8

WorkState: TypeAlias = Literal["queued", "active", "waiting", "done", "abandoned"]

#: Message roles whose messages are the operator's requests (the mandate): the rest are the
#: agent's own, a tool's or a channel's (a hook's feedback, another system's notice).
REQUEST_ROLES: Final = frozenset({"user", "operator"})

#: Substrings of a command (any case) that make its result a verification result.
VERIFICATION_MARKERS: Final = ("pytest", "test", "mypy", "ruff", "lint", "check", "verify", "tsc")
_VERIFICATION_RE: Final = re.compile("|".join(VERIFICATION_MARKERS), re.IGNORECASE)

#: The prefix of a derived work item's id: ``request:<seq>`` names the request it comes from.
DERIVED_WORK_PREFIX: Final = "request:"
# A derived objective is the first request on one line, as long as a declared one usually is.
_DERIVED_OBJECTIVE_CHARS: Final = 240

# The end of a failing check's output kept in state: the lines a test runner or linter
# puts its verdict on (pytest's short summary, a compiler's last error).
_TAIL_LINES: Final = 3
_TAIL_CHARS: Final = 400


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


def is_verification(command: str) -> bool:
    """Whether a command (its :func:`command_of` form) verifies: tests, lint, type checks."""
    return _VERIFICATION_RE.search(command) is not None


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


_COMMAND_CHARS: Final = 120


def one_line(text: str, limit: int = 160) -> str:
    """Collapse whitespace to single spaces and clip to ``limit`` characters (with ``…``)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def task_job(description: str) -> str:
    """The job a task of this description runs: a short digest of the description.

    Tasks given the same description are runs of one job (the test suite run again after
    a fix), and only the newest run's result is current. Working memory keeps one result
    per job; an archived episode names each result's job by this digest (16 hex digits)
    rather than by the description, which may be a sub-agent's whole prompt.
    """
    return hashlib.blake2b(description.encode(), digest_size=8).hexdigest()


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


def file_arguments(args: dict[str, Any]) -> tuple[str, ...]:
    """File paths named by a tool call's arguments (keys in :data:`FILE_ARGUMENT_KEYS`)."""
    # Fast path: most calls name no file. (The intersection is only tested for emptiness.)
    if not _FILE_KEY_SET.intersection(args):
        return ()
    found: list[str] = []
    for key in FILE_ARGUMENT_KEYS:
        value = args.get(key)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            found.extend(v for v in value[:_MAX_ARGUMENT_FILES] if isinstance(v, str))
    return tuple(found)


# --------------------------------------------------------------------------- the fold step

_Changes: TypeAlias = dict[str, Any]
_Handler: TypeAlias = Callable[[RuntimeState, r.Record, Any, ProjectionConfig], RuntimeState]
_Replace = msgspec.structs.replace


def _with(state: RuntimeState, record: r.Record, changes: _Changes) -> RuntimeState:
    return _Replace(state, seq=record.seq, applied=state.applied + 1, **changes)


def _push(window: tuple[Any, ...], item: Any, cap: int) -> tuple[Any, ...]:
    """Append to a bounded window, dropping the oldest entries beyond ``cap``."""
    if len(window) >= cap:
        return (*window[len(window) - cap + 1 :], item)
    return (*window, item)


def _carry(state: RuntimeState, record: r.Record, note: str, config: ProjectionConfig) -> _Changes:
    # The body as a checkpoint decodes it (lists, not tuples), so a state restored from a
    # checkpoint equals the state folded live.
    body = msgspec.msgpack.decode(msgspec.msgpack.encode(record.body))
    entry = CarriedRecord(seq=record.seq, kind=record.kind, turn=record.turn, note=note, body=body)
    return {
        "carried": _push(state.carried, entry, config.carried_window),
        "carried_count": state.carried_count + 1,
    }


def _not_open(state: RuntimeState, work_item_id: str) -> str:
    """How a carried record names a work item that is not open: finished, or unknown."""
    if state.find_work_item(work_item_id) is not None:
        return f"finished work item {work_item_id!r}"
    return f"unknown work item {work_item_id!r}"


def normalize_path(path: str, *, base: str | None = None) -> str:
    """A working-set path as state keys it: surrounding blanks and leading ``./`` dropped.

    ``base`` (see :func:`working_dir`): an absolute path inside it is keyed relative to it,
    so the ``/testbed/a.py`` an editor reports and the ``a.py`` a command names are one
    file, and the working set shows the shorter name. ``""`` means no path (a blank
    entry); callers skip it.
    """
    if not path or path[0].isspace() or path[-1].isspace() or path.startswith("./"):
        path = path.strip()
        while path.startswith("./"):
            path = path[2:]
    if base is not None and path.startswith(base) and path[len(base) : len(base) + 1] == "/":
        inside = path[len(base) + 1 :]
        if inside:
            return inside
    return path


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


def _touch(
    files: dict[str, FileTouch],
    paths: tuple[str, ...],
    *,
    work_item_id: str | None,
    seq: int,
    via: Literal["touched", "argument"],
    cap: int,
    base: str | None,
) -> dict[str, FileTouch]:
    out = dict(files)
    for raw in paths:
        path = normalize_path(raw, base=base)
        if not path:
            continue
        prev = out.pop(path, None)
        first = prev.first_seq if prev is not None and prev.work_item_id == work_item_id else seq
        out[path] = FileTouch(path=path, work_item_id=work_item_id, first_seq=first, last_seq=seq, via=via)
    while len(out) > cap:
        del out[next(iter(out))]
    return out


def cap_plan(
    steps: tuple[r.PlanStep, ...], cap: int
) -> tuple[tuple[r.PlanStep, ...], tuple[r.PlanStep, ...]]:
    """The steps a capped plan keeps (at most ``cap``) and the rest, each in plan order.

    Done and skipped steps are dropped first (oldest first), then the tail: what is left
    to do is what a capped plan must still show.
    """
    if len(steps) <= cap:
        return steps, ()
    excess = len(steps) - cap
    kept: list[r.PlanStep] = []
    rest: list[r.PlanStep] = []
    for step in steps:
        if excess and step.status in ("done", "skipped"):
            excess -= 1
            rest.append(step)
        elif len(kept) < cap:
            kept.append(step)
        else:
            rest.append(step)
    return tuple(kept), tuple(rest)


def _keep_recent(items: tuple[str, ...], item: str, cap: int) -> tuple[tuple[str, ...], int]:
    """``item`` appended (an equal earlier one moved to the end), the oldest beyond ``cap``
    dropped; and how many were dropped."""
    if items and items[-1] == item:
        return items, 0
    if item in items:
        at = items.index(item)  # items never holds duplicates
        return (*items[:at], *items[at + 1 :], item), 0
    if len(items) >= cap:
        return (*items[len(items) - cap + 1 :], item), len(items) - cap + 1
    return (*items, item), 0


#: Characters of a task's last error line (the command, the status, the output's last line).
_ERROR_CHARS: Final = 200


def _error_line(command: str, body: r.ToolResult) -> str:
    """One line for a failed call: ``pytest -q: error, exit 1: FAILED tests/x.py``."""
    output = body.output or (body.blob.preview if body.blob is not None else "")
    last = next((line for line in reversed(output.splitlines()) if line.strip()), "")
    status = body.status + (f", exit {body.exit_code}" if body.exit_code is not None else "")
    return one_line(f"{command}: {status}" + (f": {last}" if last else ""), _ERROR_CHARS)


def _task_files(
    entry: TaskEntry, paths: tuple[str, ...], state: RuntimeState, cap: int
) -> tuple[tuple[str, ...], int]:
    files, omitted = entry.files, entry.files_omitted
    base = working_dir(state)
    for raw in paths:
        path = normalize_path(raw, base=base)
        if path:
            files, dropped = _keep_recent(files, path, cap)
            omitted += dropped
    return files, omitted


def _task_evidence(
    state: RuntimeState, record: r.Record, task_id: str, config: ProjectionConfig
) -> RuntimeState:
    """Fold a sub-agent's record into its task's entry: never into the agent's own windows.

    The task's calls, files and plan are not the agent's working set, plan or tool calls
    (its unknown outcomes are not the agent's either). A record of a task that is not
    running (not started in this ledger, or rejoined already) is carried.
    """
    entry = state.tasks.get(task_id)
    if entry is None:
        done = any(t.id == task_id for t in state.finished_tasks)
        note = f"evidence of task {task_id!r}, which " + ("already rejoined" if done else "is not running")
        return _with(state, record, _carry(state, record, note, config))
    body = record.body
    cap = config.task_list_cap
    changes: dict[str, Any] = {"last_seq": record.seq}
    if isinstance(body, r.ToolIntent):
        command = command_of(body)
        changes["tool_calls"] = entry.tool_calls + 1
        changes["commands"] = _keep_recent(entry.commands, command, cap)[0]
        changes["calls"] = (*entry.calls[max(0, len(entry.calls) - cap + 1) :], (body.call_id, command))
        paths = file_arguments(body.args)
        if paths:
            changes["files"], changes["files_omitted"] = _task_files(entry, paths, state, cap)
    elif isinstance(body, r.ToolResult):
        command = next((c for call, c in entry.calls if call == body.call_id), body.tool)
        if any(call == body.call_id for call, _ in entry.calls):
            changes["calls"] = tuple(c for c in entry.calls if c[0] != body.call_id)
        if body.status != "ok":
            changes["errors"] = entry.errors + 1
            changes["last_error"] = _error_line(command, body)
            changes["last_error_seq"] = record.seq
        if body.touched_files:
            changes["files"], changes["files_omitted"] = _task_files(entry, body.touched_files, state, cap)
    elif isinstance(body, r.WorkPlan):
        kept, rest = cap_plan(body.steps, cap)
        changes.update(plan=kept, plan_omitted=len(rest), plan_seq=record.seq)
    tasks = dict(state.tasks)
    # Replaced in place: ``tasks`` stays in the order the tasks were started.
    tasks[task_id] = _Replace(entry, **changes)
    return _with(state, record, {"tasks": tasks})


def _on_message(
    state: RuntimeState, record: r.Record, body: r.Message, config: ProjectionConfig
) -> RuntimeState:
    if body.task_id is not None:
        return _task_evidence(state, record, body.task_id, config)
    entry = MessageEntry(seq=record.seq, ts=record.ts, turn=record.turn, message=body)
    messages = _push(state.messages, entry, config.messages_window)
    if body.role not in REQUEST_ROLES:
        return _Replace(state, seq=record.seq, applied=state.applied + 1, messages=messages)
    text = body.text
    request = RequestEntry(
        seq=record.seq, turn=record.turn, text=text[: config.request_chars], chars=len(text)
    )
    mandate = state.mandate
    if mandate is None:
        mandate = MandateEntry(session=state.session, first=request)
    else:
        # A request sent again ("continue", "keep going") is held once, as its newest
        # sending: the window holds distinct requests, not the one a loop repeats.
        held = mandate.recent
        again = next((q for q in held if q.chars == request.chars and q.text == request.text), None)
        if again is not None:
            held = tuple(q for q in held if q is not again)
            request = _Replace(request, asked=again.asked + 1)
        recent = (*held, request)
        if len(recent) > config.requests_window:
            # Dropped half a window at a time, not one per request: the renderer shows the
            # oldest held requests (the ones the history no longer shows), and a window
            # sliding by one changed those lines — and the cached prompt after them — at
            # every new request.
            recent = recent[len(recent) - (config.requests_window + 1) // 2 :]
        mandate = _Replace(mandate, recent=recent, count=mandate.count + 1)
    return _Replace(state, seq=record.seq, applied=state.applied + 1, messages=messages, mandate=mandate)


def _on_brief(state: RuntimeState, record: r.Record, body: r.Brief, config: ProjectionConfig) -> RuntimeState:
    entry = BriefEntry(seq=record.seq, ts=record.ts, turn=record.turn, brief=body)
    changes: _Changes = {"briefs": _push(state.briefs, entry, config.briefs_window)}
    if body.status == "result":
        changes["latest_result"] = ResultEntry(
            seq=record.seq,
            source="brief",
            text=body.text,
            status=body.status,
            work_item_id=body.work_item_id,
            task_id=body.task_id,
        )
    return _with(state, record, changes)


def _on_tool_intent(
    state: RuntimeState, record: r.Record, body: r.ToolIntent, config: ProjectionConfig
) -> RuntimeState:
    if body.task_id is not None:
        return _task_evidence(state, record, body.task_id, config)
    execution = ToolExecution(
        call_id=body.call_id,
        tool=body.tool,
        command=command_of(body),
        turn=record.turn,
        ts=record.ts,
        intent_seq=record.seq,
        intent=body,
    )
    tools = _push(state.tools, execution, config.tools_window)
    paths = file_arguments(body.args)
    files = state.files
    if paths:
        files = _touch(
            files,
            paths,
            work_item_id=state.active_work_item_id,
            seq=record.seq,
            via="argument",
            cap=config.files_window,
            base=working_dir(state),
        )
    return _Replace(state, seq=record.seq, applied=state.applied + 1, tools=tools, files=files)


def _on_tool_result(
    state: RuntimeState, record: r.Record, body: r.ToolResult, config: ProjectionConfig
) -> RuntimeState:
    if body.task_id is not None:
        return _task_evidence(state, record, body.task_id, config)
    tools = state.tools
    # The matching intent is almost always the newest entry, so scan from the end.
    for i in range(len(tools) - 1, -1, -1):
        found = tools[i]
        if found.call_id == body.call_id and found.result is None:
            joined = _Replace(found, result_seq=record.seq, result=body)
            new_tools = (
                (*tools[:-1], joined) if i == len(tools) - 1 else (*tools[:i], joined, *tools[i + 1 :])
            )
            break
    else:
        orphan = ToolExecution(
            call_id=body.call_id,
            tool=body.tool,
            command=one_line(body.tool, _COMMAND_CHARS),
            turn=record.turn,
            ts=record.ts,
            result_seq=record.seq,
            result=body,
        )
        new_tools = _push(tools, orphan, config.tools_window)
        joined = orphan
    files = state.files
    if body.touched_files:
        files = _touch(
            files,
            body.touched_files,
            work_item_id=state.active_work_item_id,
            seq=record.seq,
            via="touched",
            cap=config.files_window,
            base=working_dir(state),
        )
    failing = state.failing
    command = joined.command if joined.intent is not None else ""
    if command and is_verification(command) and body.status in ("ok", "error"):
        failing = _checked(state, command, record.seq, body, config)
    return _Replace(
        state, seq=record.seq, applied=state.applied + 1, tools=new_tools, files=files, failing=failing
    )


def _failed(result: r.ToolResult) -> bool:
    return result.status == "error" or result.exit_code not in (None, 0)


def _output_tail(result: r.ToolResult) -> str:
    """The last few non-blank lines of a result's output (a blob's stored tail), clipped."""
    text = result.output if result.blob is None else result.blob.tail
    lines = [line.strip() for line in text.splitlines() if line.strip()][-_TAIL_LINES:]
    tail = " | ".join(lines)
    return tail if len(tail) <= _TAIL_CHARS else "…" + tail[-(_TAIL_CHARS - 1) :]


def _checked(
    state: RuntimeState, command: str, seq: int, result: r.ToolResult, config: ProjectionConfig
) -> tuple[FailingCheck, ...]:
    """``failing`` after a run of the verification ``command``: a pass clears it, a failure
    replaces its earlier failure (newest last, the oldest dropped beyond ``failing_cap``)."""
    failing = state.failing
    kept = tuple(f for f in failing if f.command != command)
    if not _failed(result):
        return kept if len(kept) != len(failing) else failing
    work = state.current_work
    entry = FailingCheck(
        command=command,
        tool=result.tool,
        seq=seq,
        status=result.status,
        exit_code=result.exit_code,
        tail=_output_tail(result),
        work_item_id=work.id if work is not None else None,
    )
    return _push(kept, entry, config.failing_cap)


def _set_work(
    state: RuntimeState, entry: WorkItemEntry, prev: WorkItemEntry | None, config: ProjectionConfig
) -> _Changes:
    """Place a new version of a work item: open dict or finished window, and the active stack."""
    changes: _Changes = {}
    was_finished = prev is not None and prev.state in TERMINAL_WORK_STATES
    if was_finished:
        changes["finished_work"] = tuple(e for e in state.finished_work if e.id != entry.id)
    stack = state.active_stack
    if entry.state in TERMINAL_WORK_STATES:
        if entry.id in state.work_items:
            items = dict(state.work_items)
            del items[entry.id]
            changes["work_items"] = items
        if entry.id in state.plans:
            plans = dict(state.plans)
            del plans[entry.id]
            changes["plans"] = plans
        if entry.id in state.decisions:
            decisions = dict(state.decisions)
            del decisions[entry.id]
            changes["decisions"] = decisions
        if entry.id in state.decisions_over_cap:
            over_cap = dict(state.decisions_over_cap)
            del over_cap[entry.id]
            changes["decisions_over_cap"] = over_cap
        finished = changes.get("finished_work", state.finished_work)
        changes["finished_work"] = _push(finished, entry, config.finished_window)
    else:
        items = dict(state.work_items)
        items[entry.id] = entry
        changes["work_items"] = items
    if entry.state == "active":
        if prev is None or prev.state != "active":
            stack = (*(i for i in stack if i != entry.id), entry.id)
    elif entry.id in stack:
        stack = tuple(i for i in stack if i != entry.id)
    if stack is not state.active_stack:
        changes["active_stack"] = stack
    return changes


def _on_work_item(
    state: RuntimeState, record: r.Record, body: r.WorkItem, config: ProjectionConfig
) -> RuntimeState:
    prev = state.find_work_item(body.id)
    state_seq = prev.state_seq if prev is not None and prev.state == body.state else record.seq
    entry = WorkItemEntry(
        id=body.id,
        objective=body.objective,
        state=body.state,
        delivery_target=body.delivery_target,
        scope_constraints=body.scope_constraints,
        summary=body.summary,
        declared_seq=record.seq,
        state_seq=state_seq,
        state_reason=None if prev is None or prev.state != body.state else prev.state_reason,
    )
    changes = _set_work(state, entry, prev, config)
    if not state.work_declared:
        changes["work_declared"] = True
    return _with(state, record, changes)


def _on_work_item_state(
    state: RuntimeState, record: r.Record, body: r.WorkItemState, config: ProjectionConfig
) -> RuntimeState:
    prev = state.find_work_item(body.id)
    if prev is None:
        return _with(
            state, record, _carry(state, record, f"state change for unknown work item {body.id!r}", config)
        )
    entry = msgspec.structs.replace(prev, state=body.state, state_seq=record.seq, state_reason=body.reason)
    return _with(state, record, _set_work(state, entry, prev, config))


def _on_work_plan(
    state: RuntimeState, record: r.Record, body: r.WorkPlan, config: ProjectionConfig
) -> RuntimeState:
    if body.task_id is not None:
        return _task_evidence(state, record, body.task_id, config)
    entry = PlanEntry(work_item_id=body.work_item_id, steps=body.steps, seq=record.seq)
    if body.work_item_id is None:
        return _with(state, record, {"unscoped_plan": entry})
    if body.work_item_id not in state.work_items:
        # Plans are kept for open work only, so neither finished work nor an id no work
        # item has (a typo, or an item finished so long ago it left the window) can pin
        # state forever.
        note = f"plan for {_not_open(state, body.work_item_id)}"
        return _with(state, record, _carry(state, record, note, config))
    plans = dict(state.plans)
    plans[body.work_item_id] = entry
    return _with(state, record, {"plans": plans})


def _on_waiting_intent(
    state: RuntimeState, record: r.Record, body: r.WaitingIntent, config: ProjectionConfig
) -> RuntimeState:
    waits = dict(state.waits)
    waits.pop(body.id, None)
    waits[body.id] = WaitEntry(
        id=body.id,
        waiting_on=body.waiting_on,
        work_item_id=body.work_item_id,
        resume_hint=body.resume_hint,
        seq=record.seq,
    )
    return _with(state, record, {"waits": waits})


def _on_waiting_resolved(
    state: RuntimeState, record: r.Record, body: r.WaitingResolved, config: ProjectionConfig
) -> RuntimeState:
    if body.id not in state.waits:
        return _with(state, record, _carry(state, record, f"resolution of unknown wait {body.id!r}", config))
    waits = dict(state.waits)
    done = msgspec.structs.replace(
        waits.pop(body.id), resolved_seq=record.seq, resolution=body.resolution, detail=body.detail
    )
    return _with(
        state,
        record,
        {"waits": waits, "resolved_waits": _push(state.resolved_waits, done, config.finished_window)},
    )


def _on_task_started(
    state: RuntimeState, record: r.Record, body: r.TaskStarted, config: ProjectionConfig
) -> RuntimeState:
    tasks = dict(state.tasks)
    tasks.pop(body.id, None)
    tasks[body.id] = TaskEntry(
        id=body.id, description=body.description, work_item_id=body.work_item_id, started_seq=record.seq
    )
    return _with(state, record, {"tasks": tasks})


def _on_task_result(
    state: RuntimeState, record: r.Record, body: r.TaskResult, config: ProjectionConfig
) -> RuntimeState:
    changes: _Changes = {}
    started = state.tasks.get(body.id)
    if started is not None:
        tasks = dict(state.tasks)
        del tasks[body.id]
        changes["tasks"] = tasks
    else:
        started = TaskEntry(id=body.id)
    done = msgspec.structs.replace(
        started, result_seq=record.seq, status=body.status, summary=body.summary, blob=body.blob, calls=()
    )
    changes["finished_tasks"] = _push(state.finished_tasks, done, config.finished_window)
    changes["latest_result"] = ResultEntry(
        seq=record.seq,
        source="task",
        text=body.summary,
        status=body.status,
        work_item_id=started.work_item_id,
        task_id=body.id,
    )
    return _with(state, record, changes)


def _on_decision(
    state: RuntimeState, record: r.Record, body: r.Decision, config: ProjectionConfig
) -> RuntimeState:
    entry = DecisionEntry(
        id=body.id, text=body.text, rationale=body.rationale, work_item_id=body.work_item_id, seq=record.seq
    )
    cap = config.decisions_cap
    # A redeclared decision replaces its earlier version wherever that was kept: moved to
    # another item (or out of any, or to one that is not open), the old copy would still
    # read as valid there.
    unscoped = state.unscoped_decisions
    if any(d.id == body.id for d in unscoped):
        unscoped = tuple(d for d in unscoped if d.id != body.id)
    decisions = state.decisions
    holders = [item for item, kept in decisions.items() if any(d.id == body.id for d in kept)]
    if holders or body.work_item_id is not None:
        decisions = dict(decisions)
        for item in holders:
            kept = tuple(d for d in decisions[item] if d.id != body.id)
            if kept:
                decisions[item] = kept
            else:
                del decisions[item]
    if body.work_item_id is not None and body.work_item_id not in state.work_items:
        # Decisions are kept per open work item; a finished item's live in its episodes,
        # and an id no work item has would open a bucket nothing ever closes.
        note = f"decision for {_not_open(state, body.work_item_id)}"
        changes = _carry(state, record, note, config)
        changes.update(decisions=decisions, unscoped_decisions=unscoped)
        return _with(state, record, changes)
    # A decision the cap pushes out still holds: it is counted, so working memory can say
    # that older decisions exist and a delta does not read its leaving as a withdrawal.
    if body.work_item_id is None:
        changes = {"decisions": decisions, "unscoped_decisions": _push(unscoped, entry, cap)}
        if len(unscoped) >= cap:
            changes["unscoped_decisions_over_cap"] = state.unscoped_decisions_over_cap + 1
        return _with(state, record, changes)
    bucket = decisions.get(body.work_item_id, ())
    decisions[body.work_item_id] = _push(bucket, entry, cap)
    changes = {"decisions": decisions, "unscoped_decisions": unscoped}
    if len(bucket) >= cap:
        over_cap = dict(state.decisions_over_cap)
        over_cap[body.work_item_id] = over_cap.get(body.work_item_id, 0) + 1
        changes["decisions_over_cap"] = over_cap
    return _with(state, record, changes)


def _on_follow_up(
    state: RuntimeState, record: r.Record, body: r.FollowUp, config: ProjectionConfig
) -> RuntimeState:
    follow_ups = dict(state.follow_ups)
    prev = follow_ups.pop(body.id, None)
    entry = FollowUpEntry(
        id=body.id,
        text=body.text,
        status=body.status,
        work_item_id=body.work_item_id,
        first_seq=prev.first_seq if prev is not None else record.seq,
        seq=record.seq,
    )
    if body.status == "open":
        follow_ups[body.id] = entry
        return _with(state, record, {"follow_ups": follow_ups})
    return _with(
        state,
        record,
        {
            "follow_ups": follow_ups,
            "closed_follow_ups": _push(state.closed_follow_ups, entry, config.finished_window),
        },
    )


def _on_environment(
    state: RuntimeState, record: r.Record, body: r.ExecutionEnvironment, config: ProjectionConfig
) -> RuntimeState:
    changes: _Changes = {"environment": EnvironmentEntry(seq=record.seq, environment=body)}
    session = body.extra.get("session_id")
    if session is not None and session != state.session:
        changes["session"] = session
        if state.session is not None:
            # A new session is new work: its requests, declarations and checks start afresh.
            # (The first session id named only names the session the ledger was already in.)
            changes.update(mandate=None, work_declared=False, failing=(), session_seq=record.seq)
        elif state.mandate is not None:
            changes["mandate"] = _Replace(state.mandate, session=session)
    return _with(state, record, changes)


def _on_policy(
    state: RuntimeState, record: r.Record, body: r.SystemPolicy, config: ProjectionConfig
) -> RuntimeState:
    return _with(state, record, {"policy": PolicyEntry(seq=record.seq, policy=body)})


def _on_context_summary(
    state: RuntimeState, record: r.Record, body: r.ContextSummary, config: ProjectionConfig
) -> RuntimeState:
    return _with(state, record, {"context_summary": SummaryEntry(seq=record.seq, summary=body)})


def _on_turn_started(
    state: RuntimeState, record: r.Record, body: r.TurnStarted, config: ProjectionConfig
) -> RuntimeState:
    before = state.turn.started_seq if state.turn is not None else None
    turn = TurnState(
        index=record.turn,
        trigger=body.trigger,
        input=body.input,
        started_seq=record.seq,
        previous_started_seq=before,
    )
    return _Replace(state, seq=record.seq, applied=state.applied + 1, turn=turn)


def _on_turn_ended(
    state: RuntimeState, record: r.Record, body: r.TurnEnded, config: ProjectionConfig
) -> RuntimeState:
    turn = state.turn
    if turn is None or not turn.open:
        turn = TurnState(index=record.turn, trigger="")
    turn = _Replace(turn, ended_seq=record.seq, outcome=body.outcome)
    return _Replace(state, seq=record.seq, applied=state.applied + 1, turn=turn)


def _on_prompt_rendered(
    state: RuntimeState, record: r.Record, body: r.PromptRendered, config: ProjectionConfig
) -> RuntimeState:
    last_prompt = PromptEntry(seq=record.seq, prompt=body)
    return _Replace(state, seq=record.seq, applied=state.applied + 1, last_prompt=last_prompt)


def _on_model_call(
    state: RuntimeState, record: r.Record, body: r.ModelCall, config: ProjectionConfig
) -> RuntimeState:
    # What the provider reported about a call: for the audit, not for what the model sees.
    return _Replace(state, seq=record.seq, applied=state.applied + 1)


def _on_derived(
    state: RuntimeState, record: r.Record, body: r.Body, config: ProjectionConfig
) -> RuntimeState:
    # Derived records change working memory (see holon.projections.memory), not runtime state.
    return _Replace(state, seq=record.seq, applied=state.applied + 1)


_HANDLERS: Final[dict[type[Any], _Handler]] = {
    r.Message: _on_message,
    r.Brief: _on_brief,
    r.ToolIntent: _on_tool_intent,
    r.ToolResult: _on_tool_result,
    r.WorkItem: _on_work_item,
    r.WorkItemState: _on_work_item_state,
    r.WorkPlan: _on_work_plan,
    r.WaitingIntent: _on_waiting_intent,
    r.WaitingResolved: _on_waiting_resolved,
    r.TaskStarted: _on_task_started,
    r.TaskResult: _on_task_result,
    r.Decision: _on_decision,
    r.FollowUp: _on_follow_up,
    r.ExecutionEnvironment: _on_environment,
    r.SystemPolicy: _on_policy,
    r.ContextSummary: _on_context_summary,
    r.TurnStarted: _on_turn_started,
    r.TurnEnded: _on_turn_ended,
    r.PromptRendered: _on_prompt_rendered,
    r.ModelCall: _on_model_call,
    r.WorkingMemoryDelta: _on_derived,
    r.ContextEpisodeRecord: _on_derived,
}


def apply_runtime(
    state: RuntimeState, record: r.Record, config: ProjectionConfig = DEFAULT_CONFIG
) -> RuntimeState:
    """Fold one record into runtime state (pure; ``state`` is left untouched).

    A kind this version does not place is carried in the ``carried`` window rather
    than dropped.
    """
    handler = _HANDLERS.get(type(record.body))
    if handler is None:
        note = f"kind {record.kind!r} is not placed by this projection"
        return _with(state, record, _carry(state, record, note, config))
    return handler(state, record, record.body, config)
