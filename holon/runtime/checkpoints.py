"""Checkpoint files of a live agent: projection state plus the tool-call index, by seq.

A checkpoint lets :meth:`holon.runtime.Agent.open` skip folding the whole ledger. It is
three files under ``<ledger>/checkpoints/``, written at a turn boundary, and the chunk
files under ``<ledger>/checkpoints/chunks/`` they name::

    <seq:012d>.ckpt      holon.projections.encode_checkpoint(state, head_hash=..., archive=names)
    <seq:012d>.tools     b"HOLONTI2" + blake3(payload) + payload, payload = msgpack(_SavedTools)
    <seq:012d>.episodes  b"HOLONEPX" + blake3(payload) + payload,
                         payload = msgpack([seq, head_hash, newest segment, segment names])
    chunks/<blake3>.arc  encode_archive_chunk(chunk): one full chunk of the episode archive
    chunks/<blake3>.epx  EpisodeIndex.export_segment of that chunk's episodes
    chunks/<blake3>.keys msgpack({key: KeyEntry}): idempotency keys set over a run of seqs

What grows with the ledger (the archive, its BM25 index, the idempotency keys) is
append-only, so it goes into chunk files named by the blake3 hash of their bytes: a
checkpoint names the chunks written before and writes only what is new since — the
episodes archived since (the archive's newest, not yet full chunk and its index segment
are held in the ``.ckpt`` and ``.episodes`` files) and the keys set since (held in the
``.tools`` file until :data:`KEY_CHUNK` of them make a chunk). A checkpoint's cost is
what changed, not what the agent has accumulated. Pruning keeps every chunk a kept
checkpoint names and removes the rest.

The ``.tools`` sidecar holds what the projections do not keep (they keep only bounded
windows): every idempotency key with the seqs of its intent and result, intents still
waiting for a result, and the calls whose outcome was recorded as unknown. Every file is
written atomically (temp file, fsync, rename, directory fsync), the chunks first, then
the sidecars, so a ``.ckpt`` file is never visible without what it needs. None is
written, read, pruned or cleaned up through a symbolic link (holon makes none): a link
where a checkpoint writes a file, or in place of ``checkpoints/`` or ``chunks/``, is
LedgerCorrupt naming it; a checkpoint file or chunk that is a link is rejected on load.

The ``.episodes`` sidecar is the agent's BM25 episode index, so the first turn after
an open does not re-tokenize every archived episode. It is a cache: when it or a segment
it names is missing, damaged or for another ledger state (:func:`load_episode_index`),
the checkpoint is still used and the index is rebuilt from the archive instead.

Trust is earned, never assumed (:func:`load_checkpoint`): the projection checkpoint is
checked by :func:`holon.projections.restore_checkpoint` (magic, version, config, zstd
checksum), each chunk by the blake3 hash that names it, the sidecar by its blake3 digest
and its key, and the key's ``head_hash`` by re-hashing the ledger's records after the
checkpoint up to the ledger's head: the chain from the checkpoint's hash must reproduce
the head hash, which proves the ledger still holds, at that seq, the record the
checkpoint was made from. A missing or damaged chunk rejects the checkpoint (naming the
file), as a damaged ``.ckpt`` does, and the next older one is tried.

Checkpoints written before chunks (a ``.ckpt`` holding the whole archive, a ``HOLONTIX``
``.tools``, a ``.episodes`` holding the whole index) are read as they always were; an
older holon rejects every checkpoint this one writes (its key, which always has an
``archive`` field, does not decode there) and folds.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final, Literal

import blake3
import msgspec

import holon.records as r
from holon.context import EpisodeIndex, EpisodeIndexRejected
from holon.ledger import Ledger
from holon.ledger.files import DEBRIS, open_ledger_file, open_regular, real_dir, refuse_link
from holon.projections import (
    ARCHIVE_CHUNK,
    CheckpointRejected,
    ProjectionConfig,
    ProjectionState,
    encode_archive_chunk,
    encode_checkpoint,
    read_checkpoint_key,
    restore_checkpoint,
)

__all__ = [
    "CHECKPOINT_DIR",
    "CHUNK_DIR",
    "KEY_CHUNK",
    "CheckpointChunks",
    "CheckpointResume",
    "KeyEntry",
    "PendingIntent",
    "ToolIndex",
    "UnknownOutcome",
    "chain_hash",
    "checkpoint_resume",
    "list_checkpoints",
    "load_checkpoint",
    "load_episode_index",
    "prune_checkpoints",
    "write_checkpoint",
]

#: Subdirectory of the ledger directory holding checkpoint files.
CHECKPOINT_DIR: Final = "checkpoints"
#: Subdirectory of :data:`CHECKPOINT_DIR` holding the chunk files checkpoints name.
CHUNK_DIR: Final = "chunks"
#: Idempotency keys set since the last key chunk that make a new one: fewer stay in the
#: ``.tools`` file (rewritten by every checkpoint, so this bounds what it rewrites).
KEY_CHUNK: Final = 1024
_TOOLS_MAGIC: Final = b"HOLONTI2"
_OLD_TOOLS_MAGIC: Final = b"HOLONTIX"
_ARC: Final = ".arc"
_EPX: Final = ".epx"
_KEYS: Final = ".keys"
_DIGEST: Final = 32
_CKPT: Final = ".ckpt"
_TOOLS: Final = ".tools"
_EPISODES_MAGIC: Final = b"HOLONEPX"
_EPISODES: Final = ".episodes"
_TMP: Final = ".tmp"
#: What to do about a symbolic link among the checkpoint files (holon never makes one).
_CACHE: Final = (
    "remove the link: checkpoints are a cache of the ledger's fold, and the next checkpoint writes "
    "what it needs again"
)
_DIR: Final = "the checkpoint directory"
_CHUNKS: Final = "the checkpoint chunk directory"


class KeyEntry(msgspec.Struct, frozen=True, array_like=True):
    """Where the call made under one idempotency key is recorded."""

    call_id: str
    intent_seq: int
    result_seq: int | None = None


class PendingIntent(msgspec.Struct, frozen=True, kw_only=True):
    """A tool intent with no result yet: in flight, or (after a crash) of unknown outcome."""

    call_id: str
    tool: str
    args: dict[str, r.JSON]
    idempotency_key: str | None
    intent_seq: int
    turn: int | None


class UnknownOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call whose side effect may or may not have happened.

    The intent was durable (seq ``intent_seq``) but the process ended before its result
    was recorded. ``recorded_seq`` is the ``tool_result`` with status ``unknown`` that the
    runtime appended on resume, or ``None`` while it is not recorded yet.
    """

    call_id: str
    tool: str
    args: dict[str, r.JSON]
    idempotency_key: str | None
    intent_seq: int
    turn: int | None
    recorded_seq: int | None = None


