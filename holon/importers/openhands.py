"""Import OpenHands event streams.

Accepted files: evaluation output JSONL (one run per line, its events under
``history``), a JSON object with ``history``, or a JSON array of events; ``history`` may
also hold ``[action, observation]`` pairs (OpenDevin-era outputs). Each event
is an *action* (``action``: ``message``, ``run``, ``read``, ``edit``, ``think``,
``finish``, ``system``, ...) or an *observation* (``observation``), and an
observation names the action it answers by ``cause`` (the action's ``id``). OpenHands V1
(software-agent-sdk) events are typed by ``kind`` instead (``MessageEvent``, ``ActionEvent``,
``ObservationEvent``, ...) and joined by ``tool_call_id``; they may stand wherever V0 events do.
See docs/importers.md for the full mapping.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from typing import Any, Final, Literal

from holon.importers._builder import ImportReport, ToolStatus, TranscriptBuilder
from holon.importers._effects import EDIT_COMMANDS, edit_targets
from holon.importers._shape import Node, decode_json_document, iter_jsonl, parse_iso_ms, try_json_document
from holon.importers.openai_chat import tool_definitions
from holon.records import Brief, ContextSummary, Message, SystemPolicy

__all__ = ["FORMAT", "parse_openhands"]

FORMAT: Final = "openhands"
_HINT: Final = "is this really an OpenHands event stream (--from openhands)?"

#: Actions that are conversation, not tool calls, even when a tool call produced them.
_NOT_TOOLS: Final = frozenset({"message", "system", "finish", "recall"})
#: Action names that are tool calls in runs old enough to lack ``tool_call_metadata``.
_TOOL_ACTIONS: Final = frozenset(
    {"run", "run_ipython", "read", "write", "edit", "browse", "browse_interactive", "delegate", "think"}
)
#: Actions that write the file at their ``path``: ``edit`` (the str_replace_editor's writing commands,
#: as its ``view`` is a ``read``; an LLM-based edit) and ``write`` (``FileWriteAction``, CodeAct's
#: before function calling).
_WRITING_ACTIONS: Final = frozenset({"edit", "write"})
#: Observations that say their action failed or never ran (``ObservationType.ERROR``, ``USER_REJECTED``).
_FAILED_OBSERVATIONS: Final = frozenset({"error", "user_rejected"})
# OpenHands reports a failed file operation as an observation whose text starts so.
_ERROR_PREFIX: Final = "ERROR:"

#: The task tracker's statuses (``TaskItem.status``, the same in V0's ``task_tracking`` action and
#: V1's ``task_tracker`` tool) -> holon plan-step statuses. Anything else reads as pending.
_TASK_STATUS: Final[dict[str, Literal["pending", "in_progress", "done"]]] = {
    "todo": "pending",
    "in_progress": "in_progress",
    "done": "done",
}
#: The task tracker's tool name (V1, and V0 runs with function calling) and V0 action name.
_TASK_TRACKER: Final = frozenset({"task_tracker", "task_tracking"})


def parse_openhands(data: bytes, *, source: str) -> ImportReport:
    """Map an OpenHands event stream file's bytes to holon records."""
    runs = _runs(data, source)
    # Runs are decoded one at a time and dropped once mapped (an evaluation output holds hundreds,
    # each a whole run); only those up to the first with a timestamp are read ahead for the clock.
    ahead: deque[Node] = deque()
    start = None
    for run in runs:
        ahead.append(run)
        start = _first_timestamp([run])
        if start is not None:
            break
    builder = TranscriptBuilder(format=FORMAT, source=source, start_ms=start)
    while ahead:
        _run(builder, ahead.popleft())
    for run in runs:
        _run(builder, run)
    return builder.finish()


def _events(run: Node) -> Node:
    return run.field("history") if run.is_object() else run


def _flat_events(run: Node) -> Iterator[tuple[Node, str | None]]:
    """Each event of a run, with the key joining it to its pair when the run stores pairs.

    OpenDevin and early OpenHands evaluation outputs store ``history`` as ``[action,
    observation]`` pairs whose events carry no ``id`` or ``cause``: the pair itself says which
    action an observation answers, so both get the pair's key (``pair-<index>``).
    """
    for index, entry in enumerate(_events(run).items()):
        if isinstance(entry.value, list):
            if len(entry.value) != 2:
                raise entry.error("not an OpenHands event pair (expected [action, observation])")
            for event in entry.items():
                yield event, f"pair-{index}"
        else:
            yield entry, None


def _first_timestamp(runs: list[Node]) -> int | None:
    for run in runs:
        for event, _ in _flat_events(run):
            stamp = event.get("timestamp") if event.is_object() else None
            if stamp is not None:
                return parse_iso_ms(stamp)
    return None


