"""What a tool call did to the workspace, read from its name and arguments.

Shared by the importers so that "touched files" means the same thing for every
format. Arguments are model-written, so nothing here raises: a call whose arguments
do not name a file simply touched no file that holon can tell.
"""

from __future__ import annotations

import posixpath
from typing import Any, Final

__all__ = ["EDIT_COMMANDS", "edit_targets"]

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