class ToolIndex(msgspec.Struct, kw_only=True):
    """The runtime's ledger-wide view of tool calls, folded record by record.

    Unlike the projections' bounded windows it keeps every idempotency key: a retry
    must find its earlier call however long ago it ran. ``seq`` and ``head_hash`` name
    the ledger state it was folded to (``head_hash`` is set only when checkpointed).
    ``key_chunks`` names the key chunk files already written (oldest first) and
    ``recent`` the keys set since the last of them, in the order first set: what the
    next checkpoint writes, the rest it names.
    """

    seq: int = -1
    head_hash: str = ""
    keys: dict[str, KeyEntry] = {}
    pending: dict[str, PendingIntent] = {}
    unknown: list[UnknownOutcome] = []
    key_chunks: list[str] = []
    recent: dict[str, None] = {}

    def apply(self, record: r.Record) -> None:
        """Fold one record in (only tool intents and results change the index)."""
        self.seq = record.seq
        body = record.body
        if isinstance(body, r.ToolIntent | r.ToolResult) and body.task_id is not None:
            # A sub-agent's call ran elsewhere: it is no call of this agent's to recover
            # (an outcome unknown on reopen) nor a key this agent's retries look up.
            return
        if isinstance(body, r.ToolIntent):
            self.pending[body.call_id] = PendingIntent(
                call_id=body.call_id,
                tool=body.tool,
                args=body.args,
                idempotency_key=body.idempotency_key,
                intent_seq=record.seq,
                turn=record.turn,
            )
            if body.idempotency_key is not None:
                self.keys[body.idempotency_key] = KeyEntry(body.call_id, record.seq)
                self.recent[body.idempotency_key] = None
        elif isinstance(body, r.ToolResult):
            intent = self.pending.pop(body.call_id, None)
            if intent is None:
                return
            key = intent.idempotency_key
            if key is not None:
                entry = self.keys.get(key)
                if entry is not None and entry.call_id == body.call_id:
                    self.keys[key] = KeyEntry(entry.call_id, entry.intent_seq, record.seq)
                    self.recent[key] = None
            if body.status == "unknown":
                self.unknown.append(
                    UnknownOutcome(
                        call_id=intent.call_id,
                        tool=intent.tool,
                        args=intent.args,
                        idempotency_key=key,
                        intent_seq=intent.intent_seq,
                        turn=intent.turn,
                        recorded_seq=record.seq,
                    )
                )


