"""Precise claims of the docs that a reader relies on, checked against what the code does.

Each test reads the bytes (or the behaviour) the way the doc tells a third party to, so a
change to the format or a default that the doc still describes fails here.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import blake3
import msgspec
import pytest
import xxhash
import zstandard

from holon.errors import LedgerCorrupt, UsageError
from holon.ledger import Ledger
from holon.projections import DEFAULT_CONFIG, PROJECTION_VERSION, encode_checkpoint, fold
from holon.records import Message, Record, ToolIntent, ToolResult

# docs/ledger-format.md, "Segment file": header and frame layouts, little-endian.
SEGMENT_HEADER = struct.Struct("<8sHHIQ32sQ")
FRAME_HEAD = struct.Struct("<IIQ")


def _records() -> list[Record]:
    return [
        Record(body=Message(role="user", text="hello"), ts=1, turn=None),
        Record(body=ToolIntent(call_id="c1", tool="bash", args={"cmd": "ls"}), ts=2, turn=None),
        Record(body=ToolResult(call_id="c1", tool="bash", status="ok", output="é" * 3000), ts=3, turn=None),
    ]


def test_ledger_header_and_segment_bytes_follow_ledger_format_md(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id="a1") as ledger:
        for record in _records():
            ledger.append(record)
        head = ledger.head()

    header = json.loads((tmp_path / "l" / "holon-ledger.json").read_text())
    genesis = blake3.blake3(b"holon-ledger/genesis/v1\x00" + b"a1").digest()
    assert header == {
        "format": "holon-ledger",
        "format_version": 1,
        "agent_id": "a1",
        "genesis": genesis.hex(),
        "segment_bytes": 8 << 20,
        "blob_threshold": 4096,
    }

    data = (tmp_path / "l" / "segments" / ("0" * 20 + ".seg")).read_bytes()
    magic, version, reserved1, reserved2, start, prev, check = SEGMENT_HEADER.unpack_from(data)
    assert (magic, version, reserved1, reserved2, start, prev) == (b"HOLONSEG", 1, 0, 0, 0, genesis)
    assert check == xxhash.xxh3_64_intdigest(data[:56])

    at, chain, seq = 64, genesis, 0
    while at < len(data):
        n, guard, checksum = FRAME_HEAD.unpack_from(data, at)
        assert 1 <= n <= 1 << 28 and guard == n ^ 0xFFFFFFFF
        frame_prev, payload = data[at + 16 : at + 48], data[at + 48 : at + 48 + n]
        assert frame_prev == chain
        assert checksum == xxhash.xxh3_64_intdigest(frame_prev + payload, seed=n)
        envelope = msgspec.msgpack.decode(payload)
        assert list(envelope) == ["seq", "ts", "turn", "kind", "v", "body"]
        assert envelope["seq"] == seq
        chain = blake3.blake3(chain + payload).digest()
        at, seq = at + 48 + n, seq + 1
    assert at == len(data)
    assert head == (seq - 1, chain.hex())


def test_a_large_output_is_a_zstd_blob_named_by_blake3_with_a_200_char_preview(tmp_path: Path) -> None:
    output = _records()[2].body.output  # type: ignore[union-attr]
    with Ledger.create(tmp_path / "l", agent_id="a1") as ledger:
        for record in _records():
            ledger.append(record)
        stored = ledger.get(2).body
    assert isinstance(stored, ToolResult) and stored.blob is not None
    raw = output.encode()
    assert stored.output == ""
    assert stored.blob.hash == blake3.blake3(raw).hexdigest()
    assert stored.blob.size == len(raw)
    assert stored.blob.preview == output[:200]
    blob_file = tmp_path / "l" / "blobs" / stored.blob.hash[:2] / stored.blob.hash
    assert zstandard.ZstdDecompressor().decompress(blob_file.read_bytes()) == raw


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("segment_bytes", 1023),
        ("segment_bytes", (1 << 30) + 1),
        ("blob_threshold", -1),
        ("blob_threshold", (1 << 28) + 1),
    ],
)
def test_header_settings_outside_their_ranges_are_refused(tmp_path: Path, field: str, value: int) -> None:
    with pytest.raises(UsageError):
        Ledger.create(tmp_path / "l", agent_id="a1", **{field: value})
    Ledger.create(tmp_path / "ok", agent_id="a1").close()
    path = tmp_path / "ok" / "holon-ledger.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    with pytest.raises(LedgerCorrupt, match=field):
        Ledger.open(tmp_path / "ok", readonly=True)


def test_checkpoint_bytes_follow_memory_model_md() -> None:
    state = fold([_at(record, seq) for seq, record in enumerate(_records())])
    data = encode_checkpoint(state, head_hash="ab" * 32)
    assert data[:8] == b"HOLONCKP"
    (key_length,) = struct.unpack_from(">I", data, 8)  # big-endian
    key = msgspec.msgpack.decode(data[12 : 12 + key_length])
    assert key["projection_version"] == PROJECTION_VERSION
    assert key["config"] == msgspec.to_builtins(DEFAULT_CONFIG)
    assert (key["seq"], key["head_hash"]) == (state.seq, "ab" * 32)
    frame = data[12 + key_length :]
    params = zstandard.get_frame_parameters(frame)
    assert params.has_checksum
    msgspec.msgpack.decode(zstandard.ZstdDecompressor().decompress(frame))


def _at(record: Record, seq: int) -> Record:
    return msgspec.structs.replace(record, seq=seq)
