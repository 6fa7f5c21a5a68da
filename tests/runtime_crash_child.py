"""Child process of test_runtime_crash: the example daemon, acknowledging each turn.

``python -m tests.runtime_crash_child LEDGER TURNS`` runs the example daemon until the
ledger holds TURNS turns. After each turn returns (its records flushed and fsynced) it
prints ``<turn> <head seq> <head hash>``: an acknowledgement the parent holds it to
after a SIGKILL. Tool executions are slowed down (they sleep after logging their key to
the workspace's effects log) so kills often land inside a side effect.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from holon.runtime import Agent, AgentConfig
from tests.runtime_support import load_daemon

#: The config both the child and the parent use (small checkpoint interval: kills land
#: in checkpoint writes too).
CONFIG = AgentConfig(checkpoint_every=4, checkpoints_kept=2)
TOOL_SLEEP_S = 0.015


def main(ledger: Path, turns: int) -> None:
    daemon = load_daemon()
    execute = daemon.Tools.execute

    def slow_execute(self: Any, name: str, args: dict[str, Any], key: str | None) -> tuple[str, int]:
        result: tuple[str, int] = execute(self, name, args, key)
        time.sleep(TOOL_SLEEP_S)
        return result

    daemon.Tools.execute = slow_execute

    def ack(agent: Agent, line: Any) -> None:
        seq, digest = agent.ledger.head()
        sys.stdout.write(f"{line.turn} {seq} {digest}\n")
        sys.stdout.flush()

    daemon.run(ledger, turns=turns, seed=11, quiet=True, on_turn=ack, config=CONFIG)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
