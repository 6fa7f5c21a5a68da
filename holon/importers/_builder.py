"""The shared state machine that turns a stream of transcript events into holon records.

Every importer walks its own format and calls a :class:`TranscriptBuilder`; the builder
owns the rules every format shares, so they hold the same way everywhere:

* turns — a user/operator message opens a turn (``TurnStarted`` then the ``Message``);
  the open turn is closed with ``TurnEnded`` before the next one starts and at the end;
  agent activity with no open turn opens a ``continuation`` turn; records before the
  first turn (system prompt, environment, summaries) carry ``turn=None``;
* the clock — the transcript's own timestamps, clamped to never go backwards (an
  event without one shares the previous record's time); a transcript with no
  timestamps at all gets a synthetic clock: 0, then :data:`SYNTHETIC_STEP_MS` more per
  record; a ``TurnEnded`` carries the time of the turn's last record;
* tool calls — an intent is joined to its result by the transcript's call id; a reused
  id gets a ``#2``, ``#3`` suffix so every holon ``call_id`` is unique; an intent that
  never gets a result stays alone (an unknown outcome); a result with no intent is
  skipped and counted;
* sessions — each run of a transcript starts with an ``ExecutionEnvironment`` whose
  ``extra["session_id"]`` names it (:meth:`TranscriptBuilder.session`), so that separate
  conversations glued into one file stay apart in the ledger;
* refused edits — an editing tool's own refusal is an ``error`` that touched no file;
* skips — whatever is not imported is counted by reason, for the caller to report.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from holon.importers._effects import edit_refused
from holon.records import (
    Body,
    ExecutionEnvironment,
    Message,
    PlanStep,
    Record,
    SystemPolicy,
    ToolDefinition,
    ToolIntent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    WorkPlan,
    non_json_value,
)

__all__ = ["SYNTHETIC_STEP_MS", "UNDEFINED_TOOL", "ImportReport", "PendingCall", "TranscriptBuilder"]

#: A plan step's status, as :class:`~holon.records.PlanStep` takes it.
StepStatus = Literal["pending", "in_progress", "done", "blocked", "skipped"]

#: Milliseconds between consecutive records when the transcript has no timestamps.
SYNTHETIC_STEP_MS: Final = 1000

ToolStatus = Literal["ok", "error", "interrupted"]
TurnOutcome = Literal["completed", "waiting", "failed", "interrupted"]


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an importer produced from one file: the records, and what it skipped.

    ``records`` are in transcript order with ``seq=-1``, ready to append. ``skipped``
    maps a reason (``"event:queue-operation"``, ``"orphan tool result"``) to how many
    source events or blocks it left out, sorted by reason. ``synthetic_clock`` says the
    transcript had no timestamps, so the records' ``ts`` count from 0 (see :meth:`after`).
    ``session_id`` is the first session id the transcript itself names (Claude Code's
    ``sessionId``, a run's own id), ``None`` when it names none (its runs are then
    ``run <n>``, ids holon made up). ``declared_tools`` are the tools the agent called
    that the transcript never defined, which the import declared by name (see
    :meth:`TranscriptBuilder.finish`).
    """

    format: str
    source: str
    records: tuple[Record, ...]
    skipped: dict[str, int] = {}
    synthetic_clock: bool = False
    session_id: str | None = None
    declared_tools: tuple[str, ...] = ()

    def after(self, ts_ms: int, *, last_turn: int | None = None) -> ImportReport:
        """This import placed after a record at ``ts_ms`` (the last of the ledger it goes to).

        A synthetic clock is moved to start one step after ``ts_ms``: it starts at 0, and a
        ledger's timestamps never go backwards, so an untimestamped transcript could
        otherwise never follow anything. A transcript's own timestamps are kept as they are.

        ``last_turn`` is the last turn index already in that ledger: the import's turns,
        which count from 0, are renumbered to follow it. Otherwise a second transcript
        imported into a ledger would repeat turn 0, 1, ..., and a turn number (``holon
        render --at-turn N``) would no longer name one turn.
        """
        ts_offset = ts_ms + SYNTHETIC_STEP_MS if self.synthetic_clock else 0
        turn_offset = last_turn + 1 if last_turn is not None else 0
        if ts_offset == 0 and turn_offset == 0:
            return self
        return msgspec.structs.replace(
            self,
            records=tuple(
                msgspec.structs.replace(
                    record,
                    ts=record.ts + ts_offset,
                    turn=record.turn + turn_offset if record.turn is not None else None,
                )
                for record in self.records
            ),
        )

    @property
    def turns(self) -> int:
        """How many turns the import holds."""
        return sum(1 for record in self.records if isinstance(record.body, TurnStarted))

    @property
    def tool_calls(self) -> int:
        """How many tool intents the import holds."""
        return sum(1 for record in self.records if isinstance(record.body, ToolIntent))

    @property
    def unmatched_intents(self) -> int:
        """Tool intents with no result: calls whose outcome the transcript does not show."""
        answered = {record.body.call_id for record in self.records if isinstance(record.body, ToolResult)}
        return sum(
            1
            for record in self.records
            if isinstance(record.body, ToolIntent) and record.body.call_id not in answered
        )

    @property
    def skipped_total(self) -> int:
        """How many source events or blocks were left out, over all reasons."""
        return sum(self.skipped.values())


