"""The ledger's sizes: the largest frame payload, and the header settings' defaults and ranges.

Constants only, importing nothing: the ``holon`` command declares ``--blob-threshold``
(its default and range) at every start, ``holon --help`` included, without loading the
frame codec, the hash functions, zstd and the header code that use them.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_BLOB_THRESHOLD", "DEFAULT_SEGMENT_BYTES", "MAX_PAYLOAD", "SETTING_RANGES"]

#: Largest payload a frame may carry. Large tool outputs go to the blob store, so a
#: length beyond this is damage, not data; writers refuse such a record before writing
#: anything (:func:`~holon.ledger.frames.oversized_payload`), or the reader would take it
#: for damage.
MAX_PAYLOAD: Final = 1 << 28
DEFAULT_SEGMENT_BYTES: Final = 8 << 20
DEFAULT_BLOB_THRESHOLD: Final = 4096
#: The values of the header's settings that ``Ledger.create`` accepts and ``read_header``
#: accepts: the same ranges on both sides, so every ledger holon makes opens and a
#: hand-edited value outside them is refused instead of used. segment_bytes: below 1 KiB
#: nearly every record would start a segment; above 1 GiB a segment (read whole, and
#: compressed in one piece when sealed) outgrows memory. blob_threshold: an inline output
#: longer than the largest frame payload could never be written.
SETTING_RANGES: Final[dict[str, tuple[int, int]]] = {
    "segment_bytes": (1 << 10, 1 << 30),
    "blob_threshold": (0, MAX_PAYLOAD),
}