def _runs(data: bytes, source: str) -> Iterator[Node]:
    """Each run in the file: a node holding `history`, or the event array itself."""
    document = try_json_document(data, source=source, format_hint=_HINT)
    one_line = _lines(data) == 1
    if document is not None and (isinstance(document.value, list) or not one_line):
        # A bare event array, or a pretty-printed run; a one-line run is JSONL, and its
        # errors should name line 1.
        yield document if isinstance(document.value, list) else _with_history(document)
        return
    if document is None and _one_document(data):
        # Not JSON Lines read line by line: its first line would be reported as "line 1: not a
        # JSON value" and --from questioned, when a pretty-printed file was merely cut off
        # (copied while OpenHands was still writing it) or is broken somewhere else.
        decode_json_document(data, source=source, format_hint=_HINT)
    for _, node in iter_jsonl(data, source=source, format_hint=_HINT):
        yield _with_history(node)


def _lines(data: bytes) -> int:
    """How many non-blank lines ``data`` has, counting no further than 2 (without copying them)."""
    count = 0
    start = 0
    while start <= len(data) and count < 2:
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        count += bool(data[start:end].strip())
        start = end + 1
    return count


def _one_document(data: bytes) -> bool:
    """Whether ``data`` is meant as one JSON document: an event array, or pretty-printed.

    Evaluation output JSONL holds one run object per line. A file starting with ``[`` is an event
    array, and one whose first line is a lone ``{`` (as ``json.dump(..., indent=2)`` writes it)
    cannot be JSON Lines.
    """
    text = data.removeprefix(b"\xef\xbb\xbf").lstrip()
    return text.startswith(b"[") or text.split(b"\n", 1)[0].strip() == b"{"


def _with_history(node: Node) -> Node:
    if not node.is_object() or not node.has("history"):
        raise node.error("not an OpenHands run (no `history` array of events)")
    return node


def _run_id(run: Node) -> str | None:
    """A run's own name: an evaluation output's ``instance_id`` (the benchmark task), else None."""
    instance = run.as_object().get("instance_id") if run.is_object() else None
    if isinstance(instance, bool) or not isinstance(instance, int | str) or not str(instance).strip():
        return None
    return str(instance)


def _run(builder: TranscriptBuilder, run: Node) -> None:
    # Each run is its own conversation, in its own sandbox: its working directory is not the last run's.
    builder.session(_run_id(run))
    edits: dict[str, str] = {}  # source id of a pending `edit` action -> the path it writes
    for event, pair in _flat_events(run):
        if not event.is_object():
            raise event.error("not an OpenHands event (expected an object)")
        stamp = event.get("timestamp")
        builder.at(None if stamp is None else parse_iso_ms(stamp))
        if isinstance(event.as_object().get("kind"), str):
            # An OpenHands V1 (software-agent-sdk) event: typed by `kind`, its `action` and
            # `observation` are objects, not names.
            _v1_event(builder, event)
        elif event.has("action"):
            _action(builder, event, edits, pair)
        elif event.has("observation"):
            _observation(builder, event, edits, pair)
        else:
            raise event.error("not an OpenHands event (no `action` or `observation`)")
    error = run.opt_str("error") if run.is_object() else None
    if error:
        builder.end_run("failed", error=error)
    else:
        builder.end_run()


def _args(event: Node) -> Node:
    args = event.get("args")
    return args if args is not None else event.child("args", {})


def _action(builder: TranscriptBuilder, event: Node, edits: dict[str, str], pair: str | None) -> None:
    name = event.field("action").as_str()
    if not name.strip():
        raise event.error(
            "an OpenHands action with no name: every action says what it does (`message`, `run`, `edit`, "
            "...), and a tool call's name is its tool; fix or remove the event",
            key="action",
            hint=False,
        )
    args = _args(event)
    source_kind = event.str_of("source")
    message = event.str_of("message")
    if name == "system":
        builder.emit(
            SystemPolicy(text=args.str_of("content", message), tools=tool_definitions(args.get("tools")))
        )
    elif name == "message":
        images = args.as_object().get("image_urls")
        if isinstance(images, list) and images:
            # Images are not imported (in any format); the report says how many were left out.
            builder.skip("image", len(images))
        text = args.str_of("content", message)
        if source_kind == "user":
            builder.user_turn(text)
        elif source_kind == "agent":
            builder.agent(Message(role="assistant", text=text))
        else:
            builder.agent(Message(role="channel", channel=f"openhands:{source_kind or 'unknown'}", text=text))
    elif name == "finish":
        thought = args.str_of("thought")
        if thought:
            builder.agent(Message(role="assistant", text=thought))
        builder.agent(Brief(status=_finish_status(args), text=args.str_of("final_thought", message)))
    elif name == "condensation" and isinstance(summary := args.as_object().get("summary"), str) and summary:
        # OpenHands' condenser forgot earlier events and put this summary in their place (its
        # compaction): what the agent knew of them from here on, as Claude Code's compact summary.
        builder.emit(ContextSummary(text=summary, source="openhands:condensation"))
    elif name in _NOT_TOOLS or not (event.has("tool_call_metadata") or name in _TOOL_ACTIONS):
        builder.skip(f"action:{name}")
    else:
        _tool_call(builder, event, name, args, edits, pair=pair)


