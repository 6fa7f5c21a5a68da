"""Checkpoints: a ProjectionState as bytes, keyed by seq, head hash and projection version.

Layout (all integers big-endian)::

    b"HOLONCKP"  u32 key length  msgpack(CheckpointKey)  zstd(msgpack(ProjectionState))

The key is readable without decompressing the state. The zstd frame carries a content
checksum. The episode archive is the one part of the state that grows with the ledger,
and its full chunks (:data:`~holon.projections.memory.ARCHIVE_CHUNK` episodes each) never
change once full; so a checkpoint may leave its first full chunks out of the state and
name them instead (``CheckpointKey.archive``): each is :func:`encode_archive_chunk`'s bytes,
stored and looked up by the caller (holon.runtime names each file by its blake3 hash and
writes a chunk once, however many checkpoints name it).

A checkpoint is only trusted when its key matches the ledger it is resumed against:
same projection version as this code, same config, and the ledger's hash at the
checkpoint's seq equal to the key's ``head_hash``. Anything else is rejected with a
:class:`CheckpointRejected` reason, never half-trusted. Reading and writing the bytes
(and deciding where they live) is the caller's job; this module does no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, Literal, TypeVar

import msgspec
import zstandard

import holon.records as r
from holon.projections.config import DEFAULT_CONFIG, PROJECTION_VERSION, ProjectionConfig, config_differences
from holon.projections.memory import ARCHIVE_CHUNK, EpisodeArchive
from holon.projections.projection import ProjectionState

__all__ = [
    "CHECKPOINT_MAGIC",
    "CheckpointKey",
    "CheckpointRejected",
    "decode_archive_chunk",
    "encode_archive_chunk",
    "encode_checkpoint",
    "read_checkpoint_key",
    "restore_checkpoint",
]

#: The first bytes of every checkpoint.
CHECKPOINT_MAGIC: Final = b"HOLONCKP"
_LENGTH: Final = struct.Struct(">I")
_ZSTD_LEVEL: Final = 3
_HEADER: Final = len(CHECKPOINT_MAGIC) + _LENGTH.size


class CheckpointKey(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a checkpoint is valid for: the state after ``seq`` of the ledger whose hash at
    ``seq`` is ``head_hash``, folded by ``projection_version`` under ``config``.

    ``archive`` names the archive chunks left out of the state, oldest first: the state's
    archive is those chunks followed by the ones it holds. A key without it (every
    checkpoint before chunks were named) holds the whole archive in its state.
    """

    projection_version: int
    config: ProjectionConfig
    seq: int
    head_hash: str
    archive: tuple[str, ...] = ()


class CheckpointRejected(msgspec.Struct, frozen=True, kw_only=True):
    """Why a checkpoint was not used. Fold from the start (or an older checkpoint) instead.

    ``reason`` is one of ``corrupt`` (bad magic, truncated, bad zstd or msgpack, key and
    state disagree), ``projection_version`` (made by other projection rules),
    ``config`` (made under another config), ``ledger_shorter`` (the ledger has no record
    at the checkpoint's seq) or ``head_hash`` (the ledger's hash there differs: the
    ledger was rewritten or is another ledger).
    """

    reason: Literal["corrupt", "projection_version", "config", "ledger_shorter", "head_hash"]
    detail: str


_KEY_DECODER: Final = msgspec.msgpack.Decoder(CheckpointKey)
_STATE_DECODER: Final = msgspec.msgpack.Decoder(ProjectionState)
_CHUNK_DECODER: Final = msgspec.msgpack.Decoder(tuple[r.ContextEpisodeRecord, ...])
_ENCODER: Final = msgspec.msgpack.Encoder()
# A damaged byte inside a msgpack string is invalid UTF-8, which msgspec before 0.23
# reports as UnicodeDecodeError rather than DecodeError; both mean the bytes are not a checkpoint.
_DECODE_ERRORS: Final = r.DECODE_ERRORS
_T = TypeVar("_T")
#: The most output one compressed byte can stand for (a zstd RLE block; see
#: holon.ledger.compression, which the projections may not import).
_MAX_ZSTD_RATIO: Final = 1 << 15


