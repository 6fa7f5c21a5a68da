"""Rounds: what a turn records after its prompt, as the model reads it appended after that prompt.

Within a turn the prompt is rendered once and the turn's *rounds* — the model's own
outputs (messages, tool calls, plans, decisions, ...) and what came back (tool results,
task results, new input) — are appended after it, in order, so the provider's prefix
cache keeps hitting round after round. This module says how each record reads there,
in the same line format the recent history uses for it once it is history, and whether
the model wrote it (a round of the ``assistant``) or was given it.

:func:`rounds_fit` is the runtime's rule for when the rounds have outgrown the prompt:
then the turn's prompt is rendered again, the rounds shown after its input as history
units (the work on that input so far).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import msgspec

import holon.records as r
from holon.context.refs import ledger_ref

__all__ = [
    "MODEL_OUTPUT_KINDS",
    "bounded_count",
    "call_line",
    "is_model_output",
    "result_head",
    "round_text",
    "rounds_fit",
    "step_line",
]

#: Record kinds a model call produces (besides assistant messages): a model call comes
#: before each run of them. Everything else is input, bookkeeping or derived.
MODEL_OUTPUT_KINDS: Final = frozenset(
    {
        r.ToolIntent.KIND,
        r.WorkItem.KIND,
        r.WorkItemState.KIND,
        r.WorkPlan.KIND,
        r.Decision.KIND,
        r.WaitingIntent.KIND,
        r.TaskStarted.KIND,
        r.FollowUp.KIND,
        r.Brief.KIND,
    }
)

_MARK: Final = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]", "blocked": "[!]", "skipped": "[-]"}


def step_line(step: r.PlanStep) -> str:
    """A plan step as every prompt shows it: ``  [x] s1: text``."""
    return f"  {_MARK[step.status]} {step.id}: {step.text}"


def _sub_agents(body: r.Body) -> bool:
    """Whether ``body`` is a sub-agent's evidence (a ``task_id`` on a message, call or plan)."""
    return isinstance(body, r.Message | r.ToolIntent | r.ToolResult | r.WorkPlan) and body.task_id is not None


def is_model_output(body: r.Body) -> bool:
    """Whether the model wrote this record (so a model call came before it).

    A sub-agent's records are not: its model calls are its own.
    """
    if _sub_agents(body):
        return False
    if isinstance(body, r.Message):
        return body.role == "assistant"
    return type(body).KIND in MODEL_OUTPUT_KINDS


def _cite(seq: int | None) -> str:
    return f"[{ledger_ref(seq)}] " if seq is not None else ""


def call_line(seq: int | None, intent: r.ToolIntent, args: str | None = None) -> str:
    """``[ledger:N] call <id> <tool> <json args>`` (``args`` replaces the JSON when given;
    no ``[ledger:N]`` when ``seq`` is ``None``)."""
    shown = args if args is not None else msgspec.json.encode(intent.args, order="sorted").decode()
    return f"{_cite(seq)}call {intent.call_id} {intent.tool} {shown}"


def result_head(seq: int | None, result: r.ToolResult) -> str:
    """``[ledger:N] result <id> <status>[, exit N][ files: ...]:`` — the line before the output."""
    status = result.status + (f", exit {result.exit_code}" if result.exit_code is not None else "")
    files = f" files: {', '.join(result.touched_files)}" if result.touched_files else ""
    return f"{_cite(seq)}result {result.call_id} {status}{files}:"


