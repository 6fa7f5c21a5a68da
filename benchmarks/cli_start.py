"""CLI start-up: how long `holon --version` and `holon --help` take, beside `python -c "import click"`.

Run: ``python -m benchmarks cli_start`` (also part of ``make bench``). Each of the three
commands runs as a new process, in turn, ROUNDS times (neighbours in time, so load from
other processes falls on every side); the figure is the median wall time. The target:
``holon --version`` within 3x the bare click import, the floor any click command pays.

Bytecode: the children run with a bytecode cache (a private ``PYTHONPYCACHEPREFIX``, filled
by one warm-up run of each command), as an installed holon runs from its ``.pyc`` files.
When the environment sets ``PYTHONDONTWRITEBYTECODE`` (this project's shared machine
does), holon's own modules are compiled again on every start; the second table measures
that too, with the environment as it is.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROUNDS = 10
TARGET_RATIO = 3.0


def _holon_command() -> list[str]:
    """The ``holon`` console script beside this interpreter, as a user runs it (else ``-m holon``)."""
    script = Path(sys.executable).with_name("holon")
    return [str(script)] if script.exists() else [sys.executable, "-m", "holon"]


def _commands() -> dict[str, list[str]]:
    holon = _holon_command()
    return {
        'python -c "import click"': [sys.executable, "-c", "import click"],
        "holon --version": [*holon, "--version"],
        "holon --help": [*holon, "--help"],
    }


def _wall_times(commands: Mapping[str, Sequence[str]], env: Mapping[str, str]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(ROUNDS):
        for name, argv in commands.items():
            started = time.perf_counter()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - started)
    return times


def _report(title: str, times: Mapping[str, list[float]]) -> None:
    click_median = statistics.median(times['python -c "import click"'])
    print(title)
    print(f"  {'command':<28} {'median':>8} {'min':>8} {'x import click':>15}")
    for name, samples in times.items():
        median = statistics.median(samples)
        ratio = median / click_median
        print(f"  {name:<28} {median * 1000:>6.0f}ms {min(samples) * 1000:>6.0f}ms {ratio:>14.2f}x")
    ratio = statistics.median(times["holon --version"]) / click_median
    status = "met" if ratio <= TARGET_RATIO else "MISSED"
    print(f"  holon --version / import click: x{ratio:.2f} (target <= {TARGET_RATIO:g}: {status})")


def main() -> None:
    commands = _commands()
    cache = tempfile.mkdtemp(prefix="holon-bench-pycache-")
    try:
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = cache
        for argv in commands.values():  # the warm-up run writes the bytecode
            subprocess.run(argv, env=cached, stdout=subprocess.DEVNULL, check=True)
        print(f"{ROUNDS} runs of each, in turn; {' '.join(commands['holon --version'][:-1])}")
        _report("with a bytecode cache (as installed):", _wall_times(commands, cached))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        _report(
            "as this environment runs it (PYTHONDONTWRITEBYTECODE set: holon's modules compile each start):",
            _wall_times(commands, os.environ),
        )


if __name__ == "__main__":
    main()