class _SavedTools(msgspec.Struct, kw_only=True):
    """The ``.tools`` payload: the tool index with only the keys set after its key chunks."""

    seq: int
    head_hash: str
    key_chunks: list[str]
    keys: dict[str, KeyEntry]
    pending: dict[str, PendingIntent]
    unknown: list[UnknownOutcome]


class _SavedEpisodes(msgspec.Struct, frozen=True, array_like=True, omit_defaults=True):
    """The ``.episodes`` payload: the ledger state it was saved at, the index segment of the
    episodes after the named ones (the whole index when ``segments`` is empty: an index
    saved before segments, or an archive without a full chunk) and the segments' names."""

    seq: int
    head_hash: str
    index: bytes
    segments: list[str] = []


class CheckpointChunks:
    """The chunk files this process knows a checkpoint of its agent may name unwritten.

    Indexed like the archive's full chunks: the chunk (the very tuple the state holds, so
    a chunk is known by identity, not compared), the name of its ``.arc`` file and of its
    index segment's ``.epx`` file (``None``: not written yet). Filled as checkpoints are
    written and loaded; empty, every chunk is encoded and checked against its file once.
    """

    def __init__(self) -> None:
        self.archive: list[tuple[tuple[r.ContextEpisodeRecord, ...], str, str | None]] = []
        # The index of the newest archive chunk's episodes as far as the last checkpoint
        # saw them: its position, the index, how many episodes went in and the last one.
        self._tail: tuple[int, EpisodeIndex, int, r.ContextEpisodeRecord | None] | None = None

    def _segment(self, at: int, episodes: tuple[r.ContextEpisodeRecord, ...]) -> bytes | None:
        """``EpisodeIndex.export_segment`` of the archive chunk at ``at``, indexing only the
        episodes it gained since the last call (a checkpoint re-tokenized up to 63 before)."""
        tail = self._tail
        gone = tail is None or tail[0] != at or tail[2] > len(episodes)
        if tail is None or gone or (tail[2] and episodes[tail[2] - 1] is not tail[3]):
            tail = (at, EpisodeIndex(), 0, None)  # another chunk, or another archive
        _at, index, added, _last = tail
        index.extend(episodes[added:])
        self._tail = (at, index, len(episodes), episodes[-1] if episodes else None)
        # A repeated episode id is one document: the positions after it are not the archive's.
        return index.export(first=at * ARCHIVE_CHUNK) if len(index) == len(episodes) else None

    def _known(self, at: int, chunk: tuple[r.ContextEpisodeRecord, ...]) -> tuple[str, str | None] | None:
        if at < len(self.archive) and self.archive[at][0] is chunk:
            return self.archive[at][1], self.archive[at][2]
        return None

    def _learn(
        self, at: int, chunk: tuple[r.ContextEpisodeRecord, ...], name: str, segment: str | None
    ) -> None:
        if at < len(self.archive) and self.archive[at][0] is not chunk:
            del self.archive[at:]  # another archive from here on: what followed is not its
        if at < len(self.archive):
            self.archive[at] = (chunk, name, segment)
        elif at == len(self.archive):
            self.archive.append((chunk, name, segment))

    def _learn_segment(self, at: int, segment: str) -> None:
        if at < len(self.archive):
            chunk, name, _ = self.archive[at]
            self.archive[at] = (chunk, name, segment)

    def _forget_segments(self) -> None:
        self.archive = [(chunk, name, None) for chunk, name, _ in self.archive]


_ENCODER: Final = msgspec.msgpack.Encoder()
_OLD_INDEX_DECODER: Final = msgspec.msgpack.Decoder(ToolIndex)
_TOOLS_DECODER: Final = msgspec.msgpack.Decoder(_SavedTools)
_KEYS_DECODER: Final = msgspec.msgpack.Decoder(dict[str, KeyEntry])
_EPISODES_DECODER: Final = msgspec.msgpack.Decoder(_SavedEpisodes)


def chain_hash(prev_hex: str, records: list[r.Record]) -> str:
    """The ledger hash after ``records``, continuing the chain from ``prev_hex``.

    Each frame commits to ``blake3(previous hash + record payload)``; the payload is
    the record's canonical msgpack encoding, so re-encoding the decoded records
    reproduces the chain.
    """
    digest = bytes.fromhex(prev_hex)
    for record in records:
        digest = blake3.blake3(digest + r.encode_msgpack_record(record)).digest()
    return digest.hex()


