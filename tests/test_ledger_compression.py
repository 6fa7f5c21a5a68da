"""zstd frames on disk: damage, including a damaged header's content size, is LedgerCorrupt."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from holon.errors import LedgerCorrupt
from holon.ledger.compression import compress, decompress

# 102,400 bytes of a repeating pattern: a small frame whose header (zstd's default
# layout for it) is magic, descriptor 0xA0 (single segment, 4-byte content size), size.
RAW = bytes(range(256)) * 400
FRAME = compress(RAW, level=3)


def _declaring(size: int) -> bytes:
    """FRAME with its header's content size replaced by ``size``."""
    assert FRAME[4] == 0xA0 and struct.unpack_from("<I", FRAME, 5)[0] == len(RAW)
    return FRAME[:5] + struct.pack("<I", size) + FRAME[9:]


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=5000))
def test_round_trip(data: bytes) -> None:
    assert decompress(compress(data, level=3), file="f") == data


def test_a_header_that_declares_more_than_the_data_can_hold_is_corrupt_not_an_allocation() -> None:
    # The mutation the reader fuzz found: one byte inserted into the header turns the
    # content size into ~1.1e19 bytes; decompressing in one shot raised MemoryError.
    damaged = FRAME[:4] + b"\xc0" + FRAME[4:]
    with pytest.raises(LedgerCorrupt, match=r"declares [0-9,]+ bytes of content, more than") as info:
        decompress(damaged, file="seg.zst")
    assert (info.value.file, info.value.offset) == ("seg.zst", 0)


@pytest.mark.parametrize("size", [len(RAW) - 1, len(RAW) + 1, 2 * len(RAW)])
def test_a_header_that_declares_the_wrong_size_is_corrupt(size: int) -> None:
    with pytest.raises(LedgerCorrupt) as info:
        decompress(_declaring(size), file="seg.zst")
    assert info.value.file == "seg.zst" and info.value.offset is not None


def test_the_right_declared_size_decompresses() -> None:
    assert decompress(_declaring(len(RAW)), file="seg.zst") == RAW


def test_truncated_and_trailing_bytes_are_named() -> None:
    with pytest.raises(LedgerCorrupt, match="truncated") as info:
        decompress(FRAME[:-3], file="f")
    assert info.value.offset == len(FRAME) - 3
    with pytest.raises(LedgerCorrupt, match="bytes follow the end of the zstd frame") as info:
        decompress(FRAME + b"junk", file="f")
    assert info.value.offset == len(FRAME)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(FRAME) - 1), st.binary(min_size=1, max_size=8), st.sampled_from(["set", "insert"]))
# Found by this property: the descriptor byte "!" makes the header declare 0 bytes of
# content (and a dictionary), and python-zstandard's one-shot decompress returned b"".
@example(at=4, junk=b"!", how="insert")
def test_a_damaged_frame_gives_its_bytes_or_ledger_corrupt(at: int, junk: bytes, how: str) -> None:
    """Nothing but LedgerCorrupt comes out of damaged input (no MemoryError, no ZstdError)."""
    damaged = (
        FRAME[:at] + junk + FRAME[at + len(junk) :] if how == "set" else FRAME[:at] + junk + FRAME[at:]
    )
    try:
        out = decompress(damaged, file="f")
    except LedgerCorrupt as exc:
        assert exc.file == "f" and exc.offset is not None
    else:
        # zstd frames written here carry no checksum: damage inside a literal can decode
        # to other bytes, which the segment's frame checksums (or the blob hash) catch.
        assert len(out) == len(RAW)


def test_the_most_compressible_data_is_within_the_ratio_bound() -> None:
    # 64 MiB of zeros compress to ~2 KB of RLE blocks (~32,500x, near the 32,768x most):
    # the bound on declared sizes must let it through.
    for size in (1 << 17, 64 << 20):
        zeros = bytes(size)
        assert decompress(compress(zeros, level=3), file="f") == zeros