def round_text(record: r.Record, *, output: str | None = None, cite: bool = True) -> str | None:
    """How ``record`` reads appended after the turn's prompt (``None``: not shown there).

    ``output`` is a tool or task result's full output when it was moved to the blob store
    (the record then holds only a preview); the model is shown what the tool returned.
    ``cite=False`` leaves out the ``[ledger:N]`` citation (a plain transcript line).

    A sub-agent's records (with a ``task_id``) are no rounds: the agent did not read its
    sub-agent's steps, it reads the task's result (a round) and, in working memory, what
    the task did.
    """
    body = record.body
    if _sub_agents(body):
        return None
    seq = record.seq if cite else None
    ref = _cite(seq)
    if isinstance(body, r.ToolResult | r.TaskResult) and output is None:
        output = body.output or (body.blob.preview if body.blob else "")
    if isinstance(body, r.Message):
        who = body.role + (f" {body.name}" if body.name else "")
        return f"{ref}{who}: {body.text}"
    if isinstance(body, r.Brief):
        scope = f" ({body.work_item_id})" if body.work_item_id else ""
        return f"{ref}brief {body.status}{scope}: {body.text}"
    if isinstance(body, r.ToolIntent):
        return call_line(seq, body)
    if isinstance(body, r.ToolResult):
        return f"{result_head(seq, body)}\n{output}"
    if isinstance(body, r.WorkPlan):
        lines = [f"{ref}plan for {body.work_item_id or '(no work item)'}:"]
        lines.extend(step_line(s) for s in body.steps)
        return "\n".join(lines)
    if isinstance(body, r.Decision):
        why = f" — because {body.rationale}" if body.rationale else ""
        return f"{ref}decision {body.id}: {body.text}{why}"
    if isinstance(body, r.WorkItem):
        lines = [f"{ref}work item {body.id} ({body.state}): {body.objective}"]
        if body.delivery_target:
            lines.append(f"delivery target: {body.delivery_target}")
        lines.extend(f"scope: {c}" for c in body.scope_constraints)
        return "\n".join(lines)
    if isinstance(body, r.WorkItemState):
        reason = f" ({body.reason})" if body.reason else ""
        return f"{ref}work item {body.id} is now {body.state}{reason}"
    if isinstance(body, r.FollowUp):
        return f"{ref}follow-up {body.id} ({body.status}): {body.text}"
    if isinstance(body, r.WaitingIntent):
        return f"{ref}waiting ({body.id}): {body.waiting_on}"
    if isinstance(body, r.WaitingResolved):
        detail = f": {body.detail}" if body.detail else ""
        return f"{ref}wait {body.id} {body.resolution}{detail}"
    if isinstance(body, r.TaskStarted):
        return f"{ref}background task {body.id}: {body.description}"
    if isinstance(body, r.TaskResult):
        return f"{ref}task {body.id} {body.status}: {body.summary}" + (f"\n{output}" if output else "")
    if isinstance(body, r.ExecutionEnvironment):
        parts = [f"{k}={v}" for k, v in (("cwd", body.cwd), ("branch", body.branch)) if v]
        return f"{ref}environment: " + " ".join(parts) if parts else None
    if isinstance(body, r.ContextSummary):
        return f"{ref}summary of earlier context: {body.text}"
    # The policy, turn boundaries, rendered prompts and derived records are not rounds.
    return None


# A round's part longer than this is counted a piece at a time, only as far as it can fit.
_WHOLE_CHARS: Final = 1 << 20
_PIECE_CHARS: Final = 1 << 16


def bounded_count(count: Callable[[str], int], text: str, room: int) -> int:
    """``count(text)``, or for a text over 1 Mi characters an upper bound that stops once
    it passes ``room``.

    A long text is counted in pieces cut at line breaks, plus one token per break: for an
    estimator whose counts add up over joins (``Estimator.joins_add_up``) that sum is at
    least the whole count, so a round judged to fit does fit (one judged not to may have
    fitted narrowly: the prompt is then rendered again a call early). Counting stops as
    soon as the sum passes ``room``: a 50 MB tool output does not fit any budget, and
    counting all of its pieces took seconds. A stretch with no line break is counted whole.
    """
    if len(text) <= _WHOLE_CHARS:
        return count(text)
    total, start, end = 0, 0, len(text)
    while start < end:
        cut = text.find("\n", start + _PIECE_CHARS)
        stop = end if cut < 0 else cut
        total += count(text[start:stop]) + (1 if cut >= 0 else 0)
        if total > room:
            return total
        start = stop + 1
    return total


def rounds_fit(prompt_tokens: int, round_tokens: int, available: int) -> bool:
    """Whether a turn's rounds still fit after its prompt (the output reserve is already off)."""
    return prompt_tokens + round_tokens <= available
