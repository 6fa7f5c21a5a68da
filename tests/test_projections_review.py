"""Review regressions for holon.projections: each test names the bug it pins down."""

from __future__ import annotations

import msgspec
import zstandard

from holon import records as r
from holon.projections import (
    CheckpointRejected,
    ProjectionState,
    encode_checkpoint,
    read_checkpoint_key,
    restore_checkpoint,
)
from holon.projections.checkpoint import CHECKPOINT_MAGIC
from tests.live import LiveLedger


def _live_state() -> ProjectionState:
    live = LiveLedger()
    live.start_turn("user", "hi")
    live.append(r.WorkItem(id="W1", objective="marker-objective", state="active"))
    live.end_turn()
    return live.state


def test_a_checkpoint_key_with_invalid_utf8_is_rejected_as_corrupt_not_raised() -> None:
    # A damaged byte inside a string of the key (here the head hash) is not valid UTF-8:
    # msgspec raises UnicodeDecodeError, not DecodeError, and it used to escape
    # read_checkpoint_key / restore_checkpoint (and so crash Agent.open) instead of
    # rejecting the checkpoint so the ledger is folded from an older one.
    data = bytearray(encode_checkpoint(_live_state(), head_hash="headhash-marker"))
    at = bytes(data).index(b"headhash-marker")
    data[at] = 0xFF
    damaged = bytes(data)
    key = read_checkpoint_key(damaged)
    assert isinstance(key, CheckpointRejected) and key.reason == "corrupt", key
    restored = restore_checkpoint(damaged, hash_at=lambda seq: "headhash-marker")
    assert isinstance(restored, CheckpointRejected) and restored.reason == "corrupt", restored


def test_a_checkpoint_state_with_invalid_utf8_is_rejected_as_corrupt_not_raised() -> None:
    state = _live_state()
    good = encode_checkpoint(state, head_hash="h")
    length = int.from_bytes(good[len(CHECKPOINT_MAGIC) : len(CHECKPOINT_MAGIC) + 4], "big")
    header = good[: len(CHECKPOINT_MAGIC) + 4 + length]
    payload = bytearray(msgspec.msgpack.encode(state))
    payload[bytes(payload).index(b"marker-objective")] = 0xFF
    # A well-formed zstd frame (its checksum matches) around a damaged msgpack payload.
    damaged = header + zstandard.ZstdCompressor(write_checksum=True).compress(bytes(payload))
    restored = restore_checkpoint(damaged, hash_at=lambda seq: "h")
    assert isinstance(restored, CheckpointRejected) and restored.reason == "corrupt", restored