def encode_checkpoint(state: ProjectionState, *, head_hash: str, archive: tuple[str, ...] = ()) -> bytes:
    """Checkpoint bytes of ``state``; ``head_hash`` is the ledger's hash at ``state.seq``.

    ``archive`` names the state's first ``len(archive)`` archive chunks, which must be full
    and are then left out of the bytes (their :func:`encode_archive_chunk` bytes are the
    caller's to store under those names); ``()`` keeps the whole archive in the bytes.
    """
    chunks = state.memory.archive.chunks
    if len(archive) > len(chunks) or any(len(chunk) != ARCHIVE_CHUNK for chunk in chunks[: len(archive)]):
        raise ValueError(f"{len(archive)} archive chunks named, but the state has fewer full chunks")
    if archive:
        kept = EpisodeArchive(chunks=chunks[len(archive) :], count=state.memory.archive.count)
        state = msgspec.structs.replace(state, memory=msgspec.structs.replace(state.memory, archive=kept))
    key = _ENCODER.encode(
        CheckpointKey(
            projection_version=state.projection_version,
            config=state.config,
            seq=state.seq,
            head_hash=head_hash,
            archive=archive,
        )
    )
    return CHECKPOINT_MAGIC + _LENGTH.pack(len(key)) + key + _compress(_ENCODER.encode(state))


def _compress(data: bytes) -> bytes:
    compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL, write_checksum=True, write_content_size=True)
    return compressor.compress(data)


def _decoded(frame: bytes, decoder: msgspec.msgpack.Decoder[_T], what: str) -> _T | CheckpointRejected:
    """``frame`` decompressed and decoded; damage at either step is a "corrupt" rejection naming ``what``."""
    try:
        declared = zstandard.frame_content_size(frame)
        if declared > len(frame) * _MAX_ZSTD_RATIO:
            # A damaged header can declare any size, and decompressing in one shot would
            # allocate it: a terabyte is a MemoryError out of Agent.open, not a rejection.
            return CheckpointRejected(
                reason="corrupt",
                detail=f"{what}'s zstd header declares {declared:,} bytes, "
                f"more than {len(frame):,} compressed bytes can hold",
            )
        return decoder.decode(zstandard.ZstdDecompressor().decompress(frame))
    except (zstandard.ZstdError, *_DECODE_ERRORS) as exc:
        return CheckpointRejected(reason="corrupt", detail=f"{what} does not decode: {exc}")


def encode_archive_chunk(chunk: tuple[r.ContextEpisodeRecord, ...]) -> bytes:
    """The bytes of one archive chunk a checkpoint names instead of holding (deterministic)."""
    return _compress(_ENCODER.encode(chunk))


def decode_archive_chunk(
    data: bytes, *, name: str
) -> tuple[r.ContextEpisodeRecord, ...] | CheckpointRejected:
    """The full archive chunk :func:`encode_archive_chunk` made ``data`` of; ``name`` is for a rejection."""
    chunk = _decoded(data, _CHUNK_DECODER, f"archive chunk {name}")
    if isinstance(chunk, CheckpointRejected):
        return chunk
    if len(chunk) != ARCHIVE_CHUNK:
        return CheckpointRejected(
            reason="corrupt", detail=f"archive chunk {name} holds {len(chunk)} episodes, not {ARCHIVE_CHUNK}"
        )
    return chunk


def read_checkpoint_key(data: bytes) -> CheckpointKey | CheckpointRejected:
    """The key of checkpoint bytes, without decompressing the state."""
    if len(data) < _HEADER or not data.startswith(CHECKPOINT_MAGIC):
        return CheckpointRejected(reason="corrupt", detail="not a holon checkpoint (bad magic)")
    (length,) = _LENGTH.unpack_from(data, len(CHECKPOINT_MAGIC))
    if _HEADER + length > len(data):
        return CheckpointRejected(reason="corrupt", detail="checkpoint key is truncated")
    try:
        return _KEY_DECODER.decode(data[_HEADER : _HEADER + length])
    except _DECODE_ERRORS as exc:
        return CheckpointRejected(reason="corrupt", detail=f"checkpoint key does not decode: {exc}")


