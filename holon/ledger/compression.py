"""zstd for sealed segments and blobs: compress with the content size, decompress safely.

Everything read from disk may be damaged, and a damaged zstd frame header can declare any
content size: decompressing it in one shot would allocate that much (a flipped bit asks
for exabytes and ends in ``MemoryError``). :func:`decompress` checks the declared size
against what the compressed bytes can hold, decompresses in one shot only up to a
bounded size, streams beyond it, and insists the output is exactly the declared size —
so damage always surfaces as :class:`~holon.errors.LedgerCorrupt` with the file and
an offset near it.
"""

from __future__ import annotations

from typing import Final

import zstandard

from holon.errors import LedgerCorrupt

__all__ = ["compress", "decompress"]

#: Compressed bytes are fed to the streaming decoder this many at a time, so damage is
#: reported within one chunk of where it is.
_CHUNK: Final = 1 << 16
#: The most output one compressed byte can stand for: a zstd RLE block of 4 bytes
#: (3 of header) repeats one byte up to the 128 KiB block size.
_MAX_RATIO: Final = 1 << 15
#: Larger declared sizes are decompressed by streaming, which allocates only what the
#: data really holds; a damaged size then fails the length check instead of allocating.
_ONE_SHOT_MAX: Final = 1 << 28


def compress(data: bytes | memoryview, *, level: int) -> bytes:
    """One zstd frame holding ``data``, with its content size in the header."""
    return zstandard.ZstdCompressor(level=level, write_content_size=True).compress(data)


def decompress(data: bytes | memoryview, *, file: str, base: int = 0) -> bytes:
    """The bytes of the single zstd frame ``data`` (read from ``file``); damage raises LedgerCorrupt.

    ``base``: the offset of ``data`` in ``file`` (one frame of a sealed segment's several),
    added to every offset an error names.
    """
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        declared = -1  # no readable header: the streaming decoder says where it breaks
    if declared > len(data) * _MAX_RATIO:
        raise LedgerCorrupt(
            f"the zstd frame header declares {declared:,} bytes of content, more than "
            f"{len(data):,} compressed bytes can hold: the header is damaged",
            file=file,
            offset=base,
        )
    # Not for a declared size of 0: python-zstandard then returns b"" without decoding the
    # frame at all, so a damaged header that reads as "0 bytes" would pass unnoticed.
    if 0 < declared <= _ONE_SHOT_MAX:
        try:
            # One shot is fastest; the frame header carries the content size we wrote.
            return zstandard.ZstdDecompressor().decompress(data, allow_extra_data=False)
        except zstandard.ZstdError:
            pass
    return _decompress_locating_damage(data, file=file, declared=declared, base=base)


def _decompress_locating_damage(data: bytes | memoryview, *, file: str, declared: int, base: int) -> bytes:
    """Decompress chunk by chunk so that damage is reported near where it is.

    ``declared`` is the header's content size (``-1``: none): the output may not pass it
    and must end exactly at it.
    """
    out: list[bytes] = []
    produced = 0
    decomp = zstandard.ZstdDecompressor().decompressobj()
    for start in range(0, len(data), _CHUNK):
        end = min(start + _CHUNK, len(data))
        try:
            chunk = decomp.decompress(data[start:end])
        except zstandard.ZstdError as exc:
            raise LedgerCorrupt(
                f"zstd data does not decompress ({exc}); "
                f"the damage is within compressed bytes {base + start}..{base + end}",
                file=file,
                offset=base + start,
            ) from None
        produced += len(chunk)
        if 0 <= declared < produced:
            raise LedgerCorrupt(
                f"zstd data decompresses to more than the {declared:,} bytes its header declares; "
                f"the damage is at or before compressed bytes {base + start}..{base + end}",
                file=file,
                offset=base + start,
            )
        out.append(chunk)
        if decomp.eof and (end < len(data) or decomp.unused_data):
            at = end - len(decomp.unused_data)
            raise LedgerCorrupt("bytes follow the end of the zstd frame", file=file, offset=base + at)
    if not decomp.eof:
        raise LedgerCorrupt(
            "zstd data is truncated (the frame never ends)", file=file, offset=base + len(data)
        )
    if declared >= 0 and produced != declared:
        raise LedgerCorrupt(
            f"zstd data decompresses to {produced:,} bytes, not the {declared:,} its header declares",
            file=file,
            offset=base,
        )
    return b"".join(out)
