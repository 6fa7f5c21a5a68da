"""Checkpoints: a ProjectionState as bytes, keyed by seq, head hash and projection version.

Layout (all integers big-endian)::

    b"HOLONCKP"  u32 key length  msgpack(CheckpointKey)  zstd(msgpack(ProjectionState))

The key is readable without decompressing the state. The zstd frame carries a content
checksum. A checkpoint is only trusted when its key matches the ledger it is resumed
against: same projection version as this code, same config, and the ledger's hash at
the checkpoint's seq equal to the key's ``head_hash``. Anything else is rejected with a
:class:`CheckpointRejected` reason, never half-trusted. Reading and writing the bytes
(and deciding where they live) is the caller's job; this module does no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, Literal

import msgspec
import zstandard

from holon.projections.config import DEFAULT_CONFIG, PROJECTION_VERSION, ProjectionConfig, config_differences
from holon.projections.projection import ProjectionState

__all__ = [
    "CHECKPOINT_MAGIC",
    "CheckpointKey",
    "CheckpointRejected",
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
    ``seq`` is ``head_hash``, folded by ``projection_version`` under ``config``."""

    projection_version: int
    config: ProjectionConfig
    seq: int
    head_hash: str


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
_ENCODER: Final = msgspec.msgpack.Encoder()
# A damaged byte inside a msgpack string is invalid UTF-8, which msgspec reports as
# UnicodeDecodeError rather than DecodeError; both mean the bytes are not a checkpoint.
_DECODE_ERRORS: Final = (msgspec.DecodeError, UnicodeDecodeError)
#: The most output one compressed byte can stand for (a zstd RLE block; see
#: holon.ledger.compression, which the projections may not import).
_MAX_ZSTD_RATIO: Final = 1 << 15


def encode_checkpoint(state: ProjectionState, *, head_hash: str) -> bytes:
    """Checkpoint bytes of ``state``; ``head_hash`` is the ledger's hash at ``state.seq``."""
    key = _ENCODER.encode(
        CheckpointKey(
            projection_version=state.projection_version,
            config=state.config,
            seq=state.seq,
            head_hash=head_hash,
        )
    )
    compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL, write_checksum=True, write_content_size=True)
    return CHECKPOINT_MAGIC + _LENGTH.pack(len(key)) + key + compressor.compress(_ENCODER.encode(state))


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
) -> ProjectionState | CheckpointRejected:
    """The state stored in ``data``, if it is valid for this ledger, code and config.

    ``hash_at(seq)`` returns the ledger's hash of the record at ``seq``, or ``None``
    when the ledger has no such record. Continue by folding the records after the
    returned state's ``seq``.
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
    frame = data[_HEADER + length :]
    try:
        declared = zstandard.frame_content_size(frame)
        if declared > len(frame) * _MAX_ZSTD_RATIO:
            # A damaged header can declare any size, and decompressing in one shot would
            # allocate it: a terabyte is a MemoryError out of Agent.open, not a rejection.
            return CheckpointRejected(
                reason="corrupt",
                detail=f"the checkpoint state's zstd header declares {declared:,} bytes, "
                f"more than {len(frame):,} compressed bytes can hold",
            )
        payload = zstandard.ZstdDecompressor().decompress(frame)
        state = _STATE_DECODER.decode(payload)
    except (zstandard.ZstdError, *_DECODE_ERRORS) as exc:
        return CheckpointRejected(reason="corrupt", detail=f"checkpoint state does not decode: {exc}")
    if (
        state.seq != key.seq
        or state.config != key.config
        or state.projection_version != key.projection_version
    ):
        return CheckpointRejected(reason="corrupt", detail="checkpoint state disagrees with its key")
    return state
