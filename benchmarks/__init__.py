"""holon's benchmarks: ``python -m benchmarks`` (``make bench``) runs every suite; see docs/benchmarks.md."""

from __future__ import annotations

import os


def bench_dir() -> str | None:
    """The directory ``HOLON_BENCH_DIR`` names for the suites' ledgers, or ``None`` (the temp directory).

    The variable chooses the file system whose flushes the ledger figures measure. A path
    that is not an existing, writable directory is refused with a message, not created:
    under a mount point that is missing it would be made on another disk and measured there
    without a word.
    """
    value = os.environ.get("HOLON_BENCH_DIR")
    if not value:
        return None
    if os.path.exists(value) and not os.path.isdir(value):
        problem = "is not a directory: name a directory on the file system to measure"
    elif not os.path.isdir(value):
        problem = f"does not exist: create it (mkdir -p {value}) on the file system to measure"
    elif not os.access(value, os.W_OK | os.X_OK):
        problem = "is not writable by this user"
    else:
        return value
    raise SystemExit(
        f"python -m benchmarks: HOLON_BENCH_DIR={value} {problem}, or unset HOLON_BENCH_DIR to write in "
        "the temporary directory"
    )