def _name(seq: int) -> str:
    return f"{seq:012d}"


def list_checkpoints(ledger_dir: Path) -> list[tuple[int, Path]]:
    """``(seq, .ckpt path)`` of every checkpoint file, newest first.

    A checkpoint directory that is a symbolic link is LedgerCorrupt naming it: holon would
    write checkpoints, and prune files, in the directory it points to.
    """
    folder = ledger_dir / CHECKPOINT_DIR
    if not real_dir(folder, _DIR, _CACHE):
        return []
    found: list[tuple[int, Path]] = []
    for path in folder.iterdir():
        if path.suffix == _CKPT and path.stem.isdigit():
            found.append((int(path.stem), path))
    found.sort(reverse=True)
    return found


def _write_atomic(path: Path, data: bytes) -> None:
    # Neither file through a link: the temporary one would be truncated wherever it points,
    # and the rename would replace a link planted under the checkpoint's name unnoticed.
    refuse_link(path, "a checkpoint file", _CACHE)
    tmp = path.with_name(path.name + _TMP)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = open_ledger_file(tmp, flags, what="the temporary file of a checkpoint file", remedy=DEBRIS)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        # A full disk leaves a partial temp file: removed now, not at the next checkpoint,
        # which on a full disk may never come.
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def _read(path: Path) -> bytes:
    """A checkpoint file's bytes, read as a regular file and not through a symbolic link
    (OSError otherwise: ELOOP for a link)."""
    with os.fdopen(open_regular(path, os.O_RDONLY), "rb") as stream:
        return stream.read()


def _unreadable(name: str, exc: OSError) -> str:
    """Why the checkpoint file ``name`` cannot be used, for a rejection's detail."""
    if exc.errno == errno.ELOOP:
        return f"{name} is a symbolic link, which holon never writes: {_CACHE}"
    return f"cannot read {name}: {exc}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _chunk_path(folder: Path, name: str, suffix: str) -> Path:
    return folder / CHUNK_DIR / (name + suffix)


def _write_chunk(folder: Path, data: bytes, suffix: str, written: list[Path]) -> str:
    """Store ``data`` as the chunk file named by its blake3 hash; returns the name.

    A file already there is rewritten only if it no longer holds those bytes (a chunk a
    checkpoint names is trusted once its hash checks, so a damaged one must not stay).
    """
    name = blake3.blake3(data).hexdigest()
    path = _chunk_path(folder, name, suffix)
    refuse_link(path, "a checkpoint chunk file", _CACHE)
    try:
        intact = blake3.blake3(_read(path)).hexdigest() == name
    except FileNotFoundError:
        intact = False
    if not intact:
        if not real_dir(path.parent, _CHUNKS, _CACHE):
            path.parent.mkdir()
            _fsync_dir(folder)  # the new directory's entry is durable before a .ckpt names its files
        _write_atomic(path, data)
        written.append(path)
    return name