def restore_checkpoint(
    data: bytes,
    *,
    hash_at: Callable[[int], str | None],
    config: ProjectionConfig = DEFAULT_CONFIG,
    chunk: Callable[[str], bytes | CheckpointRejected] | None = None,
) -> ProjectionState | CheckpointRejected:
    """The state stored in ``data``, if it is valid for this ledger, code and config.

    ``hash_at(seq)`` returns the ledger's hash of the record at ``seq``, or ``None``
    when the ledger has no such record. ``chunk(name)`` returns the bytes of an archive
    chunk the key names (checked by the caller against its name), or why it cannot be
    read; a checkpoint naming chunks is rejected without it. Continue by folding the
    records after the returned state's ``seq``.
    """
    key = read_checkpoint_key(data)
    if isinstance(key, CheckpointRejected):
        return key
    if key.projection_version != PROJECTION_VERSION:
        return CheckpointRejected(
            reason="projection_version",
            detail=f"made by projection version {key.projection_version}, this code is {PROJECTION_VERSION}",
        )
    if key.config != config:
        _, differ = config_differences(key.config, config, have_name="the checkpoint's")
        return CheckpointRejected(reason="config", detail=f"made under another projection config ({differ})")
    ledger_hash = hash_at(key.seq)
    if ledger_hash is None:
        return CheckpointRejected(
            reason="ledger_shorter", detail=f"the ledger has no record at seq {key.seq}"
        )
    if ledger_hash != key.head_hash:
        return CheckpointRejected(
            reason="head_hash",
            detail=f"ledger hash at seq {key.seq} is {ledger_hash}, checkpoint was made at {key.head_hash}",
        )
    (length,) = _LENGTH.unpack_from(data, len(CHECKPOINT_MAGIC))
    state = _decoded(data[_HEADER + length :], _STATE_DECODER, "the checkpoint state")
    if isinstance(state, CheckpointRejected):
        return state
    if (
        state.seq != key.seq
        or state.config != key.config
        or state.projection_version != key.projection_version
    ):
        return CheckpointRejected(reason="corrupt", detail="checkpoint state disagrees with its key")
    if not key.archive:
        return state
    return _with_archive(state, key.archive, chunk)


def _with_archive(
    state: ProjectionState, names: tuple[str, ...], chunk: Callable[[str], bytes | CheckpointRejected] | None
) -> ProjectionState | CheckpointRejected:
    """``state`` with the archive chunks its key names put back in front of the ones it holds."""
    if chunk is None:
        return CheckpointRejected(
            reason="corrupt", detail=f"the checkpoint names {len(names)} archive chunks and none can be read"
        )
    loaded: list[tuple[r.ContextEpisodeRecord, ...]] = []
    for name in names:
        data = chunk(name)
        if isinstance(data, CheckpointRejected):
            return data
        episodes = decode_archive_chunk(data, name=name)
        if isinstance(episodes, CheckpointRejected):
            return episodes
        loaded.append(episodes)
    held = state.memory.archive
    chunks = (*loaded, *held.chunks)
    # Every chunk but the last is full (EpisodeArchive.append), which get() relies on.
    if sum(map(len, chunks)) != held.count or any(len(each) != ARCHIVE_CHUNK for each in chunks[:-1]):
        return CheckpointRejected(
            reason="corrupt",
            detail=f"the checkpoint's archive of {held.count} episodes disagrees with "
            f"the {len(names)} chunks it names",
        )
    archive = EpisodeArchive(chunks=chunks, count=held.count)
    return msgspec.structs.replace(state, memory=msgspec.structs.replace(state.memory, archive=archive))
