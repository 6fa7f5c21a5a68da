"""Child process of test_ledger_crash's sealing rounds: appends forever with small seek-table frames.

``python -m tests.seal_crash_child LEDGER STEP`` appends :func:`expected_record` records
with fsync ``always``, printing each acknowledged seq (flushed). Sealed segments are split
into frames of :data:`FRAME_BYTES` plain bytes (instead of 256 KiB), so each 4 KiB segment
becomes several zstd frames and a seek table, as a real 8 MiB one does.

STEP says where the kill lands (the parent sends SIGKILL):

- one of :data:`STEPS`: the sealing thread stops at that step of its next seal, prints
  ``hold <step> <start seq of the segment being sealed>`` and sleeps until killed. The
  appending thread goes on meanwhile, and may fill and start further segments before the
  kill lands (a later rollover waits for the held seal only after creating its segment);
- ``random``: every step of every seal is slowed by a small random delay (seeded by the
  pid), and the parent kills at a random moment.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Final

from holon.ledger import files, sealed, segments
from tests.ledger_crash_child import append_forever

#: Plain bytes per zstd frame of a sealed segment in the child.
FRAME_BYTES: Final = 512
#: Where a seal can be held, in the order it reaches them.
STEPS: Final = (
    # before anything of the sealed file exists
    "before_write",
    # the .zst.tmp holds part of the sealed bytes
    "tmp_partial",
    # the .zst.tmp holds all of them, not renamed yet
    "tmp_written",
    # the .zst is in place, the plain segment not removed yet
    "renamed",
    # the plain segment removed, the directory not synced yet
    "unlinked",
)
_HOLD_S: Final = 60.0


def _install(step: str) -> None:
    rng = random.Random(os.getpid())
    held = False
    sealing = -1  # the start seq of the segment the seal in progress writes

    def at(name: str) -> None:
        nonlocal held
        if step == "random":
            time.sleep(rng.random() * 0.003)
        elif step == name and not held:
            held = True
            sys.stdout.write(f"hold {name} {sealing}\n")
            sys.stdout.flush()
            time.sleep(_HOLD_S)

    write_atomic = files.write_atomic
    fsync_dir = segments.fsync_dir

    def sealing_write(path: Path, data: bytes, **options: Any) -> None:
        nonlocal sealing
        if not path.name.endswith(".zst"):  # a rollover's new segment, not a seal
            write_atomic(path, data, **options)
            return
        sealing = int(path.name.split(".")[0])  # <start seq>.seg.zst
        at("before_write")
        tmp = path.with_name(path.name + files.TMP_SUFFIX)
        if step in ("tmp_partial", "tmp_written", "random"):
            tmp.write_bytes(data[: len(data) // 2])
            at("tmp_partial")
            tmp.write_bytes(data)
            at("tmp_written")
        write_atomic(path, data, **options)
        at("renamed")

    def sealing_fsync_dir(path: Path) -> None:
        at("unlinked")
        fsync_dir(path)

    # seal_segment looks both up in holon.ledger.segments' namespace at call time.
    segments.write_atomic = sealing_write  # type: ignore[assignment]
    segments.fsync_dir = sealing_fsync_dir  # type: ignore[assignment]
    sealed.SEAL_FRAME_BYTES = FRAME_BYTES  # type: ignore[misc]


def main() -> None:
    _install(sys.argv[2])
    append_forever(sys.argv[1])


if __name__ == "__main__":
    main()