def write_checkpoint(
    ledger_dir: Path,
    state: ProjectionState,
    index: ToolIndex,
    *,
    head_hash: str,
    save_index: bool = False,
    chunks: CheckpointChunks | None = None,
) -> Path:
    """Write the checkpoint of ``state`` (folded to the ledger's head, hash ``head_hash``).

    With ``save_index`` the episode index over ``state``'s archive is saved beside it
    (without it no ``.episodes`` file is written and the next open rebuilds the index).
    ``chunks`` says which chunk files are written already (an agent keeps one across its
    checkpoints); each full archive chunk, its index segment and each key chunk is
    written once, and later checkpoints name it. ``index`` moves the keys set since its
    last key chunk into a new one when there are :data:`KEY_CHUNK` of them.
    """
    if index.seq != state.seq:
        raise ValueError(f"tool index is at seq {index.seq} but the state at seq {state.seq}")
    known = chunks if chunks is not None else CheckpointChunks()
    folder = ledger_dir / CHECKPOINT_DIR
    if not real_dir(folder, _DIR, _CACHE):
        folder.mkdir(exist_ok=True)
    written: list[Path] = []
    archive = state.memory.archive
    full = [chunk for chunk in archive.chunks if len(chunk) == ARCHIVE_CHUNK]
    names: list[str] = []
    segments: list[str] | None = [] if save_index else None
    for at, chunk in enumerate(full):
        name, segment = known._known(at, chunk) or (None, None)
        if name is None:
            name = _write_chunk(folder, encode_archive_chunk(chunk), _ARC, written)
        if segments is not None and segment is None:
            data = known._segment(at, chunk)
            segment = None if data is None else _write_chunk(folder, data, _EPX, written)
            segments = None if segment is None else segments  # a repeated id: no index saved
        if segments is not None and segment is not None:
            segments.append(segment)
        known._learn(at, chunk, name, segment)
        names.append(name)
    if segments is None:
        known._forget_segments()  # no .episodes names them now, so pruning removes them
    tail: bytes | None = None
    if segments is not None:
        rest = archive.chunks[len(full) :]  # the newest chunk when it is not full yet
        tail = known._segment(len(full), rest[0] if rest else ())
    if len(index.recent) >= KEY_CHUNK:
        sealed = _ENCODER.encode({key: index.keys[key] for key in index.recent})
        index.key_chunks.append(_write_chunk(folder, sealed, _KEYS, written))
        index.recent = {}
    if written:
        _fsync_dir(folder / CHUNK_DIR)
    index.head_hash = head_hash
    payload = _ENCODER.encode(
        _SavedTools(
            seq=index.seq,
            head_hash=head_hash,
            key_chunks=index.key_chunks,
            keys={key: index.keys[key] for key in index.recent},
            pending=index.pending,
            unknown=index.unknown,
        )
    )
    tools = _TOOLS_MAGIC + blake3.blake3(payload).digest() + payload
    stem = _name(state.seq)
    _write_atomic(folder / (stem + _TOOLS), tools)
    if segments is not None and tail is not None:
        saved = _ENCODER.encode(
            _SavedEpisodes(seq=state.seq, head_hash=head_hash, index=tail, segments=segments)
        )
        _write_atomic(folder / (stem + _EPISODES), _EPISODES_MAGIC + blake3.blake3(saved).digest() + saved)
    ckpt = folder / (stem + _CKPT)
    _write_atomic(ckpt, encode_checkpoint(state, head_hash=head_hash, archive=tuple(names)))
    _fsync_dir(folder)
    return ckpt


def prune_checkpoints(ledger_dir: Path, keep: int, *, head_seq: int | None = None) -> None:
    """Remove all but the newest ``keep`` checkpoints (and leftover temp files), then every
    chunk file no kept checkpoint names.

    With ``head_seq`` (the ledger's head), checkpoints past it are removed first and do
    not count: a cut (``holon repair --cut-at``, a torn tail lost with the power) left
    them, no open can use them, and kept as the newest they pushed out the checkpoint
    just written (``keep=1``: every one, so every open folded the whole ledger).
    """
    folder = ledger_dir / CHECKPOINT_DIR
    found = list_checkpoints(ledger_dir)
    if head_seq is not None:
        beyond = [(seq, path) for seq, path in found if seq > head_seq]
        found = [(seq, path) for seq, path in found if seq <= head_seq]
    else:
        beyond = []
    for _seq, path in beyond + found[keep:]:
        path.unlink(missing_ok=True)
        path.with_suffix(_TOOLS).unlink(missing_ok=True)
        path.with_suffix(_EPISODES).unlink(missing_ok=True)
    if folder.is_dir():
        for path in folder.iterdir():
            # Debris of a crash mid-write: a temp file, or a sidecar whose checkpoint
            # was never renamed into place.
            sidecar = path.suffix in (_TOOLS, _EPISODES)
            orphan = sidecar and not path.with_suffix(_CKPT).exists()
            if path.name.endswith(_TMP) or orphan:
                path.unlink(missing_ok=True)
    _collect_chunks(folder, [path for _seq, path in found[:keep]])


def _collect_chunks(folder: Path, kept: list[Path]) -> None:
    """Remove the chunk files (temp files too) that none of the ``kept`` checkpoints names."""
    chunk_dir = folder / CHUNK_DIR
    if not real_dir(chunk_dir, _CHUNKS, _CACHE):
        return
    named: set[str] = set()
    for path in kept:
        try:
            named.update(_named_chunks(path))
        except OSError:
            return  # what a kept checkpoint names cannot be told: remove nothing now
    for path in chunk_dir.iterdir():
        if path.name not in named:
            path.unlink(missing_ok=True)


def _named_chunks(path: Path) -> list[str]:
    """The chunk file names checkpoint ``path`` (``.ckpt``) and its sidecars name.

    A file missing or not decoding names nothing: that checkpoint cannot verify, so
    nothing it names is needed. Raises ``OSError`` when a file cannot be read.
    """
    names: list[str] = []
    with contextlib.suppress(FileNotFoundError):
        key = read_checkpoint_key(_read(path))
        if not isinstance(key, CheckpointRejected):
            names += [name + _ARC for name in key.archive]
    with contextlib.suppress(FileNotFoundError):
        tools = _decode_tools(_read(path.with_suffix(_TOOLS)))
        if isinstance(tools, _SavedTools):
            names += [name + _KEYS for name in tools.key_chunks]
    with contextlib.suppress(FileNotFoundError):
        episodes = _decode_episodes(_read(path.with_suffix(_EPISODES)))
        if isinstance(episodes, _SavedEpisodes):
            names += [name + _EPX for name in episodes.segments]
    return names


