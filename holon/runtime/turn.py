"""A turn of an agent: what it records, the prompt it renders, the tool calls it makes.

:class:`Turn` (``with agent.turn(input=...) as turn``) appends its records through the
agent's write core (:class:`~holon.runtime.core.AgentCore`), renders the prompt for each
model call (:meth:`Turn.context`) and counts the rounds recorded after it, starts tool
calls through the write-ahead log (:meth:`Turn.tool`, :mod:`holon.runtime.calls`) and
answers recall calls (:meth:`Turn.recall`). Its named methods refuse ids the fold could
not place; leaving its block records its end (:class:`TurnSummary`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

import msgspec

import holon.records as r
from holon.context import Prompt, build_context, get_estimator, prompt_rendered
from holon.context.render import token_counter
from holon.context.rounds import (
    bounded_count,
    call_line,
    is_model_output,
    result_head,
    round_text,
    rounds_fit,
)
from holon.errors import InvalidRecord, InvalidRef, RefNotFound, UsageError
from holon.projections import derived_before
from holon.runtime.calls import ToolCall
from holon.runtime.core import PREVIEW_CHARS, AgentCore, Outcome, checked, error_text, strings
from holon.runtime.recall import GET_TOOL, RECALL_TOOL_NAMES, recall_args, search_text
from holon.runtime.refusals import (
    check_known_work,
    check_new_task,
    check_new_wait,
    check_open_follow_up,
    check_open_wait,
    check_open_work,
    check_running_task,
)

if TYPE_CHECKING:
    from holon.runtime.agent import Agent

__all__ = ["Turn", "TurnSummary"]

log = logging.getLogger("holon.runtime")

# Kinds only the runtime itself writes: a caller recording one would break the turn
# structure or forge a derived record.
_RUNTIME_KINDS: Final = frozenset(
    {r.TurnStarted.KIND, r.TurnEnded.KIND, r.PromptRendered.KIND, r.ModelCall.KIND, *r.DERIVED_KINDS}
)


class TurnSummary(msgspec.Struct, frozen=True, kw_only=True):
    """How a turn ended and what its post-turn refresh derived."""

    turn: int
    outcome: Outcome
    first_seq: int
    last_seq: int
    deltas: tuple[r.WorkingMemoryDelta, ...] = ()
    episodes: tuple[r.ContextEpisodeRecord, ...] = ()
    checkpoint_seq: int | None = None


class Turn:
    """An open turn of an :class:`Agent` (from :meth:`Agent.turn`); records go through it.

    Leaving the ``with`` block appends ``turn_ended`` (``completed``; ``waiting`` after
    :meth:`wait_for`; ``failed`` when an exception escapes, which is re-raised;
    ``interrupted`` for KeyboardInterrupt and other BaseExceptions), runs the post-turn
    refresh, appends its derived records and flushes. :attr:`summary` then holds the
    outcome and what was derived.
    """

    def __init__(
        self,
        agent: Agent,
        core: AgentCore,
        index: int,
        *,
        end: Callable[[Turn, Outcome, str | None], TurnSummary],
    ) -> None:
        """Use :meth:`Agent.turn`; ``end`` records the turn's end (its agent's)."""
        self.agent = agent
        self._core = core
        self._end = end
        self.index = index
        self.first_seq = -1
        self.summary: TurnSummary | None = None
        self._prompt: Prompt | None = None
        self._prompts = 0
        # Rounds recorded since the prompt was rendered, and their estimated tokens.
        self._rounds: list[dict[str, Any]] = []
        self._round_tokens = 0
        self._calls: list[ToolCall] = []
        self._outcome: Outcome | None = None
        self._waiting = False
        self._ended = False

    # ------------------------------------------------------------------ context

    def context(self) -> Prompt:
        """The prompt for this turn's next model call; call it before every model call.

        The first call renders the prompt and appends its ``prompt_rendered`` record, which
        confirms the working-memory revision shown (clearing the pending delta) and records
        the episode selection and the history anchor; then the ledger is flushed, so the
        turn's input and the record of what the model is about to see are durable before
        the model call. Later calls return the *same* prompt while the rounds recorded
        since it (see :meth:`messages`) still fit the budget after it: the rounds are
        appended after the prompt, so the provider's prefix cache keeps hitting round
        after round. Returning the same prompt, it flushes what was recorded since the
        last flush (a tool's result, the model's words), so they are durable before the
        model call that follows them. Once they no longer fit, the prompt is rendered again — this turn's
        calls are then in its recent history, cleared and placed like any history — and
        the rounds start over. It is rendered again too when the turn's evidence made
        something working memory states untrue (a decision revised, a plan step
        reworded, the active work switched, a wait resolved): working memory is
        refreshed first (:func:`~holon.projections.refresh_before_prompt`), so the model
        is never shown the old statement beside the new one. A daemon compares the
        returned prompt with the one it holds (``is not``) and, when it changed, starts
        its message list again from it.
        """
        self._check_live()
        agent, core = self.agent, self._core
        prompt = self._prompt
        available = agent.config.budget.available
        owed = derived_before(core.state, r.PromptRendered.KIND, tail_ts=core.tail_ts)
        if prompt is None or owed or not rounds_fit(prompt.total_tokens, self._round_tokens, available):
            with core.exclusive():
                core.append_derived(owed)
                prompt = build_context(
                    core.state,
                    agent.config.budget,
                    agent.config.render,
                    agent_id=agent.agent_id,
                    index=agent.episodes,
                    history=core.evidence,
                )
                core.append(prompt_rendered(prompt), self.index)
                # The model is called next, often for seconds: make the turn's input and the
                # record of what the model is shown durable first, so a crash during the
                # call leaves an interrupted turn with its input, not a lost one.
                core.flush()
            self._prompt = prompt
            self._prompts += 1
            self._rounds, self._round_tokens = [], 0
        elif core.flushed_seq < core.state.seq:
            # The same prompt, for the next model call: the rounds recorded since the last
            # flush (a tool's result, the model's words) were buffered. A crash during that
            # call, the longest phase of a turn, lost them: a side effect that ran and was
            # recorded was reported `unknown` on the next open.
            with core.exclusive():
                core.flush()
        return prompt

    @property
    def prompt(self) -> Prompt | None:
        """The prompt :meth:`context` rendered last, if it was called."""
        return self._prompt

    @property
    def prompts_rendered(self) -> int:
        """How many times this turn's prompt was rendered (1 + re-renders when rounds outgrew it)."""
        return self._prompts

    @property
    def prompt_seq(self) -> int | None:
        """The seq of the ``prompt_rendered`` record of :attr:`prompt` (None before :meth:`context`)."""
        last = self.agent.state.last_prompt
        return last.seq if self._prompt is not None and last is not None else None

    @property
    def round_tokens(self) -> int:
        """Estimated tokens of the rounds recorded after :attr:`prompt` (what a request adds to it)."""
        return self._round_tokens

    def record_model_call(self, call: r.ModelCall) -> int:
        """Record a model call and the usage its provider reported; returns its seq.

        :mod:`holon.runtime.loop` calls this after every model call; a daemon with a loop
        of its own calls it with what its provider's response says. The record is for the
        audit (``holon audit PATH --report usage``): it is not a round, and no prompt shows it.
        """
        self._check_live()
        if not isinstance(call, r.ModelCall):
            raise UsageError(f"record_model_call takes a holon.records.ModelCall, not {type(call).__name__}")
        if self._prompt is None or call.prompt_seq != self.prompt_seq:
            raise UsageError(
                f"model call names prompt_seq {call.prompt_seq}, but the prompt of this turn's next model "
                f"call is ledger:{self.prompt_seq}: call turn.context() before the model call and record "
                "the call with turn.prompt_seq"
            )
        return self._core.append(call, self.index).seq

    def messages(self) -> list[dict[str, Any]]:
        """The prompt for the next model call followed by the rounds recorded after it, in order.

        Provider-neutral chat items: ``{"role": "system", "content": <Stable + AgentScoped
        text>}``, ``{"role": "user", "content": <TurnScoped text>}``, then one item per
        round recorded after the prompt: messages (``{"role": <role>, "content": ...}``),
        tool calls with their results (``{"role": "tool", "call_id", "name", "args",
        "status", "content", "replayed"}``) and the model's other records — plans,
        decisions, waits — as ``{"role": "assistant", "content": <the record as a line>}``
        (input such as a task result as ``"user"``). Append-only while the prompt holds;
        it calls :meth:`context`, so when the rounds no longer fit, the list starts over
        from the new prompt.
        """
        prompt = self.context()
        prefix = "\n\n".join(s.text for s in prompt.sections if s.stability != "turn")
        head: list[dict[str, Any]] = []
        if prefix:
            head.append({"role": "system", "content": prefix})
        head.append({"role": "user", "content": prompt.block_text("turn")})
        return head + [dict(item) for item in self._rounds]

    def _add_round(self, item: dict[str, Any], *parts: str) -> None:
        """Count a round recorded after the prompt (the parts of its text: a long output is
        counted on its own, as the next render's history will count it, so it is counted once)."""
        if self._prompt is not None:  # before the first prompt, the prompt itself shows it
            name = self.agent.config.render.estimator
            count = token_counter(name)
            self._rounds.append(item)
            # Past the room left, a long part's exact count changes nothing (the next call
            # renders the prompt again): where it is a sound upper bound, stop counting there.
            bounded = get_estimator(name).joins_add_up
            room = self.agent.config.budget.available - self._prompt.total_tokens
            for part in parts:
                left = room - self._round_tokens
                self._round_tokens += (bounded_count(count, part, left) if bounded else count(part)) + 1

    def _add_tool_round(self, call: ToolCall) -> None:
        assert call.result is not None and call.intent_seq is not None
        intent = r.ToolIntent(call_id=call.call_id, tool=call.tool, args=call.args)
        head = call_line(call.intent_seq, intent)
        if call.result_seq is not None:
            head += "\n" + result_head(call.result_seq, call.result)
        item = {
            "role": "tool",
            "call_id": call.call_id,
            "name": call.tool,
            "args": call.args,
            "status": call.result.status,
            "content": call.output,
            "replayed": call.replayed,
        }
        self._add_round(item, head, call.output)

    # ------------------------------------------------------------------ recording

    def record(self, body: r.Body) -> r.Record:
        """Append any evidence record in this turn (runtime and derived kinds are refused).

        This is the raw evidence path, and it stays permissive: it records what it is
        given even when the ids it names are unknown (a state change for an undeclared
        work item, the resolution of a wait that is not open, the result of a task this
        ledger never saw start), which an importer or a replay of another tool's history
        needs. The fold keeps what it cannot place in ``state.carried``, which the prompt
        does not show. The named methods (:meth:`activate`, :meth:`resolve_wait`,
        :meth:`task_result`, ...) refuse such calls instead; use this method to record
        one of them anyway.

        A sub-agent's evidence goes through here too: its messages, tool intents and
        results and plans, each with the ``task_id`` of the running task it belongs to. It
        is kept apart from the agent's own (working memory shows it as the task's
        aggregates) and is not a round of this turn: the model sees the task's result.
        """
        self._check_live()
        kind = getattr(type(body), "KIND", None)
        if not isinstance(kind, str) or r.BODY_TYPES.get(kind) is not type(body):
            raise InvalidRecord(
                f"{type(body).__name__} is not a record body: pass one of the holon.records kinds "
                f"({', '.join(sorted(r.BODY_TYPES))}), e.g. records.Message(role=..., text=...)",
                where="the record to append",
            )
        if r.kind_of(body) in _RUNTIME_KINDS:
            raise UsageError(
                f"{r.kind_of(body)} records are written by the runtime itself "
                "(turn boundaries, rendered prompts, derived memory); use the Turn methods"
            )
        if isinstance(body, r.ToolIntent | r.ToolResult) and body.task_id is None:
            # A sub-agent's calls (a task_id) ran elsewhere and are recorded as evidence.
            raise UsageError(
                "tool calls go through turn.tool(...), which keeps the write-ahead log "
                "(a sub-agent's calls, recorded with its task_id, go through turn.record)"
            )
        stored = self._core.append(body, self.index)
        # A large task output is in the blob store now; the round shows what the caller gave.
        text = round_text(stored, output=body.output if isinstance(body, r.TaskResult) else None)
        if text is not None:
            if isinstance(body, r.Message):
                item: dict[str, Any] = {"role": body.role, "content": body.text}
                if body.name is not None:
                    item["name"] = body.name
            else:
                item = {"role": "assistant" if is_model_output(body) else "user", "content": text}
            self._add_round(item, text)
        return stored

    def record_message(
        self, text: str, *, role: str = "assistant", name: str | None = None, channel: str | None = None
    ) -> int:
        """Record a message (default: the assistant's reply); returns its seq."""
        return self.record(r.Message(role=role, text=text, name=name, channel=channel)).seq  # type: ignore[arg-type]

    def record_plan(
        self, steps: list[r.PlanStep] | tuple[r.PlanStep, ...], *, work_item_id: str | None = None
    ) -> int:
        """Replace the plan of a work item (default: the active one) whole.

        ``steps`` are :class:`~holon.records.PlanStep` (``PlanStep(id="s1", text="run the
        tests")``, status ``pending`` unless given); a bare string, or a list of strings,
        is refused with an :class:`~holon.errors.InvalidRecord` saying so. With no active
        work item (and no ``work_item_id``) the plan is the unscoped one.

        An explicit ``work_item_id`` must name an open (queued, active or waiting) work
        item, declared earlier (in this turn too): plans are kept for open work only, so
        a plan for a finished item would be carried in ``state.carried`` (no prompt
        shows it), as would one for an item never declared (declaring it later does not
        bring the plan back).
        Otherwise a :class:`~holon.errors.UsageError` names the id and the open items,
        and nothing is recorded: declare the item with :meth:`add_work_item` (or reopen
        a finished one with :meth:`activate`) first, or record the plan anyway with
        ``turn.record(holon.records.WorkPlan(...))``.
        """
        self._check_live()
        if work_item_id is not None:
            check_open_work(self.agent.state, self.index, "turn.record_plan", "plans", work_item_id)
        target = work_item_id if work_item_id is not None else self.agent.state.active_work_item_id
        if isinstance(steps, str):
            raise InvalidRecord(
                f"a plan is a list of steps, got the string {steps!r}: "
                f"pass [holon.PlanStep(id='s1', text={steps!r})]",
                where="the record to append",
                field="body.steps",
            )
        steps = tuple(steps)
        for n, step in enumerate(steps):
            if isinstance(step, str):
                raise InvalidRecord(
                    f"a plan step is a holon.PlanStep with an id of its own, got the string {step!r}: "
                    f"pass holon.PlanStep(id='s{n + 1}', text={step!r})",
                    where="the record to append",
                    field=f"body.steps[{n}]",
                )
        return self.record(r.WorkPlan(work_item_id=target, steps=steps)).seq

    def record_decision(
        self, id: str, text: str, *, rationale: str | None = None, work_item_id: str | None = None
    ) -> int:
        """Record a decision (scoped to the active work item unless given; unscoped when none is active).

        An explicit ``work_item_id`` must name an open (queued, active or waiting) work
        item, as for :meth:`record_plan`: decisions are kept per open work item, so one
        for a finished item, or one never declared, would be carried. Otherwise a
        :class:`~holon.errors.UsageError` says so and nothing is recorded;
        ``turn.record(holon.records.Decision(...))`` records it anyway.
        """
        self._check_live()
        if work_item_id is not None:
            check_open_work(self.agent.state, self.index, "turn.record_decision", "decisions", work_item_id)
        target = work_item_id if work_item_id is not None else self.agent.state.active_work_item_id
        return self.record(r.Decision(id=id, text=text, rationale=rationale, work_item_id=target)).seq

    def record_brief(
        self,
        status: Literal["ack", "result", "failure"],
        text: str,
        *,
        work_item_id: str | None = None,
        task_id: str | None = None,
    ) -> int:
        """Record a brief: acknowledgement, result or failure."""
        return self.record(r.Brief(status=status, text=text, work_item_id=work_item_id, task_id=task_id)).seq

    def follow_up(
        self,
        id: str,
        text: str,
        *,
        status: Literal["open", "done", "dropped"] = "open",
        work_item_id: str | None = None,
    ) -> int:
        """Declare (or close, with ``status``) a follow-up.

        Declaring (``status="open"``) is always accepted: it opens the follow-up, rewords
        an open one, or reopens a closed one. Closing (``"done"`` / ``"dropped"``) needs a
        follow-up of that id that is open now (opened earlier, in this turn too); closing
        an id that is not open — never opened, a typo, or closed already — would leave
        the intended follow-up open in the prompt, so it is refused with a
        :class:`~holon.errors.UsageError` naming the open follow-ups, and nothing is
        recorded (``turn.record(holon.records.FollowUp(...))`` records it anyway).
        """
        self._check_live()
        if status != "open":
            check_open_follow_up(self.agent.state, self.index, id, status)
        return self.record(r.FollowUp(id=id, text=text, status=status, work_item_id=work_item_id)).seq

    def wait_for(
        self, id: str, waiting_on: str, *, work_item_id: str | None = None, resume_hint: str | None = None
    ) -> int:
        """Record a waiting intent; the turn then ends ``waiting`` (unless :meth:`end` says otherwise).

        ``id`` must not name a wait that is open now: the fold would replace the open one,
        so its ``waiting_on`` would leave the prompt and one resolution would end both. It
        is refused with a :class:`~holon.errors.UsageError` naming the open wait, and
        nothing is recorded; resolve it first (``resolution="cancelled"`` to drop it), or
        replace it on purpose with ``turn.record(holon.records.WaitingIntent(...))``.
        """
        self._check_live()
        check_new_wait(self.agent.state, self.index, id)
        seq = self.record(
            r.WaitingIntent(id=id, waiting_on=waiting_on, work_item_id=work_item_id, resume_hint=resume_hint)
        ).seq
        self._waiting = True
        return seq

    def resolve_wait(
        self,
        id: str,
        *,
        resolution: Literal["arrived", "cancelled", "timed_out"] = "arrived",
        detail: str | None = None,
    ) -> int:
        """Record that an open wait ended.

        ``id`` must name a wait that is open now (opened with :meth:`wait_for`, in this
        turn too). Resolving one that is not — never opened, a typo, or resolved already
        (resolving twice) — would be carried by the fold (``state.carried``) and leave
        the real wait open in the prompt, so it is refused with a
        :class:`~holon.errors.UsageError` naming the open waits, and nothing is
        recorded; ``turn.record(holon.records.WaitingResolved(...))`` records it anyway.
        """
        self._check_live()
        check_open_wait(self.agent.state, self.index, id)
        return self.record(r.WaitingResolved(id=id, resolution=resolution, detail=detail)).seq

    def add_work_item(
        self,
        id: str,
        objective: str,
        *,
        state: Literal["queued", "active", "waiting", "done", "abandoned"] = "queued",
        delivery_target: str | None = None,
        scope_constraints: tuple[str, ...] = (),
        summary: str | None = None,
    ) -> int:
        """Declare (or redeclare, replacing every field) a work item."""
        return self.record(
            r.WorkItem(
                id=id,
                objective=objective,
                state=state,
                delivery_target=delivery_target,
                scope_constraints=strings(scope_constraints, "body.scope_constraints"),
                summary=summary,
            )
        ).seq

    def set_work_state(
        self,
        id: str,
        state: Literal["queued", "active", "waiting", "done", "abandoned"],
        *,
        reason: str | None = None,
    ) -> int:
        """Move a work item to a new state (activate, wait, finish, abandon).

        ``id`` must name a work item the agent knows: an open one (declared with
        :meth:`add_work_item`, in this turn too) or one among the
        ``projection.finished_window`` most recently finished. A finished item can be
        moved again: to ``active``, ``queued`` or ``waiting`` reopens it (its plan and
        decisions start empty, as the fold keeps those for open work only); ``done``
        or ``abandoned`` again records the new reason. Any other id — undeclared, a
        typo, finished too long ago — is refused with a :class:`~holon.errors.UsageError`
        naming the open and recently finished items, and nothing is recorded: the fold
        would only carry the change and the model would silently lose its work. Declare
        it with :meth:`add_work_item` (which works for an old finished item too), or
        record the change anyway with ``turn.record(holon.records.WorkItemState(...))``.
        """
        return self._set_work_state("turn.set_work_state", id, state, reason)

    def activate(self, id: str, *, reason: str | None = None) -> int:
        """Make a work item the active one (a known id only: see :meth:`set_work_state`)."""
        return self._set_work_state("turn.activate", id, "active", reason)

    def finish_work(self, id: str, *, reason: str | None = None) -> int:
        """Mark a work item done (a known id only: see :meth:`set_work_state`)."""
        return self._set_work_state("turn.finish_work", id, "done", reason)

    def _set_work_state(
        self,
        call: str,
        id: str,
        state: Literal["queued", "active", "waiting", "done", "abandoned"],
        reason: str | None,
    ) -> int:
        self._check_live()
        check_known_work(self.agent.state, self.index, call, id, state)
        return self.record(r.WorkItemState(id=id, state=state, reason=reason)).seq

    def start_task(self, id: str, description: str, *, work_item_id: str | None = None) -> int:
        """Record a background task started.

        ``id`` must not name a task that is running now: the fold would replace it, and
        the two tasks' results could not be told apart (the first result would end the
        second start). It is refused with a :class:`~holon.errors.UsageError` naming the
        running task, and nothing is recorded; use a new id, record the running task's
        result first, or replace it on purpose with
        ``turn.record(holon.records.TaskStarted(...))``.
        """
        self._check_live()
        check_new_task(self.agent.state, self.index, id)
        return self.record(r.TaskStarted(id=id, description=description, work_item_id=work_item_id)).seq

    def task_result(
        self, id: str, *, status: Literal["ok", "error", "cancelled"], summary: str, output: str = ""
    ) -> int:
        """Record a running background task's result rejoining the agent (large outputs go to a blob).

        ``id`` must name a task that is running now (started with :meth:`start_task`, in
        this turn too). A result for a task never started — a typo — or one that already
        rejoined (a second result) is refused with a :class:`~holon.errors.UsageError`
        naming the running tasks, and nothing is recorded. For a task started before
        this ledger (an import), record the result anyway with
        ``turn.record(holon.records.TaskResult(...))``.
        """
        self._check_live()
        check_running_task(self.agent.state, self.index, id)
        return self.record(r.TaskResult(id=id, status=status, summary=summary, output=output)).seq

    def set_environment(
        self,
        *,
        workspace: str | None = None,
        cwd: str | None = None,
        branch: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> int:
        """Record where the agent works."""
        return self.record(
            r.ExecutionEnvironment(workspace=workspace, cwd=cwd, branch=branch, extra=dict(extra or {}))
        ).seq

    # ------------------------------------------------------------------ tools

    def recall(self, name: str, args: dict[str, Any]) -> ToolCall:
        """Answer the model's call of a recall tool (``holon_get``, ``holon_search``), recorded.

        Offer :data:`~holon.runtime.recall.RECALL_TOOLS` to the model (in the
        ``SystemPolicy``) and route its calls of them here instead of to
        :meth:`tool`: the call goes through the write-ahead log like any other (intent,
        then result), so the ledger holds what the model was given back. A bad ref, an
        unknown ref, an offset past the end or malformed arguments become an ``error``
        result whose text says what to do — the model made the mistake, so the model is
        told. Send ``call.output`` back as the tool result, as for any tool. A name that
        is not a recall tool is the daemon's mistake: UsageError, nothing recorded.
        """
        if name not in RECALL_TOOL_NAMES:
            raise UsageError(
                f"{name!r} is not a recall tool ({', '.join(sorted(RECALL_TOOL_NAMES))}); "
                "run it with turn.tool"
            )
        try:
            call = self.tool(name, args)
        except InvalidRecord as exc:
            # The model's arguments cannot be stored as given (not a JSON object, an integer
            # beyond 64 bits, a lone surrogate): the call is recorded with them as text and
            # the model is told, like any other mistake of its arguments.
            shown = repr(args).encode("utf-8", "backslashreplace").decode("utf-8")
            problem = error_text(exc).removeprefix("InvalidRecord: ")
            if isinstance(args, Mapping):
                # The ledger's reason is written for the daemon ("record it as a string or
                # null"); when the arguments are also wrong as the tool reads them (a NaN
                # offset), the model is told that instead, in the tool's terms.
                try:
                    recall_args(name, args)
                except UsageError as mistake:
                    problem = str(mistake)
            call = self.tool(name, {"unrecordable_arguments": shown[:PREVIEW_CHARS]})
            with call:
                call.finish(problem, status="error")
            return call
        with call:  # anything else (a damaged ledger) records an error result and propagates
            try:
                given = recall_args(name, args)
                if name == GET_TOOL.name:
                    output = self.agent.get_text(given["ref"], offset=given["offset"])
                else:
                    hits = self.agent.search(given["query"], limit=given["limit"])
                    output = search_text(given["query"], hits)
            except (InvalidRef, RefNotFound, UsageError) as exc:
                call.finish(str(exc), status="error")
            else:
                call.finish(output)
        return call

    def tool(self, name: str, args: dict[str, Any], *, idempotency_key: str | None = None) -> ToolCall:
        """Start a tool call through the write-ahead log.

        When ``idempotency_key`` names a call that already has a result, nothing is
        appended and nothing must run: the returned call is ``replayed`` with that
        result (an ``unknown`` result too: check its effects, then retry under a new
        key). Otherwise the intent is appended and made durable (flushed and, unless
        the fsync policy is ``never``, fsynced) *before* this returns, so the side effect
        that follows is always preceded by its intent on disk.
        """
        self._check_live()
        _check_call(name, args)
        if idempotency_key is not None:
            replayed = self._replayed(name, args, idempotency_key)
            if replayed is not None:
                return replayed
        core = self._core
        call_id = f"c{self.index}.{len(self._calls) + 1}"
        with core.exclusive():
            stored = core.append(
                r.ToolIntent(call_id=call_id, tool=name, args=dict(args), idempotency_key=idempotency_key),
                self.index,
            )
            # The write-ahead rule: the intent reaches the disk before the side effect runs.
            core.flush()
        body = stored.body
        assert isinstance(body, r.ToolIntent)
        call = self._call(call_id, name, body.args, idempotency_key, result=None, intent_seq=stored.seq)
        self._calls.append(call)
        return call

    def _replayed(self, name: str, args: dict[str, Any], idempotency_key: str) -> ToolCall | None:
        """The call already made under ``idempotency_key``, replayed with its result (None: no such call).

        Refuses (UsageError) a key whose call is still in flight, or was made for another
        tool or other arguments.
        """
        entry = self._core.tools.keys.get(idempotency_key)
        if entry is None:
            return None
        if entry.result_seq is None:
            raise UsageError(
                f"a call under idempotency key {idempotency_key!r} ({entry.call_id}) is still in "
                "flight; finish it before retrying"
            )
        intent = self._core.ledger.get(entry.intent_seq).body
        assert isinstance(intent, r.ToolIntent)
        # Compared in wire form, as the intent was stored (tuples read back as lists);
        # arguments that do not encode are an InvalidRecord, as for a new call.
        asked = checked(r.Record(body=r.ToolIntent(call_id="", tool=name, args=args), ts=0)).body
        assert isinstance(asked, r.ToolIntent)
        if (intent.tool, intent.args) != (asked.tool, asked.args):
            raise UsageError(
                f"idempotency key {idempotency_key!r} was used for {intent.tool} {intent.args!r} "
                f"(ledger:{entry.intent_seq}), not {name} {args!r}: a key names one effect; "
                "use a new key for a different call"
            )
        recorded = self.agent.recorded_call(idempotency_key)
        assert recorded is not None
        call = self._call(
            entry.call_id, name, dict(args), idempotency_key, result=recorded, intent_seq=entry.intent_seq
        )
        self._add_tool_round(call)
        return call

    def _call(
        self,
        call_id: str,
        name: str,
        args: dict[str, Any],
        idempotency_key: str | None,
        *,
        result: r.ToolResult | None,
        intent_seq: int,
    ) -> ToolCall:
        """A call of this turn, refused once the turn ends, its result counted as a round."""
        return ToolCall(
            self._core,
            self.index,
            check_live=self._check_live,
            on_result=self._add_tool_round,
            call_id=call_id,
            tool=name,
            args=args,
            idempotency_key=idempotency_key,
            result=result,
            intent_seq=intent_seq,
        )

    def open_calls(self) -> Iterator[ToolCall]:
        """Calls of this turn whose intent is recorded but whose result is not."""
        return (c for c in self._calls if c.result is None)

    # ------------------------------------------------------------------ ending

    def end(self, outcome: Outcome) -> None:
        """Choose how the turn ends when its block exits normally (default: completed/waiting)."""
        self._check_live()
        # Checked now: a bad outcome found only when turn_ended is appended would leave the
        # turn open in the ledger after its block exited.
        if outcome not in get_args(Outcome):
            raise UsageError(f"outcome {outcome!r} must be one of {', '.join(get_args(Outcome))}")
        self._outcome = outcome

    @property
    def ended(self) -> bool:
        """True once the turn's ``turn_ended`` record is written."""
        return self._ended

    def _check_live(self) -> None:
        if self._ended:
            raise UsageError(
                f"turn {self.index} has ended; record inside `with agent.turn(...) as turn:` "
                "(recording outside a turn is not allowed)"
            )
        self._core.check_open()

    def __enter__(self) -> Turn:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._ended:
            return
        error: str | None = None
        if exc is None:
            outcome: Outcome = self._outcome or ("waiting" if self._waiting else "completed")
        elif isinstance(exc, Exception):
            outcome, error = "failed", error_text(exc)
        else:
            outcome, error = "interrupted", error_text(exc)
        self._ended = True
        core = self._core
        if core.closed or (exc is not None and core.stale is not None):
            # Nothing more is recorded by a stopped agent: the turn stays open in the
            # ledger, and the next open closes it as interrupted.
            return
        try:
            self.summary = self._end(self, outcome, error)
        except Exception as end_exc:
            if exc is None:
                raise
            # The block's own exception (a KeyboardInterrupt that cut a flush short, an
            # OSError) is what the daemon must see, not the failure it caused here.
            log.warning(
                "ledger %s: turn %d's end was not recorded (%s); it stays open in the ledger until the "
                "next open closes it as interrupted",
                core.ledger.path,
                self.index,
                error_text(end_exc),
            )


def _check_call(name: str, args: dict[str, Any]) -> None:
    """Refuse (InvalidRecord) a call that names no tool, or whose arguments are not a mapping."""
    if not isinstance(name, str) or not name.strip():
        # A call to no tool: nothing could run it, and no provider accepts it back in
        # the next request (the importers refuse one in a transcript for the same reason).
        raise InvalidRecord(
            f"tool name {name!r} is blank; a call names the tool it runs (the model's call had "
            "no name: answer it with an error message instead of recording a call)",
            where="the record to append",
            field="body.tool",
        )
    # Checked before anything else: dict() of a list or string fails with a TypeError,
    # or silently turns a list of pairs into arguments the caller did not write.
    if not isinstance(args, Mapping):
        raise InvalidRecord(
            f"tool {name!r}: arguments must be a dict (a JSON object), got {type(args).__name__}",
            where="the record to append",
            field="body.args",
        )
