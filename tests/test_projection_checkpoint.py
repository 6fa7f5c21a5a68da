"""Checkpoints: round-trip, and every stale or mismatched checkpoint is rejected with its reason."""

from __future__ import annotations

import msgspec
import zstandard

from holon import records as r
from holon.projections import (
    CHECKPOINT_MAGIC,
    CheckpointRejected,
    ProjectionConfig,
    ProjectionState,
    encode_checkpoint,
    fold,
    read_checkpoint_key,
    restore_checkpoint,
)
from holon.projections.projection import apply
from tests.live import LiveLedger


def _state() -> ProjectionState:
    live = LiveLedger()
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    live.append(r.WorkItemState(id="ghost", state="active"))  # carried: plain-data body
    live.append(r.Brief(status="result", text="done"))
    live.end_turn()
    return live.state


def _hash_at(seq: int) -> str | None:
    return f"h{seq}" if seq < 100 else None


def test_round_trip_gives_an_equal_state_that_folds_on_identically() -> None:
    state = _state()
    data = encode_checkpoint(state, head_hash=f"h{state.seq}")
    assert data.startswith(CHECKPOINT_MAGIC)
    restored = restore_checkpoint(data, hash_at=_hash_at)
    assert isinstance(restored, ProjectionState)
    assert restored == state
    assert msgspec.msgpack.encode(restored) == msgspec.msgpack.encode(state)
    record = r.Record(body=r.Message(role="user", text="more"), ts=1, seq=state.seq + 1)
    assert apply(restored, record) == apply(state, record)


def test_key_is_readable_without_the_state() -> None:
    state = _state()
    key = read_checkpoint_key(encode_checkpoint(state, head_hash="abc"))
    assert not isinstance(key, CheckpointRejected)
    assert (key.seq, key.head_hash, key.config) == (state.seq, "abc", state.config)


def _reason(data: bytes, **kwargs: object) -> str:
    result = restore_checkpoint(data, hash_at=kwargs.pop("hash_at", _hash_at), **kwargs)  # type: ignore[arg-type]
    assert isinstance(result, CheckpointRejected), result
    assert result.detail
    return result.reason


def test_rejections_name_their_reason() -> None:
    state = _state()
    good = encode_checkpoint(state, head_hash=f"h{state.seq}")
    assert _reason(good, hash_at=lambda seq: "other") == "head_hash"
    assert _reason(good, hash_at=lambda seq: None) == "ledger_shorter"
    assert _reason(good, config=ProjectionConfig(turn_cap=3)) == "config"
    old = encode_checkpoint(msgspec.structs.replace(state, projection_version=0), head_hash=f"h{state.seq}")
    assert _reason(old) == "projection_version"
    assert _reason(b"not a checkpoint") == "corrupt"
    assert _reason(good[:-3]) == "corrupt"
    assert _reason(good[:12]) == "corrupt"
    flipped = bytearray(good)
    flipped[-6] ^= 0xFF
    assert _reason(bytes(flipped)) == "corrupt"


def test_checkpoint_of_a_fold_resumes_to_the_batch_state() -> None:
    live = LiveLedger()
    for i in range(3):
        live.start_turn()
        live.append(r.FollowUp(id=f"f{i}", text="x"))
        live.end_turn()
    records = live.records
    half = len(records) // 2
    first = fold(records[:half])
    restored = restore_checkpoint(encode_checkpoint(first, head_hash=f"h{first.seq}"), hash_at=_hash_at)
    assert isinstance(restored, ProjectionState)
    assert fold(records[half:], restored) == fold(records)


def test_a_zstd_header_declaring_a_huge_size_is_corrupt_not_a_memory_error() -> None:
    # Before: decompressing in one shot allocated the declared size; a damaged header
    # declaring a terabyte raised MemoryError out of restore_checkpoint (and Agent.open).
    state = _state()
    good = encode_checkpoint(state, head_hash=f"h{state.seq}")
    at = good.index(b"\x28\xb5\x2f\xfd") + 4  # the state frame's descriptor, after its magic
    # zstd's layout for this frame: single segment, content checksum, 2-byte content size.
    assert good[at] == 0x64
    damaged = good[:at] + b"\xe4" + (1 << 40).to_bytes(8, "little") + good[at + 3 :]  # 8-byte size
    result = restore_checkpoint(damaged, hash_at=_hash_at)
    assert isinstance(result, CheckpointRejected)
    assert result.reason == "corrupt" and "declares 1,099,511,627,776 bytes" in result.detail


# --------------------------------------------------------------------------- bytes that are not UTF-8


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
