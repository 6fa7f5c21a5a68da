"""Opening a wait or starting a task under an id that is still open is refused.

The fold replaces an open wait or running task redeclared under the same id: the first
one's ``waiting_on`` / description left the prompt without a trace, and one resolution
(or result) then ended both. A daemon mapping a model's tools onto these methods reuses
ids easily (a model repeats "qa" or "build"), so the named methods refuse it before
anything is appended; ``turn.record(body)`` stays the deliberate way to replace one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holon import records as r
from holon.errors import InvalidRecord
from holon.runtime import Agent
from tests.runtime_support import Tick
from tests.test_runtime_review4 import _refused


def _agent(path: Path) -> Agent:
    return Agent.open(path, agent_id="rv5", clock=Tick())


def test_opening_a_wait_that_is_open_is_refused_and_the_first_wait_stays(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="go") as turn:
            seq = turn.wait_for("qa", "QA sign-off on 2.4.1")
        with agent.turn(input="more") as turn:
            _refused(
                agent,
                lambda: turn.wait_for("qa", "QA sign-off on 2.5.0"),
                "turn.wait_for('qa')",
                f"wait 'qa' is already open (waiting on 'QA sign-off on 2.4.1' since seq {seq})",
                "turn.resolve_wait('qa')",
                "turn.record(holon.records.WaitingIntent(id='qa', ...))",
            )
            assert agent.state.waits["qa"].waiting_on == "QA sign-off on 2.4.1"


def test_a_wait_id_can_be_reused_once_resolved(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.wait_for("qa", "QA sign-off on 2.4.1")
        turn.resolve_wait("qa", resolution="cancelled")
        turn.wait_for("qa", "QA sign-off on 2.5.0")
        assert agent.state.waits["qa"].waiting_on == "QA sign-off on 2.5.0"


def test_starting_a_task_that_is_running_is_refused_and_the_first_task_stays(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        seq = turn.start_task("build", "build the wheel")
        _refused(
            agent,
            lambda: turn.start_task("build", "build the docs"),
            "turn.start_task('build')",
            f"task 'build' is already running ('build the wheel', started at seq {seq})",
            "turn.task_result('build', ...)",
            "turn.record(holon.records.TaskStarted(id='build', ...))",
        )
        assert agent.state.tasks["build"].description == "build the wheel"


def test_a_task_id_can_be_reused_once_it_rejoined(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.start_task("build", "build the wheel")
        turn.task_result("build", status="ok", summary="built")
        turn.start_task("build", "build the docs")
        assert agent.state.tasks["build"].description == "build the docs"


def test_turn_record_still_replaces_an_open_wait_or_running_task(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.wait_for("qa", "QA sign-off on 2.4.1")
        turn.start_task("build", "build the wheel")
        turn.record(r.WaitingIntent(id="qa", waiting_on="QA sign-off on 2.5.0"))
        turn.record(r.TaskStarted(id="build", description="build the docs"))
        assert agent.state.waits["qa"].waiting_on == "QA sign-off on 2.5.0"
        assert agent.state.tasks["build"].description == "build the docs"


def test_a_tool_call_with_a_blank_name_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        seq = agent.seq
        for name in ("", "   ", None):
            with pytest.raises(InvalidRecord) as info:
                turn.tool(name, {"cmd": "ls"})  # type: ignore[arg-type]
            assert info.value.field == "body.tool"
            assert "is blank; a call names the tool it runs" in str(info.value)
        assert agent.seq == seq
        assert turn.tool("bash", {"cmd": "ls"}).run(lambda: "ok").output == "ok"


def test_a_blob_stored_output_is_read_back_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Finishing a call read its blob-stored output back twice (the round's content and its
    # token count), and every `call.output` read, hashed and decoded it again.
    big = "".join(f"line {i}: copied rows\n" for i in range(2_000))  # over the 4 KiB blob threshold
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        reads: list[str] = []
        get_blob = agent.ledger.get_blob

        def counted(blob_hash: str) -> bytes:
            reads.append(blob_hash)
            return get_blob(blob_hash)

        monkeypatch.setattr(agent.ledger, "get_blob", counted)
        call = turn.tool("bash", {"cmd": "migrate"}, idempotency_key="k")
        call.run(lambda: big)
        assert call.result is not None and call.result.blob is not None
        assert call.output == big and call.output == big
        assert reads == []  # finish knew the text it stored
        again = turn.tool("bash", {"cmd": "migrate"}, idempotency_key="k")
        assert again.replayed
        assert again.output == big and again.output == big
        assert len(reads) == 1  # a replayed call reads its output back once
