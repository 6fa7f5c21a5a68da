"""How the fold reads a record's evidence: commands, file arguments, paths, plans, roles.

Small pure readings shared by the fold (:mod:`holon.projections.state`), the working-memory
fold (:mod:`holon.projections.memory`) and the snapshot: each says once what a tool call's
command is, which of its arguments name files, how a working-set path is keyed, which
commands verify and which messages are the operator's requests.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

import holon.records as r

__all__ = [
    "COMMAND_CHARS",
    "FILE_ARGUMENT_KEYS",
    "REQUEST_ROLES",
    "VERIFICATION_MARKERS",
    "cap_plan",
    "command_of",
    "file_arguments",
    "is_verification",
    "normalize_path",
    "one_line",
    "task_job",
]

#: Tool argument keys whose string (or list-of-strings) values name files.
FILE_ARGUMENT_KEYS: Final = ("path", "file", "file_path", "filename", "paths", "files")
_FILE_KEY_SET: Final = frozenset(FILE_ARGUMENT_KEYS)

# A single tool argument can list many files; the working set only needs a handful.
_MAX_ARGUMENT_FILES: Final = 8

#: Message roles whose messages are the operator's requests (the mandate): the rest are the
#: agent's own, a tool's or a channel's (a hook's feedback, another system's notice).
REQUEST_ROLES: Final = frozenset({"user", "operator"})

#: Substrings of a command (any case) that make its result a verification result.
VERIFICATION_MARKERS: Final = ("pytest", "test", "mypy", "ruff", "lint", "check", "verify", "tsc")
_VERIFICATION_RE: Final = re.compile("|".join(VERIFICATION_MARKERS), re.IGNORECASE)

#: Characters of a tool call's short readable form (:func:`command_of`).
COMMAND_CHARS: Final = 120


def is_verification(command: str) -> bool:
    """Whether a command (its :func:`command_of` form) verifies: tests, lint, type checks."""
    return _VERIFICATION_RE.search(command) is not None


def one_line(text: str, limit: int = 160) -> str:
    """Collapse whitespace to single spaces and clip to ``limit`` characters (with ``…``)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def task_job(description: str) -> str:
    """The job a task of this description runs: a short digest of the description.

    Tasks given the same description are runs of one job (the test suite run again after
    a fix), and only the newest run's result is current. Working memory keeps one result
    per job; an archived episode names each result's job by this digest (16 hex digits)
    rather than by the description, which may be a sub-agent's whole prompt.
    """
    return hashlib.blake2b(description.encode(), digest_size=8).hexdigest()


def command_of(intent: r.ToolIntent) -> str:
    """A short, human-readable form of a tool call: the shell command, else ``tool path``."""
    args = intent.args
    for key in ("command", "cmd"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return one_line(value, COMMAND_CHARS)
    for key in ("path", "file", "file_path", "filename"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return one_line(f"{intent.tool} {value}", COMMAND_CHARS)
    return one_line(intent.tool, COMMAND_CHARS)


def file_arguments(args: dict[str, Any]) -> tuple[str, ...]:
    """File paths named by a tool call's arguments (keys in :data:`FILE_ARGUMENT_KEYS`)."""
    # Fast path: most calls name no file. (The intersection is only tested for emptiness.)
    if not _FILE_KEY_SET.intersection(args):
        return ()
    found: list[str] = []
    for key in FILE_ARGUMENT_KEYS:
        value = args.get(key)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            found.extend(v for v in value[:_MAX_ARGUMENT_FILES] if isinstance(v, str))
    return tuple(found)


def normalize_path(path: str, *, base: str | None = None) -> str:
    """A working-set path as state keys it: surrounding blanks and leading ``./`` dropped.

    ``base`` (see :func:`working_dir`): an absolute path inside it is keyed relative to it,
    so the ``/testbed/a.py`` an editor reports and the ``a.py`` a command names are one
    file, and the working set shows the shorter name. ``""`` means no path (a blank
    entry); callers skip it.
    """
    if not path or path[0].isspace() or path[-1].isspace() or path.startswith("./"):
        path = path.strip()
        while path.startswith("./"):
            path = path[2:]
    if base is not None and path.startswith(base) and path[len(base) : len(base) + 1] == "/":
        inside = path[len(base) + 1 :]
        if inside:
            return inside
    return path


def cap_plan(
    steps: tuple[r.PlanStep, ...], cap: int
) -> tuple[tuple[r.PlanStep, ...], tuple[r.PlanStep, ...]]:
    """The steps a capped plan keeps (at most ``cap``) and the rest, each in plan order.

    Done and skipped steps are dropped first (oldest first), then the tail: what is left
    to do is what a capped plan must still show.
    """
    if len(steps) <= cap:
        return steps, ()
    excess = len(steps) - cap
    kept: list[r.PlanStep] = []
    rest: list[r.PlanStep] = []
    for step in steps:
        if excess and step.status in ("done", "skipped"):
            excess -= 1
            rest.append(step)
        elif len(kept) < cap:
            kept.append(step)
        else:
            rest.append(step)
    return tuple(kept), tuple(rest)
