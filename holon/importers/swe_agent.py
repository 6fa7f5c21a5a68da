"""Import SWE-agent trajectories (``*.traj``: one JSON object per run).

The ``history`` array is the chat the model saw: a system prompt, the task as a user
message, then assistant actions and their observations. Function-calling runs join
actions to observations by ``tool_calls[].id`` / ``tool_call_ids``; older runs carry
the command in ``action`` and the observation in the next user message. ``trajectory``
holds one step per action with the shell ``state`` after it (working directory, open
file), which tells which file the windowed ``edit``/``insert`` commands wrote.
``info`` holds the run's exit status and submitted patch. See docs/importers.md.
"""

from __future__ import annotations

import posixpath
import shlex
from collections import deque
from typing import Final

import msgspec

from holon.importers._builder import ImportReport, ToolStatus, TranscriptBuilder
from holon.importers._effects import edit_refused, edit_targets
from holon.importers._shape import Node, decode_json_document
from holon.importers.openai_chat import call_key, join_key, message_text, tool_arguments
from holon.records import Brief, Message, SystemPolicy

__all__ = ["FORMAT", "parse_swe_agent"]

FORMAT: Final = "swe-agent"
_HINT: Final = "is this really a SWE-agent trajectory (--from swe-agent)?"

#: Windowed editor commands that write the currently open file (it is not an argument).
_OPEN_FILE_EDITS: Final = frozenset({"edit", "insert", "append"})
#: The label SWE-agent 1.x's default observation template (``next_step_template``) puts before the
#: tool's output in the history.
_OBSERVATION_LABEL: Final = "OBSERVATION:\n"
#: Longer than any step, and its milliseconds still an exact integer of a float.
_MAX_SECONDS: Final = 2**53 / 1000


class _State:
    """What SWE-agent recorded of one step: the shell state after it, its duration, its raw output."""

    __slots__ = ("cwd", "observation", "open_file", "seconds")

    def __init__(
        self, cwd: str | None, open_file: str | None, seconds: float | None, observation: str | None = None
    ) -> None:
        self.cwd = cwd
        self.open_file = open_file
        self.seconds = seconds
        # The tool's output as it printed it; the history holds it inside SWE-agent's
        # observation template ("OBSERVATION:\n..." in 1.x's default configuration).
        self.observation = observation


def _state_object(step: Node) -> dict[str, object]:
    state = step.as_object().get("state")
    if isinstance(state, str):
        # Older SWE-agent versions stored the state as a JSON string.
        try:
            state = msgspec.json.decode(state)
        except (msgspec.DecodeError, RecursionError):
            return {}
    return state if isinstance(state, dict) else {}


