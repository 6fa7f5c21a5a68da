"""RuntimeState: the fold of evidence and runtime records into what the agent knows now.

:func:`apply_runtime` is a pure step ``(state, record) -> state``. Every container in
the state is either bounded by a :class:`~holon.projections.ProjectionConfig` window or
holds only *open* things (non-terminal work items, open waits, running tasks, open
follow-ups), so one step costs the same at seq 100 and at seq 10,000,000. State is
never mutated: a step copies only the containers the record touches (copy-on-write),
which keeps every earlier state valid for checkpoints and property tests.

Window entries keep the seq of the record(s) they came from, so a renderer can cite
``ledger:<seq>`` and ``holon get`` can restore the original bytes.

The entries themselves are :mod:`holon.projections.entries`, the readings of evidence the
fold shares with the snapshot :mod:`holon.projections.evidence`; this module re-exports
the names it always offered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, TypeAlias

import msgspec

import holon.records as r
from holon.projections.config import DEFAULT_CONFIG, ProjectionConfig
from holon.projections.entries import (
    DERIVED_WORK_PREFIX,
    TERMINAL_WORK_STATES,
    BriefEntry,
    CarriedRecord,
    DecisionEntry,
    EnvironmentEntry,
    FailingCheck,
    FileTouch,
    FollowUpEntry,
    MandateEntry,
    MessageEntry,
    PlanEntry,
    PolicyEntry,
    PromptEntry,
    RequestEntry,
    ResultEntry,
    RuntimeState,
    SummaryEntry,
    TaskEntry,
    ToolExecution,
    TurnState,
    WaitEntry,
    WorkItemEntry,
    WorkState,
    derived_work,
    queued_work,
    waiting_work,
    working_dir,
)
from holon.projections.evidence import (
    COMMAND_CHARS,
    FILE_ARGUMENT_KEYS,
    REQUEST_ROLES,
    VERIFICATION_MARKERS,
    cap_plan,
    command_of,
    file_arguments,
    is_verification,
    normalize_path,
    one_line,
    task_job,
)

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
    "WorkState",
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

# The end of a failing check's output kept in state: the lines a test runner or linter
# puts its verdict on (pytest's short summary, a compiler's last error).
_TAIL_LINES: Final = 3
_TAIL_CHARS: Final = 400


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
            command=one_line(body.tool, COMMAND_CHARS),
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