def _decode_tools(data: bytes) -> _SavedTools | ToolIndex | str:
    """A ``.tools`` file's payload (a ``ToolIndex`` when written before key chunks), or what is wrong."""
    head = len(_TOOLS_MAGIC) + _DIGEST
    magic = data[: len(_TOOLS_MAGIC)]
    if len(data) < head or magic not in (_TOOLS_MAGIC, _OLD_TOOLS_MAGIC):
        return "is not a holon tool index (bad magic)"
    payload = data[head:]
    if blake3.blake3(payload).digest() != data[len(_TOOLS_MAGIC) : head]:
        return "fails its checksum"
    try:
        if magic == _OLD_TOOLS_MAGIC:
            return _OLD_INDEX_DECODER.decode(payload)
        return _TOOLS_DECODER.decode(payload)
    except r.DECODE_ERRORS as exc:  # UnicodeDecodeError too, from msgspec before 0.23
        return f"does not decode: {exc}"


def _decode_episodes(data: bytes) -> _SavedEpisodes | str:
    """An ``.episodes`` file's payload, or what is wrong with it."""
    head = len(_EPISODES_MAGIC) + _DIGEST
    if len(data) < head or not data.startswith(_EPISODES_MAGIC):
        return "has a bad magic"
    payload = memoryview(data)[head:]
    if blake3.blake3(payload).digest() != data[len(_EPISODES_MAGIC) : head]:
        return "fails its checksum"
    try:
        return _EPISODES_DECODER.decode(payload)
    except r.DECODE_ERRORS as exc:
        return f"does not decode: {exc}"


def _read_chunk(folder: Path, name: str, suffix: str) -> bytes | str:
    """The bytes of a chunk file, checked against the hash that names it, or what is wrong."""
    path = _chunk_path(folder, name, suffix)
    shown = f"{CHUNK_DIR}/{path.name}"
    try:
        data = _read(path)
    except FileNotFoundError:
        return f"chunk file {shown} is missing"
    except OSError as exc:
        return _unreadable(f"chunk file {shown}", exc)
    if blake3.blake3(data).hexdigest() != name:
        return f"chunk file {shown} fails its checksum"
    return data


def _read_index(path: Path) -> ToolIndex | str:
    try:
        data = _read(path)
    except FileNotFoundError:
        return f"its tool index {path.name} is missing"
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise  # unreadable: a cache lost, for the caller to skip (CheckpointResume)
        return _unreadable(f"its tool index {path.name}", exc)
    saved = _decode_tools(data)
    if isinstance(saved, str):
        return f"tool index {path.name} {saved}"
    if isinstance(saved, ToolIndex):
        saved.recent = dict.fromkeys(saved.keys)  # none of its keys is in a key chunk yet
        return saved
    keys: dict[str, KeyEntry] = {}
    for name in saved.key_chunks:
        chunk = _read_chunk(path.parent, name, _KEYS)
        if isinstance(chunk, str):
            return f"tool index {path.name}: {chunk}"
        try:
            # A later chunk sets a key again (its result, a call reusing it): the last wins,
            # in the place the key was first set, as folding the records does.
            keys.update(_KEYS_DECODER.decode(chunk))
        except r.DECODE_ERRORS as exc:
            return f"tool index {path.name}: chunk file {CHUNK_DIR}/{name}{_KEYS} does not decode: {exc}"
    keys.update(saved.keys)
    return ToolIndex(
        seq=saved.seq,
        head_hash=saved.head_hash,
        keys=keys,
        pending=saved.pending,
        unknown=saved.unknown,
        key_chunks=saved.key_chunks,
        recent=dict.fromkeys(saved.keys),
    )


