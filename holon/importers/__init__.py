"""Importers: other agent tools' transcripts mapped to holon records.

Each format has a pure mapping function ``parse_<format>(data, source=...)`` from a
file's bytes to an :class:`ImportReport` (the records, ready to append with
``seq=-1``, and counts of what was skipped). :func:`import_transcript` and
:func:`read_transcript` add the one piece of I/O: reading the file.

The same bytes always give the same records: timestamps come from the transcript (or
a synthetic clock, never the real one), and nothing depends on hash order.
Malformed or wrong-format input raises :class:`~holon.errors.InvalidRecord` naming the
file, the line or JSON path, and what was expected. The mapping of every format is
documented in docs/importers.md.

Each format's module is imported on first use (PEP 562 for the ``parse_<format>``
names, :attr:`Importer.parse` for the registry), so :data:`FORMATS` and :data:`IMPORTERS`
cost nothing to import.

What it may import: :mod:`holon.records`, :mod:`holon.errors`, msgspec and the stdlib
(tests/test_layers.py holds it): a mapping reads bytes and returns records, it never writes.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from holon.errors import UsageError

if TYPE_CHECKING:  # what type checkers and IDEs read; at run time __getattr__ resolves these
    from holon.importers._builder import SYNTHETIC_STEP_MS, ImportReport
    from holon.importers.claude_code import parse_claude_code
    from holon.importers.jsonl import parse_jsonl
    from holon.importers.openai_chat import parse_openai_chat
    from holon.importers.openhands import parse_openhands
    from holon.importers.swe_agent import parse_swe_agent
    from holon.records import Record

__all__ = [
    "FORMATS",
    "IMPORTERS",
    "SYNTHETIC_STEP_MS",
    "ImportReport",
    "Importer",
    "import_transcript",
    "parse_claude_code",
    "parse_jsonl",
    "parse_openai_chat",
    "parse_openhands",
    "parse_swe_agent",
    "read_transcript",
]


@dataclass(frozen=True)
class Importer:
    """One transcript format: its ``--from`` name, a one-line description, and its mapping.

    The mapping's module is imported when it is first used, not with the registry: the
    command line lists the formats in its ``--help`` without loading five parsers.
    """

    name: str
    description: str
    #: The module defining ``parse_<name>`` (the name with ``_`` for ``-``).
    module: str

    @property
    def parse(self) -> Callable[..., ImportReport]:
        """The pure mapping ``parse_<format>(data, source=...)`` from a file's bytes to records."""
        parse: Callable[..., ImportReport] = getattr(
            importlib.import_module(self.module), f"parse_{self.name.replace('-', '_')}"
        )
        return parse

    def parse_bytes(self, data: bytes, *, source: str) -> ImportReport:
        """Map a file's bytes (``source`` names it in errors) to records."""
        report: ImportReport = self.parse(data, source=source)
        return report


#: Format name (as given to ``holon import --from``) -> importer, in documentation order.
IMPORTERS: Final[Mapping[str, Importer]] = MappingProxyType(
    {
        importer.name: importer
        for importer in (
            Importer("jsonl", "holon's canonical JSONL records (holon export)", "holon.importers.jsonl"),
            Importer("claude-code", "Claude Code session transcript (.jsonl)", "holon.importers.claude_code"),
            Importer(
                "openai-chat",
                "OpenAI chat messages with tool_calls; also tau-bench's list of runs (.json)",
                "holon.importers.openai_chat",
            ),
            Importer("swe-agent", "SWE-agent trajectory (.traj)", "holon.importers.swe_agent"),
            Importer(
                "openhands",
                "OpenHands event stream or evaluation output (.json/.jsonl), or a V1 conversation directory",
                "holon.importers.openhands",
            ),
        )
    }
)

#: The accepted format names, in documentation order.
FORMATS: Final[tuple[str, ...]] = tuple(IMPORTERS)


