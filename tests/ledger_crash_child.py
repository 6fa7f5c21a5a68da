"""Child process of the crash test: appends forever with fsync ``always``, printing each acked seq.

Run as ``python -m tests.ledger_crash_child <ledger dir>``; the parent kills it with
SIGKILL. The content of each record is a pure function of its seq (``expected_record``)
so the parent can check every surviving record, whichever round wrote it.
"""

from __future__ import annotations

import sys

from holon.ledger import Ledger
from holon.records import Message, Record, ToolResult


def expected_record(seq: int) -> Record:
    """The record the crash child appends at ``seq`` (before blob moving)."""
    if seq % 9 == 4:
        output = "".join(f"{seq}: output line {n}\n" for n in range(400))  # over the blob threshold
        body: Message | ToolResult = ToolResult(call_id=f"c{seq}", tool="bash", status="ok", output=output)
    else:
        body = Message(role="assistant", text=f"message {seq} " * (seq % 13 + 1))
    return Record(body=body, ts=seq, turn=seq // 5)


def append_forever(path: str) -> None:
    """Append ``expected_record``s with fsync ``always``, printing each acknowledged seq."""
    with Ledger.open(path, fsync="always") as ledger:
        seq = ledger.head()[0] + 1
        while True:
            got = ledger.append(expected_record(seq))
            assert got == seq
            sys.stdout.write(f"{seq}\n")
            sys.stdout.flush()
            seq += 1


def main() -> None:
    append_forever(sys.argv[1])


if __name__ == "__main__":
    main()
