"""Child process of the concurrency test: reads a ledger while another process writes it.

``python -m tests.ledger_reader_child <ledger dir> <count>`` polls with a read-only
ledger until ``count`` records are visible, checking on every pass that what it sees is
a gapless, verified prefix with the expected content, then prints the head.
"""

from __future__ import annotations

import sys
import time

from holon.ledger import Ledger
from tests.ledger_support import message


def main() -> None:
    path, count = sys.argv[1], int(sys.argv[2])
    seen = 0
    passes = 0
    with Ledger.open(path, readonly=True) as reader:
        print("ready", flush=True)
        while seen < count:
            passes += 1
            for record in reader.read(seen):
                expected = message(record.seq, 150)
                if record.seq != seen or record.body != expected.body:
                    print(f"MISMATCH at seq {record.seq} (expected {seen})", flush=True)
                    sys.exit(1)
                seen += 1
            if seen < count:
                time.sleep(0.001)  # politeness while polling; correctness does not depend on it
        seq, digest = reader.head()
    print(f"{seq} {digest} {passes}", flush=True)


if __name__ == "__main__":
    main()
