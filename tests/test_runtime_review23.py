"""The runtime as a daemon author meets it: durability between model calls, checkpoint pruning.

- A tool's result recorded between two model calls of a turn was buffered until the
  turn's next tool intent or its end: ``turn.context()`` returned the held prompt
  without flushing, so a ``kill -9`` during the next model call (the longest phase of
  a turn) lost the result and the next open recorded a call that ran as ``unknown``.
- A checkpoint past the ledger's head (left by a cut: ``holon repair --cut-at``, a torn
  tail under ``fsync="never"``) can never be used again, but pruning kept the newest by
  seq: with ``checkpoints_kept=1`` each checkpoint the agent wrote was deleted at once,
  and every open folded the whole ledger.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from holon import records as r
from holon.ledger import Ledger
from holon.runtime import CHECKPOINT_DIR, Agent, AgentConfig
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


def _turns(agent: Agent, n: int) -> None:
    for i in range(n):
        with agent.turn(input=f"step {i}") as turn:
            turn.context()
            turn.record_message(f"done {i}")


def test_a_checkpoint_past_the_head_is_pruned_not_the_new_one(tmp_path: Path) -> None:
    config = AgentConfig(checkpoint_every=1, checkpoints_kept=1)
    path, later = tmp_path / "l", tmp_path / "later"
    with Agent.open(path, agent_id="rv23", config=config, clock=Tick()) as agent:
        _turns(agent, 2)
    shutil.copytree(path, later)
    with Agent.open(later, config=config, clock=Tick()) as agent:
        _turns(agent, 3)
    # The ledger as it was after turn 2, with the checkpoints of turn 5: what a cut leaves.
    shutil.rmtree(path / CHECKPOINT_DIR)
    shutil.copytree(later / CHECKPOINT_DIR, path / CHECKPOINT_DIR)
    with Agent.open(path, config=config, clock=Tick()) as agent:
        assert [reason.reason for _name, reason in agent.report.rejected] == ["ledger_shorter"]
        with agent.turn(input="go on") as turn:
            turn.context()
        assert turn.summary is not None
        written = turn.summary.checkpoint_seq
        assert written == agent.seq
        stems = sorted(p.name for p in (path / CHECKPOINT_DIR).iterdir())
        assert stems == [f"{written:012d}{suffix}" for suffix in (".ckpt", ".episodes", ".tools")]
    with Agent.open(path, config=config, clock=Tick()) as agent:
        assert agent.report.rejected == ()
        assert (agent.report.checkpoint_seq, agent.report.folded) == (written, 0)
