"""Checkpoint files of a live agent: projection state plus the tool-call index, by seq.

A checkpoint lets :meth:`holon.runtime.Agent.open` skip folding the whole ledger. It is
three files under ``<ledger>/checkpoints/``, written at a turn boundary::

    <seq:012d>.ckpt      holon.projections.encode_checkpoint(state, head_hash=...)
    <seq:012d>.tools     b"HOLONTIX" + blake3(payload) + payload, payload = msgpack(ToolIndex)
    <seq:012d>.episodes  b"HOLONEPX" + blake3(payload) + payload,
                         payload = msgpack([seq, head_hash, EpisodeIndex.export()])

The ``.tools`` sidecar holds what the projections do not keep (they keep only bounded
windows): every idempotency key with the seqs of its intent and result, intents still
waiting for a result, and the calls whose outcome was recorded as unknown. Both files
are written atomically (temp file, fsync, rename, directory fsync), the sidecars first,
so a ``.ckpt`` file is never visible without its sidecars.

The ``.episodes`` sidecar is the agent's BM25 episode index, so the first turn after
an open does not re-tokenize every archived episode. It is a cache: when it is missing,
damaged or for another ledger state (:func:`load_episode_index`), the checkpoint is
still used and the index is rebuilt from the archive instead.

Trust is earned, never assumed (:func:`load_checkpoint`): the projection checkpoint is
checked by :func:`holon.projections.restore_checkpoint` (magic, version, config, zstd
checksum), the sidecar by its blake3 digest and its key, and the key's ``head_hash`` by
re-hashing the ledger's records after the checkpoint up to the ledger's head: the
chain from the checkpoint's hash must reproduce the head hash, which proves the ledger
still holds, at that seq, the record the checkpoint was made from.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

import blake3
import msgspec

import holon.records as r
from holon.context import EpisodeIndex, EpisodeIndexRejected
from holon.ledger import Ledger
from holon.projections import (
    CheckpointRejected,
    ProjectionConfig,
    ProjectionState,
    encode_checkpoint,
    read_checkpoint_key,
    restore_checkpoint,
)

__all__ = [
    "CHECKPOINT_DIR",
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
_TOOLS_MAGIC: Final = b"HOLONTIX"
_DIGEST: Final = 32
_CKPT: Final = ".ckpt"
_TOOLS: Final = ".tools"
_EPISODES_MAGIC: Final = b"HOLONEPX"
_EPISODES: Final = ".episodes"
_TMP: Final = ".tmp"


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
    """

    seq: int = -1
    head_hash: str = ""
    keys: dict[str, KeyEntry] = {}
    pending: dict[str, PendingIntent] = {}
    unknown: list[UnknownOutcome] = []

    def apply(self, record: r.Record) -> None:
        """Fold one record in (only tool intents and results change the index)."""
        self.seq = record.seq
        body = record.body
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
        elif isinstance(body, r.ToolResult):
            intent = self.pending.pop(body.call_id, None)
            if intent is None:
                return
            key = intent.idempotency_key
            if key is not None:
                entry = self.keys.get(key)
                if entry is not None and entry.call_id == body.call_id:
                    self.keys[key] = KeyEntry(entry.call_id, entry.intent_seq, record.seq)
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


class _SavedEpisodes(msgspec.Struct, frozen=True, array_like=True):
    """The ``.episodes`` payload: the exported index and the ledger state it was saved at."""

    seq: int
    head_hash: str
    index: bytes


_ENCODER: Final = msgspec.msgpack.Encoder()
_INDEX_DECODER: Final = msgspec.msgpack.Decoder(ToolIndex)
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
    """``(seq, .ckpt path)`` of every checkpoint file, newest first."""
    folder = ledger_dir / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    found: list[tuple[int, Path]] = []
    for path in folder.iterdir():
        if path.suffix == _CKPT and path.stem.isdigit():
            found.append((int(path.stem), path))
    found.sort(reverse=True)
    return found


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + _TMP)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(
    ledger_dir: Path,
    state: ProjectionState,
    index: ToolIndex,
    *,
    head_hash: str,
    episodes: EpisodeIndex | None = None,
) -> Path:
    """Write the checkpoint of ``state`` (folded to the ledger's head, hash ``head_hash``).

    ``episodes``, the episode index over ``state``'s archive, is saved beside it (without
    it no ``.episodes`` file is written and the next open rebuilds the index).
    """
    if index.seq != state.seq:
        raise ValueError(f"tool index is at seq {index.seq} but the state at seq {state.seq}")
    if episodes is not None and len(episodes) != state.memory.archive.count:
        raise ValueError(
            f"episode index holds {len(episodes)} episodes, the state's archive {state.memory.archive.count}"
        )
    folder = ledger_dir / CHECKPOINT_DIR
    folder.mkdir(exist_ok=True)
    index.head_hash = head_hash
    payload = _ENCODER.encode(index)
    tools = _TOOLS_MAGIC + blake3.blake3(payload).digest() + payload
    stem = _name(state.seq)
    _write_atomic(folder / (stem + _TOOLS), tools)
    if episodes is not None:
        saved = _ENCODER.encode(_SavedEpisodes(seq=state.seq, head_hash=head_hash, index=episodes.export()))
        _write_atomic(folder / (stem + _EPISODES), _EPISODES_MAGIC + blake3.blake3(saved).digest() + saved)
    ckpt = folder / (stem + _CKPT)
    _write_atomic(ckpt, encode_checkpoint(state, head_hash=head_hash))
    _fsync_dir(folder)
    return ckpt


