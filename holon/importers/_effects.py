"""What a tool call did to the workspace, read from its name and arguments.

Shared by the importers so that "touched files" means the same thing for every
format. Arguments are model-written, so nothing here raises: a call whose arguments
do not name a file simply touched no file that holon can tell.
"""

from __future__ import annotations

import posixpath
from typing import Any, Final

__all__ = ["EDIT_COMMANDS", "edit_refused", "edit_targets"]

#: Tools whose ``file_path`` (or ``notebook_path``) argument is a file they write.
_PATH_ARG_TOOLS: Final = {
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "Write": "file_path",
    "NotebookEdit": "notebook_path",
}

#: ``str_replace_editor`` sub-commands that change the file (``view`` does not).
EDIT_COMMANDS: Final = frozenset({"create", "str_replace", "insert", "undo_edit", "edit", "write"})

#: Editor tools that take a ``path`` and a ``command`` (SWE-agent, OpenHands ACI, OpenHands V1 tools).
_EDITOR_TOOLS: Final = frozenset(
    {"str_replace_editor", "edit_file", "edit", "file_editor", "planning_file_editor"}
)


def _resolve(path: str, cwd: str | None) -> str:
    # Relative paths are resolved against the recorded working directory so the same file
    # is named the same way whether the agent wrote `reproduce.py` or `/testbed/reproduce.py`.
    if cwd and not posixpath.isabs(path):
        return posixpath.normpath(posixpath.join(cwd, path))
    return path


def edit_targets(tool: str, args: dict[str, Any], *, cwd: str | None = None) -> tuple[str, ...]:
    """The files an editing tool call writes, or () when it is not an edit."""
    key = _PATH_ARG_TOOLS.get(tool)
    if key is not None:
        path = args.get(key)
        return (_resolve(path, cwd),) if isinstance(path, str) and path else ()
    if tool in _EDITOR_TOOLS:
        command = args.get("command")
        path = args.get("path")
        # OpenHands' `edit` action and LLM-based editors carry no sub-command: always a write.
        writes = command is None or (isinstance(command, str) and command in EDIT_COMMANDS)
        if writes and isinstance(path, str) and path:
            return (_resolve(path, cwd),)
    return ()


#: How editing tools begin an answer that refuses the edit: the file was not written. Each is the
#: first words of a tool's own message (only its errors start so; its successes say "The file ...
#: has been edited", "File created successfully at", "Text replaced", "File updated"):
_REFUSAL_PREFIXES: Final = (
    # SWE-agent's windowed editors (tools/windowed_edit_linting, windowed_edit_replace, and 0.x
    # config/commands/edit_linting.sh): the linter refused the edit, a search was not found, no
    # file is open, or the command was malformed.
    "Your proposed edit has introduced new syntax error(s)",
    "Your edit was not applied (file not modified)",
    "Your search and replace strings are the same. No changes were made.",
    "Search text must not be empty.",
    "No file opened.",
    "No file open.",
    "Usage: edit ",
    # str_replace_editor: Anthropic's text editor, SWE-agent's tools/edit_anthropic and
    # openhands-aci (OpenHands) share its ToolError messages.
    "No replacement was performed",
    "Parameter `",
    "Invalid `",
    "The path ",
    "File already exists at:",
    "The parent directory ",
    "Unrecognized command ",
    "No edit history found for ",
    "Ran into ",
    # OpenHands (V0) hands the model every file editor error as "ERROR:\n<message>".
    "ERROR:",
    # tau-bench and most function-calling runners answer a failed call "Error: <exception>".
    "Error:",
    # Claude Code wraps a refused call (String to replace not found, File has not been read
    # yet, a blocked or invalid call) in <tool_use_error>; a call the user rejected gets its fixed
    # rejection text ("... the new_string was NOT written to the file").
    "<tool_use_error>",
    "The user doesn't want to proceed with this tool use.",
    "The user doesn't want to take this action right now.",
)

#: A line of SWE-agent's lint refusal, wherever the observation template puts it
#: ("OBSERVATION:\n..." in SWE-agent 1.x's default). No file window shows it as a line of its own:
#: the editors number every line they display.
_REFUSAL_LINES: Final = frozenset(
    {"Your changes have NOT been applied. Please fix your edit command and try again."}
)


def edit_refused(output: str) -> bool:
    """Whether an editing tool's answer says it wrote nothing (its own refusal or error text).

    Only the tools' documented markers count, at the start of the answer (or SWE-agent's
    lint-refusal line anywhere): an answer that merely contains the word "error" (a file window
    showing code that handles errors) is no refusal.
    """
    head = output.lstrip()
    if head.startswith(_REFUSAL_PREFIXES):
        return True
    return any(line.strip() in _REFUSAL_LINES for line in output.splitlines())