class PendingCall(msgspec.Struct, frozen=True, kw_only=True):
    """An intent waiting for its result: its holon call id, tool, arguments and sub-agent's task."""

    call_id: str
    tool: str
    args: dict[str, Any]
    task_id: str | None = None


def _storable(args: dict[str, Any]) -> dict[str, Any]:
    """``args`` when the ledger can store them, else their JSON text under ``arguments``.

    Arguments are model-written and never a reason to refuse a file, but msgpack holds no
    integer beyond 64 bits and the ledger no NaN or infinity (Python's json.dump writes
    them as bare words). The text keeps every digit and word as the transcript had it,
    the way an unparseable OpenAI ``arguments`` string is kept whole.
    """
    try:
        msgspec.msgpack.encode(args)
    except (OverflowError, msgspec.EncodeError):
        pass
    else:
        if non_json_value(args) is None:
            return args
    return {"arguments": json.dumps(args, ensure_ascii=False, separators=(",", ":"))}


class TranscriptBuilder:
    """Accumulates records for one import; see the module docstring for the shared rules."""

    def __init__(self, *, format: str, source: str, start_ms: int | None = None) -> None:
        """Start an import; ``start_ms`` (the transcript's first timestamp) selects its clock.

        With ``start_ms`` the transcript is timestamped: an event without a timestamp gets
        the previous record's time (``start_ms`` before the first). Without it every
        record advances the synthetic clock by :data:`SYNTHETIC_STEP_MS` from 0.
        """
        self._format = format
        self._source = source
        self._records: list[Record] = []
        self._skipped: Counter[str] = Counter()
        self._turn: int | None = None
        self._turn_open = False
        self._next_turn = 0
        self._start_ms = start_ms
        self._event_ts: int | None = None
        self._last_ts: int | None = None
        # source call id -> intents still waiting for their result, oldest first
        self._pending: dict[str, list[PendingCall]] = {}
        self._used_call_ids: set[str] = set()
        self._order: dict[str, int] = {}  # holon call id -> the order its intent came in
        self._environment: ExecutionEnvironment | None = None
        self._session: str | None = None  # the run's session id, once :meth:`session` named it
        self._session_start: ExecutionEnvironment | None = None  # its environment, until recorded
        self._sessions: set[str] = set()
        self._runs = 0
        self._named_session: str | None = None  # the first session id the transcript names

    # ------------------------------------------------------------------ clock

    def at(self, ts_ms: int | None) -> None:
        """Set the time of the source event whose records come next (None: no timestamp)."""
        self._event_ts = ts_ms

    def _now(self) -> int:
        if self._event_ts is None:
            if self._start_ms is not None:
                return self._start_ms if self._last_ts is None else self._last_ts
            return 0 if self._last_ts is None else self._last_ts + SYNTHETIC_STEP_MS
        if self._last_ts is None:
            return self._event_ts
        # Transcripts interleave writers (subagents, hooks) whose clocks can disagree by a few
        # ms; a ledger's timestamps never go backwards.
        return max(self._event_ts, self._last_ts)

    # ------------------------------------------------------------------ records

    def emit(self, body: Body, *, ts: int | None = None) -> None:
        """Append a record for ``body`` in the current turn (None outside any turn)."""
        if self._session_start is not None:
            self._record_session_start(self._session_start)
        ts = self._now() if ts is None else ts
        self._last_ts = ts
        self._records.append(Record(body=body, ts=ts, turn=self._turn if self._turn_open else None))

    def _record_session_start(self, start: ExecutionEnvironment) -> None:
        # Outside any turn, before the run's first record (its first TurnStarted included).
        self._session_start = None
        env = self._in_session(start)
        if env != self._environment:
            self._environment = env
            self._last_ts = self._now()
            self._records.append(Record(body=env, ts=self._last_ts, turn=None))

    def agent(self, body: Body) -> None:
        """Append agent activity, opening a ``continuation`` turn if none is open."""
        self.ensure_turn()
        self.emit(body)

    def skip(self, reason: str, count: int = 1) -> None:
        """Count a source event or block that was deliberately not imported."""
        self._skipped[reason] += count

    def declare_plan(
        self,
        items: object,
        *,
        text_key: str,
        statuses: Mapping[str, StepStatus],
        unreadable: str,
        task_id: str | None = None,
    ) -> None:
        """Emit the plan a tool's task list declares (Claude Code's TodoWrite, OpenHands' task_tracker).

        ``items`` is the list the model wrote: dicts with the step's text under ``text_key``,
        an optional ``id`` (a blank or missing one is the step's 1-based position) and a
        ``status`` mapped by ``statuses`` (any other is pending). A list that is not such
        is skipped with the reason ``unreadable``. The plan follows the call, not its
        (always trivial) result: it is the agent's declared plan from the moment it writes it.
        ``task_id`` makes it a sub-agent's plan (that task's, not a work item's).
        """
        if not isinstance(items, list) or not all(
            isinstance(item, dict) and isinstance(item.get(text_key), str) for item in items
        ):
            self.skip(unreadable)
            return
        steps = []
        for index, item in enumerate(items, start=1):
            step_id = item.get("id")
            status = item.get("status")
            steps.append(
                PlanStep(
                    id=step_id if isinstance(step_id, str) and step_id.strip() else str(index),
                    text=item[text_key],
                    status=statuses.get(status, "pending") if isinstance(status, str) else "pending",
                )
            )
        self.emit(WorkPlan(work_item_id=None, steps=tuple(steps), task_id=task_id))

    @property
    def turn_open(self) -> bool:
        return self._turn_open

    def start_turn(self, trigger: str, text: str | None, *, message: Body | None = None) -> None:
        """Close any open turn, then open the next with ``TurnStarted`` and its input message."""
        self.end_turn()
        self._turn = self._next_turn
        self._next_turn += 1
        self._turn_open = True
        self.emit(TurnStarted(trigger=trigger, input=text))
        if message is not None:
            self.emit(message)

    def user_turn(self, text: str, *, trigger: str = "user_message") -> None:
        """Open a turn for a user message and record the message."""
        self.start_turn(trigger, text, message=Message(role="user", text=text))

    def ensure_turn(self) -> None:
        """Open a ``continuation`` turn if agent activity arrives with no open turn.

        Transcripts that were resumed, or whose first event is the agent's, still need
        their activity inside a turn: the renderer and projections group evidence by turn.
        """
        if not self._turn_open:
            self.start_turn("continuation", None)

    def end_turn(self, outcome: TurnOutcome = "completed", error: str | None = None) -> None:
        """Close the open turn, if any, with ``outcome``."""
        if self._turn_open:
            # A turn ends with its last activity, not when the next event (perhaps hours
            # later) arrives; only the synthetic clock still advances one step.
            ts = self._last_ts if self._start_ms is not None else None
            self.emit(TurnEnded(outcome=outcome, error=error), ts=ts)
            self._turn_open = False

    def end_run(self, outcome: TurnOutcome = "completed", error: str | None = None) -> None:
        """Close a run inside a multi-run file: end its turn and forget its unanswered calls.

        Runs restart their call ids (``toolu_01`` in every OpenHands instance), so a later
        run's result must never answer an earlier run's intent.
        """
        self.end_turn(outcome, error)
        self._pending.clear()

    def session(
        self,
        session_id: str | None,
        *,
        workspace: str | None = None,
        cwd: str | None = None,
        branch: str | None = None,
    ) -> None:
        """Mark where a run (a session) of the transcript starts, before its first turn.

        Multi-run files (tau-bench's list of runs, OpenHands evaluation output, fine-tuning
        JSONL) hold separate conversations; an ``ExecutionEnvironment`` whose
        ``extra["session_id"]`` names the run tells them apart in the ledger. ``session_id`` is
        the run's own id; None (the format has none) names it ``run <n>``, its place in the file
        counting from 1. An id an earlier run of the file already had gets a ``#2``, ``#3``
        suffix: it is another run. The open turn is closed and unanswered calls forgotten first
        (:meth:`end_run`), and every environment recorded in the run carries the id. The
        environment given is the run's own as far as the transcript says: a run's working
        directory is not the previous run's. It is recorded with the run's first record, so a
        run with nothing in it records nothing.
        """
        self.end_run()
        self._runs += 1
        named = session_id is not None and session_id.strip() != ""
        if named and self._named_session is None:
            self._named_session = session_id
        base = session_id if session_id is not None and named else f"run {self._runs}"
        unique = base
        n = 1
        while unique in self._sessions:
            n += 1
            unique = f"{base}#{n}"
        self._sessions.add(unique)
        self._session = unique
        # Recorded with the run's first record: a run with nothing in it (`[]`) is no session.
        self._session_start = ExecutionEnvironment(workspace=workspace, cwd=cwd, branch=branch)

    def environment(
        self,
        *,
        workspace: str | None = None,
        cwd: str | None = None,
        branch: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> None:
        """Record the execution environment when it differs from the last one recorded.

        Inside a run named by :meth:`session`, ``extra`` carries its ``session_id``.
        """
        # The run's first record is this environment: it is the one that starts the session.
        self._session_start = None
        own = (extra or {}).get("session_id")
        if own is not None and self._session is None and self._named_session is None:
            self._named_session = own  # the transcript's own (Claude Code's sessionId)
        env = self._in_session(
            ExecutionEnvironment(workspace=workspace, cwd=cwd, branch=branch, extra=extra or {})
        )
        if env != self._environment:
            self._environment = env
            self.emit(env)

    def _in_session(self, env: ExecutionEnvironment) -> ExecutionEnvironment:
        """``env`` with the run's session id (unless it names its own) and its ``extra`` sorted."""
        extra = dict(env.extra)
        if self._session is not None:
            extra.setdefault("session_id", self._session)
        return msgspec.structs.replace(env, extra=dict(sorted(extra.items())))

    # ------------------------------------------------------------------ tool calls

    def intent(
        self,
        source_id: str,
        tool: str,
        args: dict[str, Any],
        *,
        call_id: str | None = None,
        task_id: str | None = None,
    ) -> str:
        """Record a tool intent; return the unique holon call id it got.

        ``source_id`` is the key its result will be joined by; the holon call id is
        ``call_id`` (default: ``source_id``), suffixed ``#2``, ``#3``... when already used.
        ``task_id`` makes it a sub-agent's call (its result gets the same task).
        """
        args = _storable(args)
        base = source_id if call_id is None else call_id
        unique = base
        n = 1
        while unique in self._used_call_ids:
            n += 1
            unique = f"{base}#{n}"
        call_id = unique
        self._used_call_ids.add(call_id)
        self._order[call_id] = len(self._order)
        pending = PendingCall(call_id=call_id, tool=tool, args=args, task_id=task_id)
        self._pending.setdefault(source_id, []).append(pending)
        self.ensure_turn()
        self.emit(ToolIntent(call_id=call_id, tool=tool, args=args, task_id=task_id))
        return call_id

    def pending(self, source_id: str) -> PendingCall | None:
        """The oldest unanswered intent with ``source_id`` (the one a result would answer)."""
        waiting = self._pending.get(source_id)
        return waiting[0] if waiting else None

    def waiting(self) -> list[tuple[str, PendingCall]]:
        """Every unanswered intent with its source id, oldest first."""
        calls = [(source, call) for source, waiting in self._pending.items() for call in waiting]
        calls.sort(key=lambda item: self._order[item[1].call_id])
        return calls

    def result(
        self,
        source_id: str,
        *,
        status: ToolStatus,
        output: str = "",
        exit_code: int | None = None,
        touched_files: tuple[str, ...] = (),
        duration_ms: int | None = None,
        edit: bool = False,
    ) -> bool:
        """Record the result of the oldest unanswered intent with ``source_id``.

        ``touched_files`` are the files the call wrote if it succeeded; ``edit`` says the call
        is an edit even when no file is known. An edit the tool refused (its answer is the
        tool's own refusal, :func:`~holon.importers._effects.edit_refused`: a linter rejected
        it, the text to replace was not found) is an ``error`` and touched nothing, whatever
        status the format gave it; a result that is no ``ok`` touched nothing either.

        Returns False (and counts an ``orphan tool result``) when no intent is waiting:
        a result that cannot be joined would break the intent/result pairing holon keeps.
        """
        waiting = self._pending.get(source_id)
        if not waiting:
            self.skip("orphan tool result")
            return False
        if status == "ok" and (touched_files or edit) and edit_refused(output):
            status = "error"
        if status != "ok":
            touched_files = ()
        pending = waiting.pop(0)
        if not waiting:
            del self._pending[source_id]
        self.ensure_turn()
        self.emit(
            ToolResult(
                call_id=pending.call_id,
                tool=pending.tool,
                status=status,
                output=output,
                exit_code=exit_code,
                touched_files=touched_files,
                duration_ms=duration_ms,
                task_id=pending.task_id,
            )
        )
        return True

    # ------------------------------------------------------------------ finish

    def finish(self) -> ImportReport:
        """Close the last turn and return the report.

        The tools the agent called but no ``SystemPolicy`` of the transcript defined (Claude
        Code, SWE-agent and most chat logs record the calls, not the definitions) are
        declared by name, with an object schema and a description that says so: in every
        ``SystemPolicy``, or in one of its own before the first turn when the transcript
        has none. The run had those tools; a prompt rendered from the import
        defines them, so its history's calls can travel as the provider's own tool blocks
        (Anthropic refuses them in a request that defines no tools). A name the providers
        refuse (not 1-64 letters, digits, ``_`` or ``-``) is not declared: its calls stay
        text. A sub-agent's calls (``task_id``) are not the agent's and declare nothing.
        """
        self.end_turn()
        records, declared = _declare_used_tools(self._records)
        return ImportReport(
            format=self._format,
            source=self._source,
            records=records,
            skipped=dict(sorted(self._skipped.items())),
            synthetic_clock=self._start_ms is None,
            session_id=self._named_session,
            declared_tools=declared,
        )


#: The description of a tool the transcript used without defining it.
UNDEFINED_TOOL: Final = "Imported: the transcript used this tool but does not record its definition."
#: A tool name both Anthropic and OpenAI accept.
_TOOL_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _declare_used_tools(records: list[Record]) -> tuple[tuple[Record, ...], tuple[str, ...]]:
    """``records`` with the agent's undefined tools declared, and those tools' names."""
    defined = {tool.name for rec in records if isinstance(rec.body, SystemPolicy) for tool in rec.body.tools}
    used = dict.fromkeys(
        rec.body.tool
        for rec in records
        if isinstance(rec.body, ToolIntent)
        and rec.body.task_id is None
        and _TOOL_NAME.fullmatch(rec.body.tool)
    )
    missing = tuple(name for name in used if name not in defined)
    if not missing:
        return tuple(records), ()
    declared = tuple(
        ToolDefinition(name=name, description=UNDEFINED_TOOL, parameters={"type": "object"})
        for name in missing
    )
    out = list(records)
    policies = [i for i, rec in enumerate(out) if isinstance(rec.body, SystemPolicy)]
    for i in policies:
        # Each policy stands for its run's tools: a later one replaces the earlier.
        policy = out[i].body
        assert isinstance(policy, SystemPolicy)
        out[i] = msgspec.structs.replace(
            out[i], body=msgspec.structs.replace(policy, tools=(*policy.tools, *declared))
        )
    if not policies:
        # Before the first turn, after what the run opens with (its environment, a summary).
        at = next((i for i, rec in enumerate(out) if rec.turn is not None), len(out))
        ts = out[at].ts if at < len(out) else (out[-1].ts if out else 0)
        out.insert(at, Record(body=SystemPolicy(text="", tools=declared), ts=ts, turn=None))
    return tuple(out), missing