def _seconds(value: object) -> float | None:
    """An ``execution_time`` as seconds, or None when it is no duration a step could take.

    Python's json.dump writes a NaN or infinite float as a bare word the importer reads,
    and neither (nor a negative or absurdly large number) is a duration in milliseconds.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    return seconds if 0 <= seconds < _MAX_SECONDS else None


def _steps(root: Node) -> list[_State]:
    steps = []
    trajectory = root.get("trajectory")
    for step in trajectory.items() if trajectory is not None else ():
        state = _state_object(step)
        cwd = state.get("working_dir")
        open_file = state.get("open_file")
        seconds = step.as_object().get("execution_time")
        observation = step.as_object().get("observation")
        steps.append(
            _State(
                cwd=cwd if isinstance(cwd, str) and cwd else None,
                # SWE-agent writes "n/a" when no file is open.
                open_file=open_file if isinstance(open_file, str) and open_file not in ("", "n/a") else None,
                seconds=_seconds(seconds),
                observation=observation if isinstance(observation, str) else None,
            )
        )
    return steps


def _instance_id(root: Node) -> str | None:
    """The id of the task the run worked on: ``replay_config.problem_statement.id`` (SWE-agent 1.x).

    SWE-agent saves its run configuration as ``replay_config``, a JSON string (an object in some
    copies); its problem statement's ``id`` is the instance (``marshmallow-code__marshmallow-1867``).
    Older runs keep no such id: the run is then named by its place.
    """
    config = root.as_object().get("replay_config")
    if isinstance(config, str):
        try:
            config = msgspec.json.decode(config)
        except (msgspec.DecodeError, RecursionError):
            return None
    statement = config.get("problem_statement") if isinstance(config, dict) else None
    instance = statement.get("id") if isinstance(statement, dict) else None
    return instance if isinstance(instance, str) and instance.strip() else None


def parse_swe_agent(data: bytes, *, source: str) -> ImportReport:
    """Map a SWE-agent ``.traj`` file's bytes to holon records."""
    root = decode_json_document(data, source=source, format_hint=_HINT)
    if root.is_object() and not root.has("history") and root.has("trajectory"):
        return _from_trajectory(root, source)
    if not root.is_object() or not root.has("history"):
        raise root.error("not a SWE-agent trajectory (no `history` or `trajectory`)")
    history = list(root.field("history").items())
    steps = _steps(root)
    # Demonstrations put in the history message by message (`put_demos_in_history`) hold the
    # demo run's actions, which have no step in this run's `trajectory`.
    actions = sum(1 for entry in history if _is_action(entry) and not _is_demo(entry))
    # States line up with actions only when the run recorded one step per action.
    aligned = steps if len(steps) == actions else []

    builder = TranscriptBuilder(format=FORMAT, source=source)
    builder.session(_instance_id(root), cwd=aligned[0].cwd if aligned else None)
    calls = _Calls(builder, aligned)
    for entry in history:
        if _is_demo(entry):
            # Demonstrations are few-shot examples pasted into the prompt, not this run's work.
            builder.skip("demonstration message")
            continue
        role = entry.field("role").as_str()
        text = message_text(entry.get("content"), builder)
        if role == "system":
            builder.emit(SystemPolicy(text=text))
        elif role == "assistant":
            if text:
                builder.agent(Message(role="assistant", text=text))
            if _is_action(entry):
                calls.action(entry)
        elif role == "tool" or (role == "user" and calls.waiting_action is not None):
            calls.observation(entry, role, text)
        elif role == "user":
            builder.user_turn(text)
        else:
            builder.skip(f"role:{role}")
    calls.last_observation()
    _outcome(builder, root.get("info"))
    return builder.finish()


class _Calls:
    """The calls of the history's actions, joined to their observations as the history goes."""

    def __init__(self, builder: TranscriptBuilder, aligned: list[_State]) -> None:
        self.builder = builder
        #: One state per action, or none when the run's steps do not line up with its actions.
        self.aligned = aligned
        # source id -> (files it writes if it succeeds, whether it is an edit), per call, oldest first
        self.effects: dict[str, deque[tuple[tuple[str, ...], bool]]] = {}
        self.durations: dict[str, deque[int | None]] = {}
        self.waiting_action: str | None = None  # call id of an old-style action awaiting its observation
        self.unanswered: list[str] = []  # the source ids of the last action's calls with no observation yet
        self.action_index = -1

    def action(self, entry: Node) -> None:
        """An assistant message that acts: one intent per call, with what it writes."""
        self.action_index += 1
        state = self.aligned[self.action_index] if self.aligned else None
        self.unanswered = []
        for source_id, call_id, tool, args in _calls(entry, self.action_index):
            self.builder.intent(source_id, tool, args, call_id=call_id)
            # An old-style action is a command line: what it writes is read from the line.
            effect = (
                _call_effect(tool, args, state)
                if _has_tool_calls(entry)
                else _command_effect(str(args["command"]), state)
            )
            self.effects.setdefault(source_id, deque()).append(effect)
            duration = round(state.seconds * 1000) if state and state.seconds is not None else None
            self.durations.setdefault(source_id, deque()).append(duration)
            self.unanswered.append(source_id)
            if not _has_tool_calls(entry):
                self.waiting_action = source_id

    def observation(self, entry: Node, role: str, text: str) -> None:
        """A tool message, or the user message after an old-style action: the calls' results."""
        builder = self.builder
        ids = (
            [join_key(node.as_str()) for node in entry.field("tool_call_ids").items()]
            if role == "tool"
            else []
        )
        if not ids and self.waiting_action is not None:
            # The observation of an action without tool calls, even when logged as a tool.
            ids = [self.waiting_action]
        elif not ids:
            builder.skip("orphan tool result")
        self.waiting_action = None
        aligned, index = self.aligned, self.action_index
        state = aligned[index] if aligned and 0 <= index < len(aligned) else None
        for source_id in ids:
            if source_id in self.unanswered:
                self.unanswered.remove(source_id)
            _observe(builder, source_id, text, state, effects=self.effects, durations=self.durations)
        if state is not None and state.cwd is not None:
            builder.environment(cwd=state.cwd)

    def last_observation(self) -> None:
        """The last action's observation, when only its trajectory step holds it."""
        if (
            len(self.unanswered) == 1
            and self.aligned
            and self.aligned[self.action_index].observation is not None
        ):
            # SWE-agent before 1.0 added an observation to the history only when it next asked the
            # model, so the last action's (the `submit`, whose observation is the patch) is only in
            # its trajectory step. It is that call's result, not an unknown outcome.
            state = self.aligned[self.action_index]
            _observe(
                self.builder,
                self.unanswered[0],
                str(state.observation),
                state,
                effects=self.effects,
                durations=self.durations,
            )