def load_checkpoint(
    path: Path,
    *,
    head: tuple[int, str],
    tail: Callable[[int], list[r.Record]],
    config: ProjectionConfig | None,
    chunks: CheckpointChunks | None = None,
) -> tuple[ProjectionState, ToolIndex, list[r.Record]] | CheckpointRejected:
    """A checkpoint's state and tool index with the ledger records after it, if valid.

    ``head`` is the ledger's ``(seq, hash)``; ``tail(seq)`` returns the records after
    ``seq``. The state must have been folded under ``config``; ``None`` accepts the
    config the checkpoint was written under (a reader learning it from the checkpoint).
    Returns the reason when the checkpoint cannot be trusted (a chunk file it names
    missing or damaged is ``corrupt``, naming the file). ``chunks`` learns the archive
    chunks it names, so the agent's next checkpoint names them again.
    """
    try:
        data = _read(path)
    except OSError as exc:
        return CheckpointRejected(reason="corrupt", detail=_unreadable(path.name, exc))
    key = read_checkpoint_key(data)
    if isinstance(key, CheckpointRejected):
        return key
    head_seq, head_hash = head
    if key.seq > head_seq:
        return CheckpointRejected(
            reason="ledger_shorter",
            detail=f"checkpoint is at seq {key.seq} but the ledger ends at seq {head_seq}",
        )
    records = tail(key.seq)
    reached = chain_hash(key.head_hash, records)

    def hash_at(seq: int) -> str | None:
        # The chain from the checkpoint's hash through the tail reproduces the head hash
        # only if the ledger's hash at ``seq`` is the checkpoint's (blake3 collision
        # resistance); otherwise report the mismatch with the head it failed to reach.
        if seq != key.seq:
            return None
        return key.head_hash if reached == head_hash else f"(unknown: chain does not reach head {head_hash})"

    def chunk(name: str) -> bytes | CheckpointRejected:
        read = _read_chunk(path.parent, name, _ARC)
        if isinstance(read, str):
            return CheckpointRejected(reason="corrupt", detail=f"{path.name}: {read}")
        return read

    state = restore_checkpoint(
        data, hash_at=hash_at, config=config if config is not None else key.config, chunk=chunk
    )
    if isinstance(state, CheckpointRejected):
        return state
    index = _read_index(path.with_suffix(_TOOLS))
    if isinstance(index, str):
        return CheckpointRejected(reason="corrupt", detail=index)
    if index.seq != key.seq or index.head_hash != key.head_hash:
        return CheckpointRejected(
            reason="corrupt",
            detail=f"tool index is for seq {index.seq} ({index.head_hash[:12]}), checkpoint is for {key.seq}",
        )
    if chunks is not None:
        for at, (held, name) in enumerate(zip(state.memory.archive.chunks, key.archive, strict=False)):
            chunks._learn(at, held, name, None)
    return state, index, records


def load_episode_index(
    path: Path,
    *,
    seq: int,
    head_hash: str,
    episodes: Iterable[r.ContextEpisodeRecord],
    chunks: CheckpointChunks | None = None,
) -> EpisodeIndex | EpisodeIndexRejected:
    """The episode index saved beside checkpoint ``path`` (``.ckpt``), if it can be trusted.

    ``seq`` and ``head_hash`` are the checkpoint's (the index must have been saved at the
    same ledger state); ``episodes`` is the archive now, which may have grown since (the
    newer episodes are indexed on restore). Otherwise returns why the saved index is not
    used: ``missing`` (the file, or a segment file it names), ``corrupt`` (magic, checksum,
    msgpack) or ``stale`` (another seq or ledger, other tokenizing code, other episodes).
    ``chunks`` learns the segments it names, so the agent's next checkpoint names them again.
    """
    side = path.with_suffix(_EPISODES)
    try:
        data = _read(side)
    except FileNotFoundError:
        return EpisodeIndexRejected(reason="missing", detail=f"no saved episode index {side.name}")
    except OSError as exc:
        return EpisodeIndexRejected(reason="corrupt", detail=_unreadable(side.name, exc))
    saved = _decode_episodes(data)
    if isinstance(saved, str):
        return EpisodeIndexRejected(reason="corrupt", detail=f"{side.name} {saved}")
    if (saved.seq, saved.head_hash) != (seq, head_hash):
        return EpisodeIndexRejected(
            reason="stale",
            detail=f"{side.name} was saved at seq {saved.seq} ({saved.head_hash[:12]}), not {seq}",
        )
    parts: list[bytes] = []
    for name in saved.segments:
        part = _read_chunk(path.parent, name, _EPX)
        if isinstance(part, str):
            reason: Literal["missing", "corrupt"] = "missing" if part.endswith("is missing") else "corrupt"
            return EpisodeIndexRejected(reason=reason, detail=f"{side.name}: {part}")
        parts.append(part)
    restored = EpisodeIndex.restore_segments([*parts, saved.index], episodes)
    if isinstance(restored, EpisodeIndexRejected):
        return EpisodeIndexRejected(reason=restored.reason, detail=f"{side.name}: {restored.detail}")
    if chunks is not None:
        for at, name in enumerate(saved.segments):
            chunks._learn_segment(at, name)
    return restored


