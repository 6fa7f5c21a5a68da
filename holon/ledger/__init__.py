"""holon.ledger: the durable, append-only, hash-chained record log of one agent.

>>> with Ledger.create(path, agent_id="a1", fsync="batch") as ledger:  # doctest: +SKIP
...     with ledger.batch():
...         seq = ledger.append(Record(body=Message(role="user", text="hi"), ts=0))
...     ledger.head()

See docs/ledger-format.md for the on-disk format, the chain, recovery and fsync rules.

The storage layer: it may import :mod:`holon.records`, :mod:`holon.errors`, msgspec,
zstandard, blake3 and xxhash, and knows nothing of projections or prompts
(``tests/test_layers.py``). :class:`Ledger` (``store.py``) is a facade over parts with one
job each, which meet only there and share only the writer's position (``tip.py``):
``writer.py`` (appends, group commit, rollover, sealing), ``reader.py`` (scans and get by
seq) with ``index.py`` (the active segment's frame offsets) and ``seek.py`` (sealed
segments' seek tables and frames). Below them, one module per file format or concern:
``frames``, ``segments``, ``sealed``, ``compression``, ``blobs``, ``header``, ``lock``,
``files``, ``sizes``; ``recovery`` and ``verify`` walk a whole ledger, and ``jsonl`` and
``repair`` work through a ``Ledger``.

Each name is imported from its module on first use (PEP 562): the command line reads
``SETTING_RANGES`` (from the constants-only ``sizes`` module) for its ``--help`` without
loading the frame codec or the store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # what type checkers and IDEs read; at run time __getattr__ resolves these
    from holon.ledger.blobs import BlobStore
    from holon.ledger.files import TMP_SUFFIX
    from holon.ledger.frames import TornTail, decode_frame, encode_frame
    from holon.ledger.header import HEADER_NAME, interrupted_create
    from holon.ledger.jsonl import blobs_dir_for, export_jsonl, import_jsonl
    from holon.ledger.recovery import RecoveryAction
    from holon.ledger.repair import DamagedTail, cut_tail, inspect_tail
    from holon.ledger.segments import FORMAT_VERSION
    from holon.ledger.sizes import DEFAULT_BLOB_THRESHOLD, DEFAULT_SEGMENT_BYTES, SETTING_RANGES
    from holon.ledger.store import FsyncPolicy, Ledger
    from holon.ledger.verify import Problem, VerifyReport

__all__ = [
    "DEFAULT_BLOB_THRESHOLD",
    "DEFAULT_SEGMENT_BYTES",
    "FORMAT_VERSION",
    "HEADER_NAME",
    "SETTING_RANGES",
    "TMP_SUFFIX",
    "BlobStore",
    "DamagedTail",
    "FsyncPolicy",
    "Ledger",
    "Problem",
    "RecoveryAction",
    "TornTail",
    "VerifyReport",
    "blobs_dir_for",
    "cut_tail",
    "decode_frame",
    "encode_frame",
    "export_jsonl",
    "import_jsonl",
    "inspect_tail",
    "interrupted_create",
]

#: Module -> the names of ``__all__`` it defines, imported on first use.
_HOMES: Final[dict[str, tuple[str, ...]]] = {
    "holon.ledger.blobs": ("BlobStore",),
    "holon.ledger.files": ("TMP_SUFFIX",),
    "holon.ledger.frames": (
        "TornTail",
        "decode_frame",
        "encode_frame",
    ),
    "holon.ledger.header": ("HEADER_NAME", "interrupted_create"),
    "holon.ledger.jsonl": (
        "blobs_dir_for",
        "export_jsonl",
        "import_jsonl",
    ),
    "holon.ledger.recovery": ("RecoveryAction",),
    "holon.ledger.repair": (
        "DamagedTail",
        "cut_tail",
        "inspect_tail",
    ),
    "holon.ledger.segments": ("FORMAT_VERSION",),
    "holon.ledger.sizes": ("DEFAULT_BLOB_THRESHOLD", "DEFAULT_SEGMENT_BYTES", "SETTING_RANGES"),
    "holon.ledger.store": (
        "FsyncPolicy",
        "Ledger",
    ),
    "holon.ledger.verify": (
        "Problem",
        "VerifyReport",
    ),
}
_HOME_OF: Final = {name: module for module, names in _HOMES.items() for name in names}


if not TYPE_CHECKING:  # hidden from type checkers, which would accept any name through it

    def __getattr__(name: str) -> object:
        module = _HOME_OF.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups find it without calling __getattr__ again
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