def _finish_status(args: Node) -> Literal["result", "failure"]:
    completed = args.as_object().get("task_completed")
    return "failure" if completed in (False, "false") else "result"


def _tool_call(
    builder: TranscriptBuilder, event: Node, name: str, args: Node, edits: dict[str, str], *, pair: str | None
) -> None:
    event_id = str(event.field("id").as_int()) if pair is None or event.has("id") else None
    source_id = pair if pair is not None else str(event_id)
    metadata = event.get("tool_call_metadata")
    tool = name
    call_id = event_id
    written = None
    if metadata is not None:
        # A blank function name or call id is as good as none: the action's own name and id (which
        # its observation's `cause` names, so the join never depends on them) stand in.
        tool = _non_blank(metadata.str_of("function_name")) or name
        model_call_id = _non_blank(metadata.str_of("tool_call_id"))
        call_id = model_call_id or call_id
        written = _model_arguments(metadata, model_call_id)
    values: dict[str, Any] = dict(args.as_object())
    thought = values.pop("thought", None)
    if name == "think":
        # The thought *is* the think tool's argument; it is not also a separate message.
        values["thought"] = thought
    elif isinstance(thought, str) and thought:
        builder.agent(Message(role="assistant", text=thought))
    builder.intent(source_id, tool, written if written is not None else values, call_id=call_id)
    if tool in _TASK_TRACKER or name in _TASK_TRACKER:
        _task_plan(builder, values)
    path = values.get("path")
    if name in _WRITING_ACTIONS and isinstance(path, str) and path:
        edits[source_id] = path


def _task_plan(builder: TranscriptBuilder, args: dict[str, Any]) -> None:
    """The task tracker's ``plan`` command as the agent's plan (a ``WorkPlan``), as Claude Code's TodoWrite.

    ``plan`` replaces the whole task list (``TaskTrackerExecutor``: ``self._task_list =
    action.task_list``), as a WorkPlan replaces the plan; ``view`` changes nothing. The plan
    follows the intent, not its (always trivial) result. OpenHands/software-agent-sdk
    ``openhands-tools/openhands/tools/task_tracker/definition.py`` (``TaskItem``: ``id``,
    ``title``, ``notes``, ``status`` todo / in_progress / done).
    """
    if args.get("command", "view") != "plan":
        return
    builder.declare_plan(
        args.get("task_list"),
        text_key="title",
        statuses=_TASK_STATUS,
        unreadable="task_tracker plan without a readable task list",
    )


def _model_arguments(metadata: Node, call_id: str | None) -> dict[str, Any] | None:
    """The call's arguments as the model wrote them, from the model response OpenHands kept; else None.

    An action's ``args`` are OpenHands' action object, not the call: a ``run`` adds ``blocking``,
    ``is_static``, ``cwd``, ``hidden`` and ``confirmation_state`` the model never wrote, and a
    ``read`` by ``str_replace_editor`` loses the ``command`` (``view``) it was called with. The
    model's words are in ``tool_call_metadata.model_response.choices[].message.tool_calls[]``
    (the one with the call's id), as the other formats record a call.
    """
    if call_id is None:
        return None
    response = metadata.as_object().get("model_response")
    choices = response.get("choices") if isinstance(response, dict) else None
    for choice in choices if isinstance(choices, list) else ():
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, dict) or call.get("id") != call_id:
                continue
            function = call.get("function")
            if not isinstance(function, dict):
                continue
            arguments = function.get("arguments")
            try:
                decoded = json.loads(arguments) if isinstance(arguments, str) else None
            except ValueError:
                decoded = None
            # Arguments that are no JSON object leave the action's own, as a response without the call does.
            return decoded if isinstance(decoded, dict) else None
    return None


def _non_blank(text: str) -> str | None:
    return text if text.strip() else None


