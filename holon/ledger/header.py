"""The ledger header file ``holon-ledger.json``: what marks a directory as a ledger.

It is small JSON, written atomically once when the ledger is created::

    {"format": "holon-ledger", "format_version": 2, "agent_id": "...", "genesis": "<hex>",
     "segment_bytes": 8388608, "blob_threshold": 4096}

``genesis`` is the chain hash before the first record, derived from the agent id, so
two ledgers of the same agent holding the same records have the same head hash.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import blake3

from holon.errors import LedgerCorrupt, NotALedger, UsageError
from holon.ledger.files import TMP_SUFFIX, read_ledger_file, write_atomic
from holon.ledger.lock import LOCK_NAME
from holon.ledger.segments import FORMAT_VERSION, SEGMENT_HEADER, segment_name
from holon.ledger.sizes import DEFAULT_BLOB_THRESHOLD, DEFAULT_SEGMENT_BYTES, SETTING_RANGES

__all__ = [
    "DEFAULT_BLOB_THRESHOLD",
    "DEFAULT_SEGMENT_BYTES",
    "FORMAT_NAME",
    "HEADER_NAME",
    "SETTING_RANGES",
    "LedgerHeader",
    "check_outside_ledgers",
    "enclosing_ledger",
    "genesis_hash",
    "interrupted_create",
    "read_header",
    "setting_problem",
    "upgrade_header",
    "write_header",
]

HEADER_NAME: Final = "holon-ledger.json"
_HEADER_WHAT: Final = "the ledger header"
# Said wherever a path is not a ledger: the command-line way and the library way to make one.
_CREATE_HINT: Final = "create one with `holon init PATH --agent-id ID` or Ledger.create(path, agent_id=...)"
FORMAT_NAME: Final = "holon-ledger"
_GENESIS_DOMAIN: Final = b"holon-ledger/genesis/v1\x00"


def setting_problem(field: str, value: object) -> str | None:
    """What is wrong with ``value`` for the header setting ``field`` (a SETTING_RANGES key).

    ``None`` when it is in range; otherwise the rule it breaks, for the caller's error
    (bool is refused although it is an int: ``true`` in the JSON is not a size).
    """
    low, high = SETTING_RANGES[field]
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return None
    return f"must be an integer from {low:,} to {high:,}"


def genesis_hash(agent_id: str) -> bytes:
    """The chain hash that record 0 commits to."""
    return blake3.blake3(_GENESIS_DOMAIN + agent_id.encode("utf-8")).digest()


@dataclass(frozen=True)
class LedgerHeader:
    """The decoded ledger header."""

    agent_id: str
    format_version: int
    segment_bytes: int
    blob_threshold: int

    @property
    def genesis(self) -> bytes:
        """The chain hash before record 0."""
        return genesis_hash(self.agent_id)


def write_header(ledger_dir: Path, header: LedgerHeader) -> None:
    """Write the header of a new ledger (atomically and durably)."""
    doc = {
        "format": FORMAT_NAME,
        "format_version": header.format_version,
        "agent_id": header.agent_id,
        "genesis": header.genesis.hex(),
        "segment_bytes": header.segment_bytes,
        "blob_threshold": header.blob_threshold,
    }
    write_atomic(ledger_dir / HEADER_NAME, (json.dumps(doc, indent=2) + "\n").encode(), what=_HEADER_WHAT)


def upgrade_header(ledger_dir: Path, header: LedgerHeader) -> LedgerHeader:
    """Raise an older ledger's header to this holon's format version (atomically); return it.

    A writer calls this before it seals a segment in the current layout: from then on an
    older holon refuses the ledger by name ("newer than the 1 this holon reads; upgrade
    holon") instead of reading a segment it does not understand as damage. The segments
    already there are not rewritten: this holon reads them as they are.
    """
    if header.format_version >= FORMAT_VERSION:
        return header
    upgraded = LedgerHeader(
        agent_id=header.agent_id,
        format_version=FORMAT_VERSION,
        segment_bytes=header.segment_bytes,
        blob_threshold=header.blob_threshold,
    )
    write_header(ledger_dir, upgraded)
    return upgraded


def enclosing_ledger(path: Path, *, levels: int | None = None) -> Path | None:
    """The ledger directory ``path`` lies inside, looking up ``levels`` ancestors (all by default).

    The nearest one, or ``None``: a path inside a ledger is where a new ledger or an
    output must not go, or a part of a ledger the user pointed at instead of the ledger.
    """
    for parent in path.parents[:levels]:
        if (parent / HEADER_NAME).is_file():
            return parent
    return None


def check_outside_ledgers(out: Path, *, what: str) -> None:
    """Refuse an output path inside any ledger directory (UsageError naming that ledger).

    An export checks the ledger it reads (:func:`~holon.ledger.files.check_outside`);
    another ledger is found by the header in one of ``out``'s ancestors, at any depth, or
    in ``out`` itself (a directory output). Links are resolved first: a path through a
    link into a ledger writes there all the same.
    """
    target = out.resolve()
    directory = target if (target / HEADER_NAME).is_file() else enclosing_ledger(target)
    if directory is not None:
        raise UsageError(
            f"{what} {out} is inside the ledger {directory}: writing there would damage it; "
            "choose a path outside every ledger directory"
        )


def _kind(path: Path) -> int | None:
    """The file type bits of ``path`` itself (a link is a link), None if it is missing."""
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def interrupted_create(root: str | os.PathLike[str]) -> bool:
    """Whether ``root`` holds only what an interrupted ``Ledger.create`` leaves: no header, no record.

    ``create`` takes the writer lock, makes ``segments/`` and ``blobs/``, writes segment 0
    (its 64-byte header, atomically) and only then the ledger header: a crash, a kill or a
    full disk between those steps leaves a subset of them, and nothing else. Nothing can
    have been appended (a writer opens only a directory with a header), so creating the
    ledger again loses nothing. Anything more (another file, a segment 0 holding records,
    a blob) is not such debris: the directory is someone's, or a ledger whose header was
    deleted, and is left alone.
    """
    root = Path(root)
    if not root.is_dir() or _kind(root / HEADER_NAME) is not None:
        return False
    allowed = {LOCK_NAME: stat.S_IFREG, HEADER_NAME + TMP_SUFFIX: stat.S_IFREG, "segments": stat.S_IFDIR}
    allowed["blobs"] = stat.S_IFDIR
    names = os.listdir(root)
    if not names or any(allowed.get(name) != _kind(root / name) for name in names):
        return False
    if "blobs" in names and os.listdir(root / "blobs"):
        return False
    first = segment_name(0)
    if "segments" in names:
        for name in os.listdir(root / "segments"):
            path = root / "segments" / name
            if name not in (first, first + TMP_SUFFIX) or _kind(path) != stat.S_IFREG:
                return False
            if name == first and path.stat().st_size > SEGMENT_HEADER.size:
                return False  # frames: records of a ledger whose header went missing
    return True


def _ledgers_in(directory: Path, limit: int = 5) -> list[str]:
    """Up to ``limit`` ledgers directly inside ``directory`` (sorted), for an error naming them."""
    try:
        children = sorted(child for child in directory.iterdir() if (child / HEADER_NAME).is_file())
    except OSError:
        return []
    names = [str(child) for child in children[:limit]]
    return [*names, f"and {len(children) - limit} more"] if len(children) > limit else names


def read_header(ledger_dir: Path) -> LedgerHeader:
    """Read and check the header; raise NotALedger when ``ledger_dir`` is not a ledger.

    A header that is a symbolic link or not a regular file is LedgerCorrupt naming it.
    """
    path = ledger_dir / HEADER_NAME
    if not ledger_dir.is_dir():
        raise _not_a_directory(ledger_dir)
    try:
        # Not through a link: an upgrade would replace it, and a reader would take whatever
        # it points to for this ledger's header (agent id, settings).
        raw = read_ledger_file(path, what=_HEADER_WHAT)
    except FileNotFoundError:
        raise _no_header(ledger_dir) from None
    return _header_from(_header_doc(raw, path), path, ledger_dir)


def _not_a_directory(ledger_dir: Path) -> NotALedger:
    """Why ``ledger_dir``, which is no directory, is not a ledger: a file in one, a file, or
    a path that does not exist (with the ledgers beside it)."""
    enclosing = enclosing_ledger(ledger_dir, levels=3) if ledger_dir.exists() else None
    if enclosing is not None:
        return NotALedger(f"{ledger_dir} is a file of the ledger {enclosing}; pass {enclosing} itself")
    if ledger_dir.exists():
        return NotALedger(f"{ledger_dir} is not a directory; {_CREATE_HINT}")
    # Most often a mistyped path: the ledgers beside it are the likely meant ones.
    beside = _ledgers_in(ledger_dir.parent)
    return NotALedger(
        f"{ledger_dir} does not exist: check the path"
        + (f" (beside it: {', '.join(beside)})" if beside else "")
        + f", or to start a new ledger there, {_CREATE_HINT}"
    )


def _no_header(ledger_dir: Path) -> NotALedger:
    """Why the directory ``ledger_dir``, which holds no header, is not a ledger: a part of one,
    an interrupted creation, or a directory holding ledgers (or none)."""
    # Blobs sit two below the ledger: a few levels up is where a part of it can be.
    enclosing = enclosing_ledger(ledger_dir, levels=3)
    if enclosing is not None:
        return NotALedger(
            f"{ledger_dir} is a directory inside the ledger {enclosing}; pass {enclosing} itself"
        )
    if interrupted_create(ledger_dir):
        return NotALedger(
            f"{ledger_dir} holds what an interrupted ledger creation left (no {HEADER_NAME}, no "
            "record): create the ledger again, which finishes it (`holon init PATH --agent-id ID` "
            "or Ledger.create(path, agent_id=...))"
        )
    inside = _ledgers_in(ledger_dir)
    return NotALedger(
        f"{ledger_dir} has no {HEADER_NAME}, so it is not a holon ledger; "
        + (
            f"it holds the ledgers {', '.join(inside)}: pass one of them"
            if len(inside) > 1
            else f"it holds the ledger {inside[0]}: pass that directory"
            if inside
            else f"pass the ledger directory itself, or {_CREATE_HINT}"
        )
    )


def _header_doc(raw: bytes, path: Path) -> dict[str, Any]:
    """The header's JSON object; raises unless it is one naming holon's format."""
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: garbage such as "[[[[…" nests deeper than the JSON parser goes.
        raise LedgerCorrupt(f"header is not valid JSON ({exc})", file=str(path), offset=0) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise NotALedger(f'{path} is not a holon ledger header (no "format": "{FORMAT_NAME}")')
    return doc


def _header_from(doc: dict[str, Any], path: Path, ledger_dir: Path) -> LedgerHeader:
    """The header a header's JSON object states, every field checked."""
    version = doc.get("format_version")
    agent_id = doc.get("agent_id")
    segment_bytes = doc.get("segment_bytes")
    blob_threshold = doc.get("blob_threshold")
    if (
        not isinstance(version, int)
        or isinstance(version, bool)
        or version < 1
        or not isinstance(agent_id, str)
        or not agent_id
        or not isinstance(segment_bytes, int)
        or not isinstance(blob_threshold, int)
    ):
        raise LedgerCorrupt(
            "header lacks an integer format_version (>= 1), segment_bytes or blob_threshold, or a "
            "non-empty agent_id",
            file=str(path),
            offset=0,
        )
    if version > FORMAT_VERSION:
        raise NotALedger(
            f"{ledger_dir} has ledger format version {version}, newer than the {FORMAT_VERSION} this "
            "holon reads; upgrade holon to open it (older holon never guesses at a newer format)"
        )
    # After the version check: a newer format may allow other values.
    for field, value, default in (
        ("segment_bytes", segment_bytes, DEFAULT_SEGMENT_BYTES),
        ("blob_threshold", blob_threshold, DEFAULT_BLOB_THRESHOLD),
    ):
        problem = setting_problem(field, value)
        if problem is not None:
            raise LedgerCorrupt(
                f"header field {field} is {json.dumps(value)[:40]}, but it {problem}; the header was "
                f"edited: set {field} back to a value in that range (a new ledger gets {default})",
                file=str(path),
                offset=0,
            )
    header = LedgerHeader(
        agent_id=agent_id, format_version=version, segment_bytes=segment_bytes, blob_threshold=blob_threshold
    )
    if doc.get("genesis") != header.genesis.hex():
        raise LedgerCorrupt(
            "header genesis hash does not match its agent_id; the header was edited", file=str(path), offset=0
        )
    return header
