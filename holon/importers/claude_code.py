"""Import Claude Code session transcripts (``~/.claude/projects/*/<session>.jsonl``).

Each line is one event with a ``type``. ``user`` events carry the operator's text or
``tool_result`` blocks; ``assistant`` events carry ``text``, ``tool_use`` and
``thinking`` blocks; ``summary`` and ``system``/``compact_boundary`` events come from
compaction. See docs/importers.md for the full mapping.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from holon.importers._builder import ImportReport, ToolStatus, TranscriptBuilder
from holon.importers._effects import edit_targets
from holon.importers._shape import Node, iter_jsonl, parse_iso_ms
from holon.records import ContextSummary, Message, PlanStep, WorkPlan

__all__ = ["FORMAT", "parse_claude_code"]

FORMAT: Final = "claude-code"
_HINT: Final = "is this really a Claude Code transcript (--from claude-code)?"

#: TodoWrite statuses -> holon plan-step statuses. Anything else reads as pending.
_TODO_STATUS: Final[dict[str, Literal["pending", "in_progress", "done", "blocked", "skipped"]]] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "completed": "done",
    "cancelled": "skipped",
    "blocked": "blocked",
}

# Claude Code writes these as user text when the operator presses Esc mid-turn.
_INTERRUPTED: Final = "[Request interrupted by user"
_EXIT_CODE: Final = re.compile(r"\A(?:Error: )?Exit code (-?\d+)\b")


def parse_claude_code(data: bytes, *, source: str) -> ImportReport:
    """Map a Claude Code session JSONL file's bytes to holon records."""
    events: list[tuple[str, Node]] = []
    uuids: set[str] = set()
    for _, event in iter_jsonl(data, source=source, format_hint=_HINT):
        if not event.is_object() or not isinstance(event.as_object().get("type"), str):
            raise event.error("not a Claude Code event (no `type`)")
        uuid = event.as_object().get("uuid")
        if isinstance(uuid, str):
            uuids.add(uuid)
        events.append((event.field("type").as_str(), event))

    stamps = [
        None if (stamp := event.get("timestamp")) is None else parse_iso_ms(stamp) for _, event in events
    ]
    start = next((ts for ts in stamps if ts is not None), None)
    builder = TranscriptBuilder(format=FORMAT, source=source, start_ms=start)
    seen: set[str] = set()  # uuids of the messages imported so far
    for (kind, event), ts in zip(events, stamps, strict=True):
        builder.at(ts)
        if kind == "summary":
            _summary(builder, event, uuids)
        elif kind in ("user", "assistant"):
            uuid = event.as_object().get("uuid")
            if isinstance(uuid, str):
                if uuid in seen:
                    # A uuid names one message. Claude Code writes some twice (the whole history
                    # again per prompt with stream-json input; a first prompt echoed): a copy is
                    # not another turn or another tool call.
                    builder.skip("duplicate event")
                    continue
                seen.add(uuid)
            if event.as_object().get("isSidechain") is True:
                # Subagent (Task) conversations: their outcome reaches the main thread as the
                # Task tool's result, which is imported; their inner steps are not.
                builder.skip("sidechain event")
                continue
            _environment(builder, event)
            message = event.field("message")
            if kind == "user":
                _user(builder, event, message)
            else:
                _assistant(builder, message)
        elif kind == "system":
            builder.skip(f"system:{event.str_of('subtype', 'unknown')}")
        else:
            builder.skip(f"event:{kind}")
    return builder.finish()


def _summary(builder: TranscriptBuilder, event: Node, uuids: set[str]) -> None:
    leaf = event.opt_str("leafUuid")
    # Claude Code copies summaries of *other* sessions into a file on startup; only one whose
    # leaf is a message of this file describes this conversation.
    if leaf is not None and leaf not in uuids:
        builder.skip("summary of another session")
        return
    builder.emit(ContextSummary(text=event.field("summary").as_str(), source="claude-code:summary"))


def _environment(builder: TranscriptBuilder, event: Node) -> None:
    cwd = event.opt_str("cwd")
    branch = event.opt_str("gitBranch")
    if cwd is None and branch is None:
        return
    session = event.opt_str("sessionId")
    builder.environment(
        cwd=cwd, branch=branch or None, extra={"session_id": session} if session is not None else {}
    )