def prune_checkpoints(ledger_dir: Path, keep: int, *, head_seq: int | None = None) -> None:
    """Remove all but the newest ``keep`` checkpoints (and leftover temp files).

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


def _read_index(path: Path) -> ToolIndex | str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return f"its tool index {path.name} is missing"
    head = len(_TOOLS_MAGIC) + _DIGEST
    if len(data) < head or not data.startswith(_TOOLS_MAGIC):
        return f"tool index {path.name} is not a holon tool index (bad magic)"
    payload = data[head:]
    if blake3.blake3(payload).digest() != data[len(_TOOLS_MAGIC) : head]:
        return f"tool index {path.name} fails its checksum"
    try:
        return _INDEX_DECODER.decode(payload)
    except msgspec.DecodeError as exc:
        return f"tool index {path.name} does not decode: {exc}"


def load_checkpoint(
    path: Path,
    *,
    head: tuple[int, str],
    tail: Callable[[int], list[r.Record]],
    config: ProjectionConfig | None,
) -> tuple[ProjectionState, ToolIndex, list[r.Record]] | CheckpointRejected:
    """A checkpoint's state and tool index with the ledger records after it, if valid.

    ``head`` is the ledger's ``(seq, hash)``; ``tail(seq)`` returns the records after
    ``seq``. The state must have been folded under ``config``; ``None`` accepts the
    config the checkpoint was written under (a reader learning it from the checkpoint).
    Returns the reason when the checkpoint cannot be trusted.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        return CheckpointRejected(reason="corrupt", detail=f"cannot read {path.name}: {exc}")
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

    state = restore_checkpoint(data, hash_at=hash_at, config=config if config is not None else key.config)
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
    return state, index, records


def load_episode_index(
    path: Path, *, seq: int, head_hash: str, episodes: Iterable[r.ContextEpisodeRecord]
) -> EpisodeIndex | EpisodeIndexRejected:
    """The episode index saved beside checkpoint ``path`` (``.ckpt``), if it can be trusted.

    ``seq`` and ``head_hash`` are the checkpoint's (the index must have been saved at the
    same ledger state); ``episodes`` is the archive now, which may have grown since (the
    newer episodes are indexed on restore). Otherwise returns why the saved index is not
    used: ``missing``, ``corrupt`` (magic, checksum, msgpack) or ``stale`` (another seq or
    ledger, other tokenizing code, other episodes).
    """
    side = path.with_suffix(_EPISODES)
    try:
        data = side.read_bytes()
    except FileNotFoundError:
        return EpisodeIndexRejected(reason="missing", detail=f"no saved episode index {side.name}")
    except OSError as exc:
        return EpisodeIndexRejected(reason="corrupt", detail=f"cannot read {side.name}: {exc}")
    head = len(_EPISODES_MAGIC) + _DIGEST
    if len(data) < head or not data.startswith(_EPISODES_MAGIC):
        return EpisodeIndexRejected(reason="corrupt", detail=f"{side.name} has a bad magic")
    payload = memoryview(data)[head:]
    if blake3.blake3(payload).digest() != data[len(_EPISODES_MAGIC) : head]:
        return EpisodeIndexRejected(reason="corrupt", detail=f"{side.name} fails its checksum")
    try:
        saved = _EPISODES_DECODER.decode(payload)
    except msgspec.DecodeError as exc:
        return EpisodeIndexRejected(reason="corrupt", detail=f"{side.name} does not decode: {exc}")
    if (saved.seq, saved.head_hash) != (seq, head_hash):
        return EpisodeIndexRejected(
            reason="stale",
            detail=f"{side.name} was saved at seq {saved.seq} ({saved.head_hash[:12]}), not {seq}",
        )
    restored = EpisodeIndex.restore(saved.index, episodes)
    if isinstance(restored, EpisodeIndexRejected):
        return EpisodeIndexRejected(reason=restored.reason, detail=f"{side.name}: {restored.detail}")
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
