"""holon.ledger: the durable, append-only, hash-chained record log of one agent.

>>> with Ledger.create(path, agent_id="a1", fsync="batch") as ledger:  # doctest: +SKIP
...     with ledger.batch():
...         seq = ledger.append(Record(body=Message(role="user", text="hi"), ts=0))
...     ledger.head()

See docs/ledger-format.md for the on-disk format, the chain, recovery and fsync rules.
"""

from holon.ledger.blobs import BlobStore
from holon.ledger.files import TMP_SUFFIX
from holon.ledger.frames import TornTail, decode_frame, encode_frame
from holon.ledger.header import HEADER_NAME, SETTING_RANGES, interrupted_create
from holon.ledger.jsonl import blobs_dir_for, export_jsonl, import_jsonl
from holon.ledger.recovery import RecoveryAction
from holon.ledger.repair import DamagedTail, cut_tail, inspect_tail
from holon.ledger.segments import FORMAT_VERSION
from holon.ledger.store import DEFAULT_BLOB_THRESHOLD, DEFAULT_SEGMENT_BYTES, FsyncPolicy, Ledger
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