def read_transcript(path: str | os.PathLike[str], fmt: str) -> ImportReport:
    """Read and map a transcript file, returning the records and what was skipped."""
    importer = IMPORTERS.get(fmt)
    if importer is None:
        raise UsageError(f"unknown import format {fmt!r}; expected one of: {', '.join(FORMATS)}")
    source = os.fspath(path)
    if fmt == "openhands" and os.path.isdir(source):
        data = _conversation_events(source)
    else:
        try:
            with open(source, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from None
    if not data.strip():
        raise UsageError(f"{source} is empty: there is no {fmt} transcript in it to import")
    if fmt == "claude-code":
        # A session's sub-agents are in files of their own beside it.
        report = importer.parse(data, source=source, subagents=_subagent_files(source))
    else:
        report = importer.parse_bytes(data, source=source)
    if not report.records:
        # Valid but empty (e.g. `[]`): every format says so the same way, not "appended 0". What
        # was left out is named: a file of only skipped events (summaries of other sessions,
        # snapshots) is no empty file, and the reasons say why nothing was imported.
        skipped = ", ".join(f"{reason} {count}" for reason, count in report.skipped.items())
        left_out = f" (skipped: {skipped})" if skipped else ""
        raise UsageError(f"{source} holds no {fmt} conversation: nothing in it maps to a record{left_out}")
    return report


def _subagent_files(source: str) -> dict[str, bytes]:
    """A Claude Code session's sub-agent transcripts: ``<session>/subagents/agent-*.jsonl`` beside
    ``<session>.jsonl`` (path -> bytes; none for another file name or no such directory)."""
    base, ext = os.path.splitext(source)
    folder = os.path.join(base, "subagents")
    if ext != ".jsonl" or not os.path.isdir(folder):
        return {}
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise UsageError(f"cannot read {folder}: {exc.strerror or exc}") from None
    files: dict[str, bytes] = {}
    for name in names:
        path = os.path.join(folder, name)
        if not (name.startswith("agent-") and name.endswith(".jsonl") and os.path.isfile(path)):
            continue
        try:
            with open(path, "rb") as handle:
                files[path] = handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return files


#: An OpenHands V1 event file's name: its index in the conversation (5 digits or more), then its id.
_V1_EVENT_FILE: Final = re.compile(r"\Aevent-(\d{5,})-[0-9a-fA-F-]{8,}\.json\Z")


def _conversation_events(directory: str) -> bytes:
    """An OpenHands V1 conversation directory's events as one JSON array, in the order it numbered them.

    The software-agent-sdk keeps a conversation as ``<id>/base_state.json`` and one file per event,
    ``<id>/events/event-<index>-<event id>.json``; the directory given may be either. Each file is
    checked to be JSON here, so an error names the file rather than a place in the joined array.
    """
    from holon.importers._shape import decode_json_document  # noqa: PLC0415 (loaded on use, see Importer)

    events = os.path.join(directory, "events")
    folder = events if os.path.isdir(events) else directory
    try:
        names = os.listdir(folder)
    except OSError as exc:
        raise UsageError(f"cannot read {folder}: {exc.strerror or exc}") from None
    numbered = sorted((int(match.group(1)), name) for name in names if (match := _V1_EVENT_FILE.match(name)))
    if not numbered:
        raise UsageError(
            f"{directory} is a directory with no OpenHands conversation events in it (no "
            "events/event-<index>-<id>.json files): give --from openhands a conversation directory "
            "or one file"
        )
    parts: list[bytes] = []
    for expected, (index, name) in enumerate(numbered):
        file = os.path.join(folder, name)
        if index < expected:
            # Two files of one index (a copy merged into the directory): which is the event is
            # not for the import to guess, and "no event <next>" named a file that is there.
            raise UsageError(
                f"{folder} holds two files for event {index:05d}, {numbered[expected - 1][1]} and {name}: "
                "one conversation numbers each event once; remove the one that does not belong"
            )
        if index != expected:
            # A gap is an event lost: the conversation after it would be imported without it.
            raise UsageError(
                f"{folder} has no event {expected:05d} (the next file is {name}): the conversation is "
                "missing an event; copy the whole conversation directory again"
            )
        try:
            with open(file, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
        decode_json_document(data, source=file, format_hint="")
        parts.append(data.removeprefix(b"\xef\xbb\xbf"))
    return b"[" + b",\n".join(parts) + b"]"


def import_transcript(path: str | os.PathLike[str], fmt: str) -> list[Record]:
    """Read and map a transcript file to records (``seq=-1``, in order, ready to append)."""
    return list(read_transcript(path, fmt).records)


#: Module -> the names of ``__all__`` it defines, imported on first use.
_HOMES: Final[dict[str, tuple[str, ...]]] = {
    "holon.importers._builder": ("SYNTHETIC_STEP_MS", "ImportReport"),
    "holon.importers.claude_code": ("parse_claude_code",),
    "holon.importers.jsonl": ("parse_jsonl",),
    "holon.importers.openai_chat": ("parse_openai_chat",),
    "holon.importers.openhands": ("parse_openhands",),
    "holon.importers.swe_agent": ("parse_swe_agent",),
}
_HOME_OF: Final = {name: module for module, names in _HOMES.items() for name in names}


if not TYPE_CHECKING:  # hidden from type checkers, which would accept any name through it

    def __getattr__(name: str) -> object:
        module = _HOME_OF.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups find it without calling __getattr__ again
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