def _observe(
    builder: TranscriptBuilder,
    source_id: str,
    text: str,
    state: _State | None,
    *,
    effects: dict[str, deque[tuple[tuple[str, ...], bool]]],
    durations: dict[str, deque[int | None]],
) -> None:
    """Record an observation as the result of the call ``source_id``."""
    files, edit = effects[source_id].popleft() if effects.get(source_id) else ((), False)
    duration = durations[source_id].popleft() if durations.get(source_id) else None
    # SWE-agent records no exit status for an observation: a result reads ok unless it is an
    # edit the editor refused (judged on the tool's own output where the step kept it, as the
    # history wraps it in SWE-agent's observation template).
    if state is not None and state.observation is not None:
        raw = state.observation
    else:
        raw = text.removeprefix(_OBSERVATION_LABEL)
    status: ToolStatus = "error" if edit and edit_refused(raw) else "ok"
    builder.result(
        source_id, status=status, output=text, touched_files=files, duration_ms=duration, edit=edit
    )


def _step_text(step: Node, key: str, index: int) -> str:
    node = step.get(key)
    if node is None:
        raise step.error(
            f"trajectory step {index} has no `{key}`: a .traj without `history` is imported from its "
            "steps, and each needs `action` (the command it ran) and `observation` (what it printed); "
            "import the run's full .traj, with `history`",
            key=key,
        )
    return node.as_str()


def _from_trajectory(root: Node, source: str) -> ImportReport:
    """A run saved with ``trajectory`` only (no ``history``): one call per step.

    Each step holds the model's ``thought`` (or ``response``), the ``action`` it ran in
    SWE-agent's bash session and the ``observation`` it got. Without the chat there is no
    system prompt or issue text, so the steps form a ``continuation`` turn.
    """
    trajectory = root.field("trajectory")
    if not trajectory.as_list():
        raise root.error(
            "not a SWE-agent trajectory (no `history`): its `trajectory` has no steps either, so "
            "there is nothing to import"
        )
    builder = TranscriptBuilder(format=FORMAT, source=source)
    steps = _steps(root)
    builder.session(_instance_id(root), cwd=steps[0].cwd if steps else None)
    for index, (step, state) in enumerate(zip(trajectory.items(), steps, strict=True)):
        action = _step_text(step, "action", index).strip()
        observation = _step_text(step, "observation", index)
        thought = step.opt_str("thought")
        thought = step.str_of("response") if thought is None else thought
        if thought:
            builder.agent(Message(role="assistant", text=thought))
        if not action:
            # A step whose output SWE-agent could not parse as a command (a format error): nothing
            # ran, and the observation is SWE-agent's complaint, which the model saw.
            builder.skip("step without an action")
            if observation:
                builder.agent(Message(role="channel", channel="swe-agent:error", text=observation))
            continue
        call_id = f"action-{index}"
        args: dict[str, object] = {"command": action}
        builder.intent(call_id, "bash", args)
        duration = round(state.seconds * 1000) if state.seconds is not None else None
        touched, edit = _command_effect(action, state)
        status: ToolStatus = "error" if edit and edit_refused(observation) else "ok"
        builder.result(
            call_id, status=status, output=observation, touched_files=touched, duration_ms=duration, edit=edit
        )
        if state.cwd is not None:
            builder.environment(cwd=state.cwd)
    _outcome(builder, root.get("info"))
    return builder.finish()