def _observation(builder: TranscriptBuilder, event: Node, edits: dict[str, str], pair: str | None) -> None:
    name = event.field("observation").as_str()
    content = event.str_of("content", event.str_of("message"))
    cause = event.get("cause")
    source_id = pair if pair is not None else str(cause.as_int()) if cause is not None else None
    if source_id is None or builder.pending(source_id) is None:
        if name == "error":
            # An error with no action behind it: the call was rejected before it ran (bad
            # arguments). The agent saw it, so it stays in the conversation.
            builder.agent(Message(role="channel", channel="openhands:error", text=content))
        else:
            builder.skip(f"observation:{name}")
        return
    extras = event.get("extras")
    metadata = extras.get("metadata") if extras is not None and extras.is_object() else None
    # Current runs keep the exit code under `extras.metadata`; runs before that (OpenDevin,
    # early OpenHands) kept it on `extras` itself.
    holder = metadata if metadata is not None and metadata.is_object() else extras
    code = holder.get("exit_code") if holder is not None and holder.is_object() else None
    exit_code = code.as_int() if code is not None else None
    flagged = extras.as_object().get("error") if extras is not None and extras.is_object() else None
    status = _status(name, exit_code, event.as_object().get("success"), content, flagged=flagged is True)
    path = edits.pop(source_id, None)
    builder.result(
        source_id,
        status=status,
        output=content,
        exit_code=exit_code,
        touched_files=(path,) if path is not None else (),
        edit=path is not None,
    )
    cwd = metadata.opt_str("working_dir") if metadata is not None and metadata.is_object() else None
    if cwd:
        builder.environment(cwd=cwd)


def _status(name: str, exit_code: int | None, success: object, content: str, *, flagged: bool) -> ToolStatus:
    """A V0 observation's status, from what OpenHands says of it.

    ``error`` (ErrorObservation) and ``user_rejected`` (UserRejectObservation: the user, or the
    confirmation mode, refused the action, which never ran) are errors; so is an observation whose
    ``extras.error`` is true (BrowserOutputObservation: the page could not be loaded or the browser
    action failed).
    """
    if name in _FAILED_OBSERVATIONS or flagged:
        return "error"
    if exit_code is not None:
        # -1: OpenHands stopped waiting (timeout, or the command is still running).
        return "ok" if exit_code == 0 else "interrupted" if exit_code == -1 else "error"
    if isinstance(success, bool):
        return "ok" if success else "error"
    return "error" if content.startswith(_ERROR_PREFIX) else "ok"


# ------------------------------------------------------------------ OpenHands V1 (software-agent-sdk)

#: V1 events that answer a tool call, by `tool_call_id`.
_V1_ANSWERS: Final = frozenset({"ObservationEvent", "UserRejectObservation", "AgentErrorEvent"})


def _v1_text(content: Node | None, builder: TranscriptBuilder) -> str:
    """The text of V1 content: a string, one ``TextContent``, or a list of text and image parts."""
    if content is None:
        return ""
    if isinstance(content.value, str):
        return content.value
    parts = list(content.items()) if isinstance(content.value, list) else [content]
    texts: list[str] = []
    for part in parts:
        part_type = part.str_of("type", "text")
        if part_type == "text":
            texts.append(part.field("text").as_str())
        elif part_type == "image":
            urls = part.as_object().get("image_urls")
            builder.skip("image", len(urls) if isinstance(urls, list) and urls else 1)
        else:
            builder.skip(f"content part:{part_type}")
    return "\n".join(texts)


def _v1_event(builder: TranscriptBuilder, event: Node) -> None:
    kind = event.field("kind").as_str()
    if kind == "SystemPromptEvent":
        text = _v1_text(event.field("system_prompt"), builder)
        dynamic = _v1_text(event.get("dynamic_context"), builder)
        text = f"{text}\n\n{dynamic}" if dynamic else text
        builder.emit(SystemPolicy(text=text, tools=tool_definitions(event.get("tools"))))
    elif kind == "MessageEvent":
        _v1_message(builder, event)
    elif kind == "ActionEvent":
        _v1_action(builder, event)
    elif kind in _V1_ANSWERS:
        _v1_answer(builder, event, kind)
    elif kind in ("CondensationSummaryEvent", "Condensation") and event.opt_str("summary"):
        # The condenser's summary of the events it forgot: what the agent knew of them from here on.
        builder.emit(ContextSummary(text=event.field("summary").as_str(), source="openhands:condensation"))
    else:
        # State updates, pauses, condensation requests, streaming tokens: no conversation in them.
        builder.skip(f"event:{kind}")


