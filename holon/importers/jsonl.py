"""Import holon's own canonical JSONL form (one record per line, as ``holon export`` writes).

Each line is decoded and validated by :func:`holon.records.decode_json_record`; the
envelope's ``seq`` is reset to -1 because the ledger being appended to assigns its own.
Everything else (``ts``, ``turn``, the body) is kept exactly, so export then import is
lossless.
"""

from __future__ import annotations

from typing import Final

import msgspec

from holon.errors import InvalidRecord
from holon.importers._builder import ImportReport
from holon.importers._shape import not_utf8
from holon.records import Record, decode_json_record

__all__ = ["FORMAT", "parse_jsonl"]

FORMAT: Final = "jsonl"
_BOM: Final = b"\xef\xbb\xbf"


def parse_jsonl(data: bytes, *, source: str) -> ImportReport:
    """Decode a canonical holon JSONL file's bytes into records ready to append."""
    records: list[Record] = []
    # A leading byte order mark (a file re-saved by a Windows tool) is ignored, as in every format.
    for number, line in enumerate(data.removeprefix(_BOM).split(b"\n"), start=1):
        if not line.strip():
            continue
        where = f"line {number} of {source}"
        reason = not_utf8(line)
        if reason is not None:
            raise InvalidRecord(reason, where=where)
        try:
            record = decode_json_record(line, where=where)
        except RecursionError:
            # decode_json_record lets this escape; an importer promises only InvalidRecord.
            raise InvalidRecord("JSON nested too deeply", where=where) from None
        records.append(msgspec.structs.replace(record, seq=-1))
    return ImportReport(format=FORMAT, source=source, records=tuple(records))
