"""The runtime as a daemon author meets it: durability between model calls.

- A tool's result recorded between two model calls of a turn was buffered until the
  turn's next tool intent or its end: ``turn.context()`` returned the held prompt
  without flushing, so a ``kill -9`` during the next model call (the longest phase of
  a turn) lost the result and the next open recorded a call that ran as ``unknown``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from holon import records as r
from holon.ledger import Ledger
from holon.runtime import Agent
from tests.runtime_support import Tick


def _on_disk(path: Path) -> list[r.Record]:
    """What another process (or the next open after a kill -9) reads of the ledger now."""
    with Ledger.open(path, readonly=True) as ledger:
        return list(ledger.read(0))


def test_a_tool_result_is_durable_before_the_next_model_call(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Agent.open(path, agent_id="rv23", clock=Tick()) as agent, agent.turn(input="deploy") as turn:
        first = turn.context()  # model call 1 asks for the deploy
        call = turn.tool("deploy", {"version": "2.4.1"}, idempotency_key="deploy:2.4.1")
        call.run(lambda: "deployed 2.4.1")
        said = turn.record_message("deployed; verifying")
        assert turn.context() is first  # model call 2: the same prompt, the rounds after it
        seen = {record.seq: record.body for record in _on_disk(path)}
        result = seen.get(call.result_seq if call.result_seq is not None else -1)
        assert isinstance(result, r.ToolResult) and result.status == "ok"
        assert said in seen
        turn.messages()  # nothing new since: nothing to flush, same prompt
        assert turn.prompts_rendered == 1


def test_a_kill_during_the_next_model_call_keeps_the_result(tmp_path: Path) -> None:
    """The crash itself: the ledger as the killed process left it, opened again."""
    path, crashed = tmp_path / "l", tmp_path / "crashed"
    with Agent.open(path, agent_id="rv23", clock=Tick()) as agent, agent.turn(input="deploy") as turn:
        turn.context()
        turn.tool("deploy", {"version": "2.4.1"}, idempotency_key="deploy:2.4.1").run(lambda: "deployed")
        turn.context()
        # kill -9 now: only what reached the OS survives (a copy of the directory, taken
        # while the writer still holds what it buffered).
        shutil.copytree(path, crashed, ignore=shutil.ignore_patterns("*.lock"))
    with Agent.open(crashed, clock=Tick()) as agent:
        assert agent.report.interrupted_turn == 1
        assert agent.report.unknown_outcomes == ()
        recorded = agent.recorded_call("deploy:2.4.1")
        assert recorded is not None and (recorded.status, recorded.output) == ("ok", "deployed")