def _v1_message(builder: TranscriptBuilder, event: Node) -> None:
    text = _v1_text(event.field("llm_message").get("content"), builder)
    source = event.field("source").as_str()
    if source == "user":
        builder.user_turn(text)
    elif source == "agent":
        if text:
            builder.agent(Message(role="assistant", text=text))
    else:
        builder.agent(Message(role="channel", channel=f"openhands:{source}", text=text))


def _v1_action(builder: TranscriptBuilder, event: Node) -> None:
    thought = _v1_text(event.get("thought"), builder)
    if thought:
        builder.agent(Message(role="assistant", text=thought))
    call_id = event.required_id(
        "tool_call_id",
        what="an OpenHands ActionEvent",
        why="its observation names the call it answers by this id alone",
    )
    tool = event.tool_name("tool_name", what="an OpenHands ActionEvent")
    arguments = _v1_arguments(event)
    builder.intent(call_id, tool, arguments)
    if tool in _TASK_TRACKER:
        _task_plan(builder, arguments)


def _v1_arguments(event: Node) -> dict[str, Any]:
    """The call's arguments as the model wrote them (`tool_call.arguments`), else the parsed `action`."""
    call = event.get("tool_call")
    arguments = call.as_object().get("arguments") if call is not None else None
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except ValueError:
            return {"arguments": arguments}
        return decoded if isinstance(decoded, dict) else {"arguments": decoded}
    action = event.get("action")
    if action is not None and action.is_object():
        return {key: value for key, value in action.as_object().items() if key != "kind"}
    return {}


def _v1_answer(builder: TranscriptBuilder, event: Node, kind: str) -> None:
    call_id = event.field("tool_call_id").as_str()
    if kind == "ObservationEvent":
        _v1_observation(builder, call_id, event.field("observation"))
        return
    if kind == "UserRejectObservation":
        # What the model was told (OpenHands' own wording), as for any result.
        output = f"Action rejected: {event.str_of('rejection_reason', 'User rejected the action')}"
    else:
        output = event.field("error").as_str()
    if builder.pending(call_id) is None and kind == "AgentErrorEvent":
        # An error no call waits for (the scaffold refused a call it could not parse): the agent saw it.
        builder.agent(Message(role="channel", channel="openhands:error", text=output))
        return
    builder.result(call_id, status="error", output=output)


def _v1_observation(builder: TranscriptBuilder, call_id: str, observation: Node) -> None:
    """An ``ObservationEvent``'s observation as the call's result: text, status, exit code, files, cwd.

    Shapes from OpenHands/software-agent-sdk ``openhands-tools/openhands/tools/``: every
    observation has ``content`` and ``is_error`` (``openhands-sdk/openhands/sdk/tool/schema.py``);
    a shell's (``TerminalObservation``, ``terminal/definition.py``; ``ExecuteBashObservation``,
    ``execute_bash/definition.py`` before it) adds ``exit_code`` (``-1``: the command hit the soft
    timeout and is still running), ``timeout`` and ``metadata`` (``metadata.py``:
    ``exit_code``, ``working_dir``); the file editor's (``FileEditorObservation``,
    ``file_editor/definition.py``) adds the ``command`` it ran and the ``path`` it ran on.
    """
    output = _v1_text(observation.get("content"), builder)
    flag = observation.get("is_error")
    is_error = flag is not None and flag.as_bool()
    fields = observation.as_object()
    metadata = observation.get("metadata")
    meta = metadata.as_object() if metadata is not None and metadata.is_object() else {}
    # The observation's own exit code; the PS1 metadata's only when it states none (the metadata
    # says -1 by default, when no prompt was parsed, so it is not read over a stated code).
    code = fields.get("exit_code") if "exit_code" in fields else meta.get("exit_code")
    exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    status: ToolStatus
    if is_error:
        status = "error"
    elif exit_code == -1 or fields.get("timeout") is True:
        # As for V0 runs: OpenHands stopped waiting, the command may still be running.
        status = "interrupted"
    elif exit_code not in (None, 0):
        status = "error"
    else:
        status = "ok"
    pending = builder.pending(call_id)
    touched: tuple[str, ...] = ()
    if status == "ok" and pending is not None:
        command, path = fields.get("command"), fields.get("path")
        if isinstance(path, str) and path and isinstance(command, str) and command in EDIT_COMMANDS:
            # The editor's own account of what it wrote (its `view` writes nothing).
            touched = (path,)
        elif "path" not in fields:
            touched = edit_targets(pending.tool, pending.args)
    builder.result(
        call_id, status=status, output=output, exit_code=exit_code, touched_files=touched, edit=bool(touched)
    )
    cwd = meta.get("working_dir")
    if isinstance(cwd, str) and cwd:
        builder.environment(cwd=cwd)