def _has_tool_calls(entry: Node) -> bool:
    # An empty `tool_calls` list is no tool call: the `action` text is then the call.
    return bool(entry.as_object().get("tool_calls"))


def _is_demo(entry: Node) -> bool:
    return entry.as_object().get("is_demo") is True


def _is_action(entry: Node) -> bool:
    obj = entry.as_object()
    if obj.get("role") != "assistant":
        return False
    return _has_tool_calls(entry) or bool(obj.get("action"))


def _calls(entry: Node, action_index: int) -> list[tuple[str, str, str, dict[str, object]]]:
    """Each call of an action: (the key its observation names, its holon call id, tool, arguments)."""
    calls = entry.get("tool_calls")
    if calls is not None and _has_tool_calls(entry):
        out: list[tuple[str, str, str, dict[str, object]]] = []
        for position, call in enumerate(calls.items()):
            function = call.field("function")
            key = call_key(call, "id")
            out.append(
                (
                    key,
                    key or f"action-{action_index}.{position}",
                    function.tool_name("name", what="a tool call's `function`"),
                    tool_arguments(function.get("arguments")),
                )
            )
        return out
    # Old-style runs: the action is a line typed into SWE-agent's bash session (its editor
    # commands are shell functions there), so it is a bash call named by its position.
    call_id = f"action-{action_index}"
    return [(call_id, call_id, "bash", {"command": entry.field("action").as_str().strip()})]


def _call_effect(tool: str, args: dict[str, object], state: _State | None) -> tuple[tuple[str, ...], bool]:
    """The files a call writes if it succeeds, and whether it is an edit (even of no known file)."""
    cwd = state.cwd if state else None
    if tool in _OPEN_FILE_EDITS and "path" not in args:
        return ((state.open_file,) if state and state.open_file else ()), True
    if tool == "create":
        name = args.get("filename")
        if isinstance(name, str) and name:
            return (posixpath.normpath(posixpath.join(cwd, name)) if cwd else name,), True
        return (), True
    files = edit_targets(tool, dict(args), cwd=cwd)
    return files, bool(files)


def _command_effect(command: str, state: _State | None) -> tuple[tuple[str, ...], bool]:
    """What an old-style action line writes (``edit 3:5``, ``create f.py``, ``str_replace_editor ...``).

    SWE-agent's editor commands are functions in its bash session: the line names them first,
    then their arguments (an ``edit``'s replacement text follows on the next lines).
    """
    first_line = command.split("\n", 1)[0]
    try:
        words = shlex.split(first_line)
    except ValueError:
        words = first_line.split()
    if not words:
        return (), False
    name, rest = words[0], words[1:]
    if name in _OPEN_FILE_EDITS:
        return _call_effect(name, {}, state)
    if name == "create":
        return _call_effect(name, {"filename": rest[0]} if rest else {}, state)
    if name == "str_replace_editor" and len(rest) >= 2:  # a sub-command and a path
        return _call_effect(name, {"command": rest[0], "path": rest[1]}, state)
    return (), False


def _outcome(builder: TranscriptBuilder, info: Node | None) -> None:
    if info is None or not info.is_object():
        return
    status = info.opt_str("exit_status")
    submission = info.opt_str("submission")
    if submission:
        builder.agent(Brief(status="result", text=submission))
    elif status is not None:
        builder.agent(Brief(status="failure", text=f"SWE-agent exit status: {status}"))
    # "submitted (exit_cost)" is an automatic submission: the run still delivered a patch.
    if status is not None and not status.startswith("submitted"):
        builder.end_turn("failed", error=f"exit status: {status}")
