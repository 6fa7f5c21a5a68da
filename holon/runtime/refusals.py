"""Why a :class:`~holon.runtime.Turn`'s named methods refuse an id: the fold could not place it.

The fold carries a record it cannot place in ``state.carried``, which no prompt shows: a
daemon's typo (resolving a wait that is not open, a plan for a finished work item, a second
start of a running task) must not silently lose the model's active work. So the named
methods (:meth:`Turn.resolve_wait`, :meth:`Turn.record_plan`, :meth:`Turn.start_task`, ...)
check here first, against the live state (folded after every append, so what the turn
declared earlier counts), and refuse with a UsageError naming the known ids and the way to
record it anyway (``turn.record``). Each check takes the state and the turn's index.
"""

from __future__ import annotations

from typing import Final

from holon.errors import UsageError
from holon.projections import RuntimeState

__all__ = [
    "check_known_work",
    "check_new_task",
    "check_new_wait",
    "check_open_follow_up",
    "check_open_wait",
    "check_open_work",
    "check_running_task",
]

# How many known ids a refusal lists (open work items, open waits, running tasks...).
_LISTED_IDS: Final = 5


def _listed(ids: list[str]) -> str:
    """Up to :data:`_LISTED_IDS` ids, quoted, and how many more: ``'W1', 'W2' and 3 more``, or ``none``."""
    if not ids:
        return "none"
    shown = ", ".join(repr(i) for i in ids[:_LISTED_IDS])
    return shown if len(ids) <= _LISTED_IDS else f"{shown} and {len(ids) - _LISTED_IDS} more"


def _known_work(state: RuntimeState) -> str:
    """The work items a refusal names: the open ones and the recently finished."""
    finished = [e.id for e in reversed(state.finished_work)]
    return f"open work items: {_listed(list(state.work_items))}; recently finished: {_listed(finished)}"


def check_open_work(state: RuntimeState, turn: int, call: str, what: str, work_item_id: str) -> None:
    """Refuse a plan or decision (``what``: ``plans``, ``decisions``) for a work item that is not open."""
    if work_item_id in state.work_items:
        return
    finished = state.find_work_item(work_item_id)
    if finished is not None:
        problem = (
            f"work item {work_item_id!r} is {finished.state} (since seq {finished.state_seq}) and "
            f"{what} are kept for open work items only, so the fold would only carry this in "
            "state.carried"
        )
        todo = f"reopen it first with turn.activate({work_item_id!r})"
    else:
        problem = (
            f"no open or recently finished work item is {work_item_id!r}, so the fold would only "
            "carry this in state.carried"
        )
        todo = f"declare it first with turn.add_work_item({work_item_id!r}, objective)"
    kind = "WorkPlan" if what == "plans" else "Decision"
    raise UsageError(
        f"{call}(work_item_id={work_item_id!r}) in turn {turn}: {problem} "
        f"({_known_work(state)}); nothing was recorded: {todo}, leave work_item_id out to use "
        f"the active item, or record it anyway with turn.record(holon.records.{kind}(...))"
    )


def check_open_wait(state: RuntimeState, turn: int, id: str) -> None:
    """Refuse the resolution of a wait that is not open."""
    if id in state.waits:
        return
    resolved = next((w for w in reversed(state.resolved_waits) if w.id == id), None)
    problem = (
        f"wait {id!r} was already resolved ({resolved.resolution}) at seq {resolved.resolved_seq}"
        if resolved is not None
        else f"no wait {id!r} is open"
    )
    raise UsageError(
        f"turn.resolve_wait({id!r}) in turn {turn}: {problem} (open waits: "
        f"{_listed(list(state.waits))}), so the fold would only carry the resolution in state.carried; "
        f"nothing was recorded: resolve one of the open waits, open this one first with "
        f"turn.wait_for({id!r}, waiting_on), or record it anyway with "
        f"turn.record(holon.records.WaitingResolved(id={id!r}, ...))"
    )


def check_new_wait(state: RuntimeState, turn: int, id: str) -> None:
    """Refuse a wait under the id of one that is open."""
    open_wait = state.waits.get(id)
    if open_wait is None:
        return
    raise UsageError(
        f"turn.wait_for({id!r}) in turn {turn}: wait {id!r} is already open (waiting on "
        f"{open_wait.waiting_on!r} since seq {open_wait.seq}), and a second one would replace it, so "
        f"one resolution would end both; nothing was recorded: use a new id, resolve the open one first "
        f"with turn.resolve_wait({id!r}) (resolution='cancelled' to drop it), or replace it on purpose "
        f"with turn.record(holon.records.WaitingIntent(id={id!r}, ...))"
    )


def check_new_task(state: RuntimeState, turn: int, id: str) -> None:
    """Refuse a task start under the id of one that is running."""
    running = state.tasks.get(id)
    if running is None:
        return
    raise UsageError(
        f"turn.start_task({id!r}) in turn {turn}: task {id!r} is already running "
        f"({running.description!r}, started at seq {running.started_seq}), and a second start would "
        f"replace it, so the two results could not be told apart; nothing was recorded: use a new id, "
        f"record the running task's result first with turn.task_result({id!r}, ...), or replace it on "
        f"purpose with turn.record(holon.records.TaskStarted(id={id!r}, ...))"
    )


def check_running_task(state: RuntimeState, turn: int, id: str) -> None:
    """Refuse the result of a task that is not running."""
    if id in state.tasks:
        return
    done = next((t for t in reversed(state.finished_tasks) if t.id == id), None)
    problem = (
        f"task {id!r} already rejoined ({done.status}) at seq {done.result_seq}"
        if done is not None
        else f"no task {id!r} was started"
    )
    raise UsageError(
        f"turn.task_result({id!r}) in turn {turn}: {problem} (running tasks: "
        f"{_listed(list(state.tasks))}); nothing was recorded: record the result of a running task, "
        f"start this one first with turn.start_task({id!r}, description), or, for a task started "
        f"before this ledger, record it anyway with turn.record(holon.records.TaskResult(id={id!r}, ...))"
    )


def check_open_follow_up(state: RuntimeState, turn: int, id: str, status: str) -> None:
    """Refuse closing (``status`` done or dropped) a follow-up that is not open."""
    if id in state.follow_ups:
        return
    closed = next((f for f in reversed(state.closed_follow_ups) if f.id == id), None)
    problem = (
        f"follow-up {id!r} was already closed ({closed.status}) at seq {closed.seq}"
        if closed is not None
        else f"no follow-up {id!r} is open"
    )
    raise UsageError(
        f"turn.follow_up({id!r}, status={status!r}) in turn {turn}: {problem} (open follow-ups: "
        f"{_listed(list(state.follow_ups))}); nothing was recorded: close one of the open follow-ups, "
        f"open this one first with turn.follow_up({id!r}, text), or record it anyway with "
        f"turn.record(holon.records.FollowUp(id={id!r}, ..., status={status!r}))"
    )


def check_known_work(state: RuntimeState, turn: int, call: str, id: str, new_state: str) -> None:
    """Refuse moving a work item the agent does not know (neither open nor recently finished)."""
    if state.find_work_item(id) is None:
        raise UsageError(
            f"{call}({id!r}) in turn {turn}: no work item {id!r} is open or recently finished "
            f"({_known_work(state)}), so the fold would only carry the change in state.carried, "
            f"which no prompt shows; nothing was recorded: declare it first with "
            f"turn.add_work_item({id!r}, objective, state={new_state!r}), or record the change anyway "
            f"with turn.record(holon.records.WorkItemState(id={id!r}, state={new_state!r}))"
        )