class CheckpointResume:
    """Read-only folds of a ledger up to a head, resumed from its checkpoints (:func:`checkpoint_resume`).

    Called with a projection config it is a :data:`holon.replay.Resume`; :meth:`newest`,
    :meth:`record` and :meth:`episode_index` make it a :class:`holon.replay.Checkpoints`
    too, so the whole-ledger reads learn from the newest checkpoint what they otherwise
    read the whole ledger for, and render with the episode index saved beside it.
    """

    def __init__(self, ledger: Ledger, head: tuple[int, str]) -> None:
        self._ledger = ledger
        self._head = head
        # The last checkpoint that verified and its hash: a read that falls back from
        # :meth:`newest` asks again under its config, and loading re-reads the tail and
        # decompresses the state; :meth:`episode_index` reads the index saved beside it.
        self._loaded: tuple[Path, ProjectionState, list[r.Record], str] | None = None

    def __call__(self, config: ProjectionConfig) -> tuple[ProjectionState, list[r.Record]] | None:
        """The newest checkpoint that verifies under ``config`` and the records after it up to the head."""
        return self._newest(config)

    def newest(self) -> tuple[ProjectionState, list[r.Record]] | None:
        """The newest checkpoint that verifies under its own config, and the records after it.

        Its state's ``config`` is the config it was written under. ``None`` when none verifies.
        """
        return self._newest(None)

    def record(self, seq: int) -> r.Record:
        """The ledger's record at ``seq`` (at or before the head)."""
        return self._ledger.get(seq)

    def records(self, from_seq: int, to_seq: int) -> Iterator[r.Record]:
        """The ledger's records with ``from_seq <= seq < to_seq``, none after the head."""
        return self._ledger.read(from_seq, min(to_seq, self._head[0] + 1))

    def episode_index(self, seq: int, episodes: Iterable[r.ContextEpisodeRecord]) -> EpisodeIndex | None:
        """The episode index saved beside the checkpoint at ``seq``, over ``episodes`` (the archive now).

        ``None`` unless that checkpoint is the one last given (verified), or when its index
        cannot be used (:func:`load_episode_index`): the renderer then indexes the archive
        itself, with the same result, but tokenizing every archived episode again.
        """
        loaded = self._loaded
        if loaded is None or loaded[1].seq != seq:
            return None
        path, _state, _records, head_hash = loaded
        restored = load_episode_index(path, seq=seq, head_hash=head_hash, episodes=episodes)
        return None if isinstance(restored, EpisodeIndexRejected) else restored

    def _newest(self, config: ProjectionConfig | None) -> tuple[ProjectionState, list[r.Record]] | None:
        try:
            found = list_checkpoints(self._ledger.path)
        except OSError:
            return None
        for _seq, path in found:
            loaded = self._loaded
            if loaded is not None and loaded[0] == path and config in (None, loaded[1].config):
                return loaded[1], loaded[2]
            try:
                checked = load_checkpoint(path, head=self._head, tail=self._tail, config=config)
            except OSError:
                continue  # an unreadable sidecar: a cache lost, not the ledger damaged
            if not isinstance(checked, CheckpointRejected):
                state, tools, records = checked
                self._loaded = (path, state, records, tools.head_hash)
                return state, records
        return None

    def _tail(self, seq: int) -> list[r.Record]:
        return list(self._ledger.read(seq + 1, self._head[0] + 1))


def checkpoint_resume(ledger: Ledger, head: tuple[int, str]) -> CheckpointResume:
    """Resume read-only folds of ``ledger`` up to ``head`` from its newest checkpoint that verifies.

    The object returned gives, called with a projection config, the state of the newest
    checkpoint :func:`load_checkpoint` accepts under that config (format, projection version
    and config, and the hash chain from it reproduces ``head``, the ``(seq, hash)`` the
    fold ends at) and the records after it up to ``head``; or ``None`` when there is none
    (no checkpoints, each rejected or unreadable), and the fold starts from seq 0. Its
    :meth:`~CheckpointResume.newest` gives the newest that verifies under its own config,
    from which ``holon memory``, ``render`` and ``explain`` of the whole ledger take what
    they would otherwise read every record for (:class:`holon.replay.Checkpoints`).
    Nothing is written: what ``holon memory``, ``render`` and ``stats`` fold from (see
    :class:`holon.replay.Resume`).
    """
    return CheckpointResume(ledger, head)