def _user(builder: TranscriptBuilder, event: Node, message: Node) -> None:
    content = message.field("content")
    texts: list[str] = []
    if isinstance(content.value, str):
        texts.append(content.value)
    else:
        results = [block for block in content.items() if block.field("type").value == "tool_result"]
        for block in content.items():
            block_type = block.field("type").as_str()
            if block_type == "text":
                texts.append(block.field("text").as_str())
            elif block_type != "tool_result":
                builder.skip(f"block:{block_type}")
        for block in results:
            # `toolUseResult` describes the event's single result; with several it is ambiguous.
            detail = event.get("toolUseResult") if len(results) == 1 else None
            _tool_result(builder, block, detail)
    text = "\n\n".join(t for t in texts if t)
    if not text:
        return
    obj = event.as_object()
    if obj.get("isCompactSummary") is True:
        builder.emit(ContextSummary(text=text, source="claude-code:compact"))
    elif text.startswith(_INTERRUPTED):
        builder.end_turn("interrupted")
    elif obj.get("isMeta") is True:
        # Hook feedback and command caveats: injected by Claude Code, not typed by the operator,
        # but they do start a new model turn.
        builder.start_turn(
            "meta_message", text, message=Message(role="channel", channel="claude-code:meta", text=text)
        )
    else:
        builder.user_turn(text)


def _result_text(content: Node | None) -> str:
    if content is None:
        return ""
    if isinstance(content.value, str):
        return content.value
    parts: list[str] = []
    for block in content.items():
        block_type = block.field("type").as_str()
        if block_type == "text":
            parts.append(block.field("text").as_str())
        else:
            parts.append(f"[{block_type}]")
    return "\n".join(parts)


def _tool_result(builder: TranscriptBuilder, block: Node, detail: Node | None) -> None:
    call = block.field("tool_use_id").as_str()
    output = _result_text(block.get("content"))
    is_error = block.get("is_error")
    status: ToolStatus = "error" if is_error is not None and is_error.as_bool() else "ok"
    if detail is not None and detail.is_object() and detail.as_object().get("interrupted") is True:
        status = "interrupted"
    exit_code = None
    if status == "error":
        match = _EXIT_CODE.match(output)
        exit_code = int(match.group(1)) if match else None
    pending = builder.pending(call)
    touched = edit_targets(pending.tool, pending.args) if pending is not None and status == "ok" else ()
    builder.result(call, status=status, output=output, exit_code=exit_code, touched_files=touched)


def _assistant(builder: TranscriptBuilder, message: Node) -> None:
    content = message.field("content")
    if isinstance(content.value, str):
        if content.value:
            builder.agent(Message(role="assistant", text=content.value))
        return
    for block in content.items():
        block_type = block.field("type").as_str()
        if block_type == "text":
            text = block.field("text").as_str()
            if text:
                builder.agent(Message(role="assistant", text=text))
            else:
                builder.skip("block:empty text")
        elif block_type == "tool_use":
            name = block.field("name").as_str()
            args = block.field("input").as_object()
            builder.intent(block.field("id").as_str(), name, args)
            if name == "TodoWrite":
                _plan(builder, args)
        else:
            builder.skip(f"block:{block_type}")


def _plan(builder: TranscriptBuilder, args: dict[str, object]) -> None:
    # The todo list is the agent's declared plan from the moment it writes it, so the plan
    # follows the intent rather than waiting for the (always trivial) tool result.
    todos = args.get("todos")
    if not isinstance(todos, list) or not all(
        isinstance(t, dict) and isinstance(t.get("content"), str) for t in todos
    ):
        builder.skip("TodoWrite without a readable todo list")
        return
    steps = []
    for index, todo in enumerate(todos, start=1):
        step_id = todo.get("id")
        status = todo.get("status")
        steps.append(
            PlanStep(
                id=step_id if isinstance(step_id, str) and step_id else str(index),
                text=todo["content"],
                status=_TODO_STATUS.get(status, "pending") if isinstance(status, str) else "pending",
            )
        )
    builder.emit(WorkPlan(work_item_id=None, steps=tuple(steps)))
