"""The Agent facade: turns, prompts, the tool write-ahead log, checkpoints and resume."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.context import Budget, get_estimator
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.projections import verify_derivations
from holon.replay import prompt_at
from holon.runtime import Agent, AgentConfig
from holon.runtime.checkpoints import CHECKPOINT_DIR, list_checkpoints
from tests.cli_support import tree_bytes
from tests.runtime_support import Tick, fold_ledger

POLICY = r.SystemPolicy(
    text="You are a test agent.",
    tools=(r.ToolDefinition(name="bash", description="run a command"),),
)
CONFIG = AgentConfig(checkpoint_every=3, checkpoints_kept=2)


def _open(path: Path, config: AgentConfig = CONFIG, **kw: object) -> Agent:
    return Agent.open(path, agent_id="t1", config=config, clock=Tick(), policy=POLICY, **kw)  # type: ignore[arg-type]


def _work_turns(agent: Agent, n: int) -> None:
    for i in range(n):
        with agent.turn(input=f"step {i}") as turn:
            if agent.state.active_work_item is None:
                turn.add_work_item("W1", "build the parser", state="active")
            turn.record_plan(
                [
                    r.PlanStep(id=f"s{j}", text=f"step {j}", status="done" if j < i else "pending")
                    for j in range(n)
                ]
            )
            turn.context()
            call = turn.tool("bash", {"cmd": f"echo {i}"}, idempotency_key=f"echo-{i}")
            call.run(lambda i=i: (f"{i}\n", 0))  # type: ignore[misc]
            turn.record_message(f"did step {i}")


def test_a_turn_records_its_boundaries_input_prompt_and_derived_memory(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        assert agent.report.created
        with agent.turn(input="please build the parser", trigger="operator", role="operator") as turn:
            turn.add_work_item("W1", "build the parser", state="active", delivery_target="src/parser.py")
            turn.record_plan([r.PlanStep(id="s1", text="write the grammar")])
            prompt = turn.context()
            assert "please build the parser" in prompt.text
            turn.record_message("on it")
        assert turn.summary is not None and turn.summary.outcome == "completed"
        assert turn.summary.deltas, "the new work item changes working memory"
        kinds = [rec.kind for rec in agent.ledger.read(0)]
        assert kinds[:1] == ["system_policy"]
        assert kinds[1:] == [
            "turn_started",
            "message",
            "work_item",
            "work_plan",
            "prompt_rendered",
            "message",
            "turn_ended",
            "working_memory_delta",
        ]
        assert agent.working_memory.active_work_item_id == "W1"
        assert agent.memory.pending is not None  # shown by the next prompt, which confirms it
        with agent.turn(input="continue") as turn:
            prompt = turn.context()
            assert prompt.section("pending_delta") is not None
        assert agent.memory.pending is None
        assert agent.memory.revision == agent.state.last_prompt.prompt.working_memory_revision  # type: ignore[union-attr]


def test_messages_are_the_context_then_this_turns_rounds_append_only(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent, agent.turn(input="count files") as turn:
        first = turn.messages()
        assert [m["role"] for m in first] == ["system", "user"]
        assert "count files" in first[1]["content"]
        turn.tool("bash", {"cmd": "ls | wc -l"}).run(lambda: ("3\n", 0))
        second = turn.messages()
        turn.record_message("there are 3 files")
        third = turn.messages()
        assert second[: len(first)] == first and third[: len(second)] == second
        assert second[-1]["role"] == "tool" and second[-1]["content"] == "3\n"
        assert third[-1] == {"role": "assistant", "content": "there are 3 files"}
        turn.record_plan([r.PlanStep(id="s1", text="count the files", status="done")])
        fourth = turn.messages()
        assert fourth[: len(third)] == third
        assert fourth[-1]["role"] == "assistant" and "[x] s1: count the files" in fourth[-1]["content"]
        assert turn.context() is turn.context()  # rendered once while the rounds fit
        assert turn.prompts_rendered == 1
    prompts = [rec for rec in agent.ledger.read(0) if rec.kind == "prompt_rendered"]
    assert len(prompts) == 1


def test_a_call_finished_before_the_first_prompt_is_in_the_prompt_not_in_the_rounds(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent, agent.turn(input="look around") as turn:
        turn.tool("bash", {"cmd": "ls"}).run(lambda: ("a.txt\n", 0))
        turn.record_message("I looked")
        messages = turn.messages()
        assert [m["role"] for m in messages] == ["system", "user"]
        assert "a.txt" in messages[1]["content"] and "I looked" in messages[1]["content"]


def test_rounds_that_outgrow_the_budget_make_the_prompt_render_again(tmp_path: Path) -> None:
    config = AgentConfig(budget=Budget(context_window=6_000, output_reserve=1_000), checkpoint_every=0)
    with _open(tmp_path / "l", config) as agent, agent.turn(input="read the logs") as turn:
        first = turn.context()
        held = first
        renders = [first]
        for i in range(12):
            output = "".join(f"log line {i}.{j} status ok\n" for j in range(60))  # ~700 tokens
            turn.tool("bash", {"cmd": f"cat log{i}"}).run(lambda output=output: (output, 0))  # type: ignore[misc]
            prompt = turn.context()
            messages = turn.messages()
            if prompt is not held:
                # Rendered again: this turn's calls are now history, and the rounds start over.
                renders.append(prompt)
                held = prompt
                assert [m["role"] for m in messages] == ["system", "user"]
                assert f"cat log{i}" in prompt.text
            # What the next model call is sent always fits the budget.
            sent = prompt.total_tokens + sum(
                get_estimator().count(str(m["content"])) + 1 for m in messages[2:]
            )
            assert sent <= config.budget.available
        assert len(renders) >= 2 and turn.prompts_rendered == len(renders)
        assert all(p.total_tokens <= config.budget.available for p in renders)
    records = list(agent.ledger.read(0))
    prompts = [rec for rec in records if rec.kind == "prompt_rendered"]
    assert len(prompts) == len(renders)
    # Every one of them is reproducible from the ledger, byte for byte (`holon render --call`).
    for call, _record in enumerate(prompts, 1):
        again = prompt_at(records, 1, agent_id="t1", call=call)
        assert again.matches and again.prompt.text == renders[call - 1].text


def test_the_intent_is_on_disk_before_the_side_effect_runs(tmp_path: Path) -> None:
    path = tmp_path / "l"
    seen: list[r.Record] = []

    def side_effect() -> str:
        with Ledger.open(path, readonly=True) as reader:
            seen.append(list(reader.read(0))[-1])
        return "done"

    with _open(path) as agent, agent.turn(input="go") as turn:
        call = turn.tool("deploy", {"env": "staging"}, idempotency_key="deploy-1")
        result = call.run(side_effect)
    assert isinstance(seen[0].body, r.ToolIntent) and seen[0].body.idempotency_key == "deploy-1"
    assert result.status == "ok" and result.output == "done"


def test_a_retry_with_the_same_idempotency_key_returns_the_recorded_result(tmp_path: Path) -> None:
    runs: list[int] = []
    with _open(tmp_path / "l") as agent:
        with agent.turn(input="a") as turn:
            turn.tool("charge", {"amount": 5}, idempotency_key="charge-42").run(
                lambda: str(runs.append(1) or "charged")
            )
        before = agent.seq
        with agent.turn(input="again") as turn:
            call = turn.tool("charge", {"amount": 5}, idempotency_key="charge-42")
            assert call.replayed and call.done
            assert call.run(lambda: str(runs.append(2) or "twice")).output == "charged"
            with pytest.raises(UsageError, match="replayed"):
                call.finish("x")
        intents = [rec for rec in agent.ledger.read(before + 1) if rec.kind == "tool_intent"]
    assert runs == [1] and intents == []


def test_retrying_a_key_whose_call_is_in_flight_is_refused(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent, agent.turn(input="a") as turn:
        call = turn.tool("bash", {"cmd": "sleep 1"}, idempotency_key="k")
        with pytest.raises(UsageError, match="in flight"):
            turn.tool("bash", {"cmd": "sleep 1"}, idempotency_key="k")
        call.finish("slept")


def test_large_outputs_go_to_the_blob_store(tmp_path: Path) -> None:
    big = "line of output\n" * 2000
    with _open(tmp_path / "l") as agent:
        with agent.turn(input="dump") as turn:
            call = turn.tool("cat", {"path": "big.log"}, idempotency_key="cat")
            result = call.run(lambda: big)
            assert result.blob is not None and result.output == ""
            assert call.output == big
        stored = [rec.body for rec in agent.ledger.read(0) if isinstance(rec.body, r.ToolResult)]
        assert stored[0].blob is not None and agent.ledger.get_blob(stored[0].blob.hash).decode() == big
        with agent.turn(input="dump again") as turn:
            assert turn.tool("cat", {"path": "big.log"}, idempotency_key="cat").output == big


def test_an_exception_fails_the_turn_and_the_call_and_is_reraised(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        with (
            pytest.raises(RuntimeError, match="disk full"),
            agent.turn(input="write") as turn,
            turn.tool("write", {"path": "a.txt"}),
        ):
            raise RuntimeError("disk full")
        records = list(agent.ledger.read(0))
        result = next(rec.body for rec in records if isinstance(rec.body, r.ToolResult))
        ended = next(rec.body for rec in records if isinstance(rec.body, r.TurnEnded))
        assert result.status == "error" and "disk full" in result.output
        assert ended.outcome == "failed" and ended.error is not None and "disk full" in ended.error
        assert agent.current_turn is None
        with agent.turn(input="next") as turn:  # the agent goes on
            turn.record_message("recovered")


def test_a_call_left_without_a_result_is_recorded_as_unknown(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        with (
            pytest.raises(UsageError, match="without finish"),
            agent.turn(input="x") as turn,
            turn.tool("a", {}),
        ):
            pass
        with agent.turn(input="y") as turn:
            turn.tool("b", {})  # never finished: the turn end records it
        statuses = [
            (rec.body.tool, rec.body.status)
            for rec in agent.ledger.read(0)
            if isinstance(rec.body, r.ToolResult)
        ]
        assert statuses == [("a", "unknown"), ("b", "unknown")]


def test_the_daemon_may_record_an_unknown_outcome_itself(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        with agent.turn(input="deploy") as turn:
            call = turn.tool("deploy", {"version": "2.4.1"}, idempotency_key="deploy:2.4.1")
            call.finish("request sent; no answer within 30 s", status="unknown")
        (unknown,) = agent.unknown_outcomes()
        assert (unknown.call_id, unknown.tool) == (call.call_id, "deploy")
        with agent.turn(input="retry") as turn:  # a retry of the key does not run it again
            again = turn.tool("deploy", {"version": "2.4.1"}, idempotency_key="deploy:2.4.1")
            assert again.replayed and again.result is not None and again.result.status == "unknown"


def test_waiting_turns_end_waiting(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        with agent.turn(input="deploy?") as turn:
            turn.wait_for("approval", "operator approval of the deploy")
        assert turn.summary is not None and turn.summary.outcome == "waiting"
        with agent.turn(input="approved", role="operator") as turn:
            turn.resolve_wait("approval", detail="go")
        assert agent.state.waits == {}


def test_resume_after_a_crash_closes_the_turn_and_records_unknown_outcomes(tmp_path: Path) -> None:
    path = tmp_path / "l"
    agent = _open(path)
    with agent.turn(input="ok turn") as turn:
        turn.tool("bash", {"cmd": "true"}, idempotency_key="ok").run(lambda: "")
    turn = agent.turn(input="migrate the database")
    turn.tool("migrate", {"db": "prod"}, idempotency_key="migrate-7")
    crashed_turn = turn.index
    # Closing the ledger without ending the turn leaves exactly the bytes a kill -9
    # after the intent's fsync leaves: an open turn and an intent without a result.
    agent.ledger.close()
    agent._core.closed = True

    with _open(path) as agent:
        report = agent.report
        assert report.interrupted_turn == crashed_turn
        assert [u.call_id for u in report.unknown_outcomes] == [f"c{crashed_turn}.1"]
        assert agent.unknown_outcomes() == report.unknown_outcomes
        (unknown,) = report.unknown_outcomes
        assert unknown.idempotency_key == "migrate-7" and unknown.args == {"db": "prod"}
        tail = list(agent.ledger.read(unknown.intent_seq + 1))
        assert [rec.kind for rec in tail[:2]] == ["tool_result", "turn_ended"]
        assert tail[0].body.status == "unknown"  # type: ignore[union-attr]
        assert tail[1].body.outcome == "interrupted"  # type: ignore[union-attr]
        with agent.turn(input="what happened?") as turn:
            text = turn.context().text
            assert "migrate" in text and "outcome is unknown: check its effects before retrying" in text
            assert "the previous turn was interrupted (the process stopped while it was open)" in text
            retry = turn.tool("migrate", {"db": "prod"}, idempotency_key="migrate-7")
            assert retry.replayed and retry.result is not None and retry.result.status == "unknown"
    with _open(path) as agent:  # recorded once: reopening again repairs nothing
        assert agent.report.interrupted_turn is None and agent.report.unknown_outcomes == ()
        assert len(agent.unknown_outcomes()) == 1


def test_checkpoints_are_written_every_n_turns_and_resumed_from(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with _open(path) as agent:
        _work_turns(agent, 8)
    found = list_checkpoints(path)
    assert [seq for seq, _ in found] and len(found) == CONFIG.checkpoints_kept
    cold, _ = fold_ledger(path, CONFIG)

    with _open(path) as agent:
        assert agent.report.checkpoint_seq == found[0][0]
        assert agent.report.folded == cold.seq - found[0][0]
        assert agent.projection == cold
        with agent.turn(input="after resume") as turn:
            assert turn.tool("bash", {"cmd": "echo 3"}, idempotency_key="echo-3").replayed


def test_a_sub_agents_calls_are_its_tasks_evidence_not_the_agents_calls(tmp_path: Path) -> None:
    path = tmp_path / "l"
    agent = _open(path)
    turn = agent.turn(input="delegate the search")
    turn.start_task("t1", "find the config")
    turn.context()
    rounds = len(turn.messages())
    # A sub-agent's calls ran elsewhere: recorded as its evidence, not through the tool WAL.
    turn.record(r.ToolIntent(call_id="s1", tool="Bash", args={"command": "ls"}, task_id="t1"))
    turn.record(r.ToolResult(call_id="s1", tool="Bash", status="ok", output="app.toml", task_id="t1"))
    turn.record(r.ToolIntent(call_id="s2", tool="Read", args={"path": "app.toml"}, task_id="t1"))
    turn.record(r.Message(role="assistant", text="it is app.toml", task_id="t1"))
    # The model reads the task's result, not the sub-agent's steps.
    assert len(turn.messages()) == rounds
    turn.task_result("t1", status="ok", summary="the config is app.toml")
    assert "task t1 ok: the config is app.toml" in turn.messages()[-1]["content"]
    with pytest.raises(UsageError, match=r"turn\.tool"):
        turn.record(r.ToolIntent(call_id="own", tool="Bash", args={"command": "ls"}))
    # The process dies with s2 unanswered: that is no call of this agent to recover.
    agent.ledger.close()
    agent._core.closed = True
    with _open(path) as agent:
        assert agent.report.unknown_outcomes == () and agent.unknown_outcomes() == ()
        (task,) = agent.state.finished_tasks
        assert (task.tool_calls, task.errors, task.files) == (2, 0, ("app.toml",))
        assert all(t.call_id != "s2" for t in agent.state.tools)


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_corrupt_checkpoint_is_rejected_and_an_older_one_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "l"
    with _open(path) as agent:
        _work_turns(agent, 7)
    (_newest, newest_path), (older, _) = list_checkpoints(path)
    _damage(newest_path)
    cold, _ = fold_ledger(path, CONFIG)
    with _open(path) as agent:
        assert agent.report.checkpoint_seq == older
        ((name, why),) = agent.report.rejected
        assert name == newest_path.name and why.reason == "corrupt"
        assert agent.projection == cold
    assert "rejected" in caplog.text


def test_without_a_valid_checkpoint_the_whole_ledger_is_folded(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with _open(path) as agent:
        _work_turns(agent, 7)
    for _seq, ckpt in list_checkpoints(path):
        ckpt.with_suffix(".tools").unlink()  # a checkpoint without its tool index is not trusted
    cold, _ = fold_ledger(path, CONFIG)
    with _open(path) as agent:
        assert agent.report.checkpoint_seq is None
        assert [why.reason for _, why in agent.report.rejected] == ["corrupt", "corrupt"]
        assert agent.projection == cold
        with agent.turn(input="x") as turn:  # the tool index was rebuilt by the fold
            assert turn.tool("bash", {"cmd": "echo 1"}, idempotency_key="echo-1").replayed


def test_a_checkpoint_of_another_ledger_or_config_is_rejected(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with _open(a) as agent:
        _work_turns(agent, 3)
    with Agent.open(b, agent_id="t1", config=CONFIG, clock=Tick(start=5), policy=POLICY) as agent:
        _work_turns(agent, 3)
    (seq_b, ckpt_b), *_ = list_checkpoints(b)
    (seq_a, ckpt_a), *_ = list_checkpoints(a)
    assert seq_a == seq_b  # same shape, different bytes (other timestamps)
    shutil.copy(ckpt_b, ckpt_a)
    shutil.copy(ckpt_b.with_suffix(".tools"), ckpt_a.with_suffix(".tools"))
    with _open(a) as agent:
        assert [why.reason for _, why in agent.report.rejected] == ["head_hash"]
    other = AgentConfig(checkpoint_every=3, projection=msgspec_replace_turn_cap(CONFIG))
    # b's prompts record its projection config: another one is refused outright
    # (tests/test_replay_projection_config.py). A ledger whose records state no config (no
    # prompt rendered yet) opens, and its checkpoints made under the old config are rejected.
    with pytest.raises(UsageError, match="derived under"):
        _open(b, config=other)
    c = tmp_path / "c"
    with Agent.open(c, agent_id="t1", config=CONFIG, clock=Tick(), policy=POLICY) as agent:
        for i in range(3):
            # Timer turns: no operator's request (which working memory would derive work
            # from), no prompt, nothing derived.
            with agent.turn(input=f"step {i}", trigger="timer", role="channel") as turn:
                turn.record_message(f"noted {i}")
    assert list_checkpoints(c)
    with _open(c, config=other) as agent:
        assert agent.report.rejected and all(why.reason == "config" for _, why in agent.report.rejected)
        assert agent.report.checkpoint_seq is None


def msgspec_replace_turn_cap(config: AgentConfig) -> object:
    return msgspec.structs.replace(config.projection, turn_cap=config.projection.turn_cap + 1)


def test_policy_is_recorded_once_and_timestamps_never_go_backwards(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with _open(path) as agent:
        _work_turns(agent, 2)
    readings = iter([10, 5, 1, 0] + [0] * 100)
    with Agent.open(path, config=CONFIG, clock=lambda: next(readings), policy=POLICY) as agent:
        with agent.turn(input="late") as turn:
            turn.record_message("clock went backwards")
        records = list(agent.ledger.read(0))
    assert sum(1 for rec in records if rec.kind == "system_policy") == 1
    stamps = [rec.ts for rec in records]
    assert stamps == sorted(stamps)
    assert (path / CHECKPOINT_DIR).is_dir()


def test_the_input_and_the_prompt_record_are_on_disk_before_the_model_call(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with _open(path) as agent, agent.turn(input="summarise the incident") as turn:
        turn.context()
        with Ledger.open(path, readonly=True) as reader:
            tail = [rec.kind for rec in reader.read(0)][-3:]
        assert tail == ["turn_started", "message", "prompt_rendered"]


def test_a_checkpoint_beyond_the_ledgers_end_is_rejected(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with _open(a) as agent:
        _work_turns(agent, 3)
    shutil.copytree(a, b)  # b is a's prefix: its checkpoint at turn 3 is valid for both
    with _open(a) as agent:
        for _ in range(3):
            with agent.turn(input="more") as turn:
                turn.record_message("more work")
    (newest, ckpt), *_ = list_checkpoints(a)
    shutil.copy(ckpt, b / CHECKPOINT_DIR / ckpt.name)
    shutil.copy(ckpt.with_suffix(".tools"), b / CHECKPOINT_DIR / ckpt.with_suffix(".tools").name)
    cold, _ = fold_ledger(b, CONFIG)
    with _open(b) as agent:
        ((name, why),) = agent.report.rejected
        assert name == ckpt.name and why.reason == "ledger_shorter"
        assert agent.report.checkpoint_seq is not None and agent.report.checkpoint_seq < newest
        assert agent.projection == cold


@pytest.mark.parametrize("kept", [0, 1])
def test_a_post_turn_refresh_cut_short_by_a_crash_is_completed_on_open(tmp_path: Path, kept: int) -> None:
    # A segment rollover can make a turn_ended durable before its derived records are
    # written; a crash then leaves the turn closed with fewer derived records than its
    # refresh derives. Opening appends the rest, so the ledger verifies again.
    live = tmp_path / "live"
    with _open(live) as agent:
        with agent.turn(input="start") as turn:
            turn.add_work_item("W1", "build the parser", state="active")
        with agent.turn(input="switch") as turn:
            turn.add_work_item("W2", "fix the lexer", state="active")
        summary = turn.summary
        assert summary is not None and summary.deltas and summary.episodes  # two derived records
    with Ledger.open(live, readonly=True) as ledger:
        records = list(ledger.read(0))
    ended = max(i for i, rec in enumerate(records) if rec.kind == "turn_ended")
    assert [rec.kind for rec in records[ended + 1 :]] == ["working_memory_delta", "context_episode"]

    crashed = tmp_path / "crashed"
    with Ledger.create(crashed, agent_id="t1") as ledger:
        ledger.append_many(records[: ended + 1 + kept])
    with _open(crashed) as agent:
        assert agent.report.interrupted_turn is None
        assert agent.report.completed_refresh == 2 - kept
        assert agent.seq == len(records) - 1
    _state, reopened = fold_ledger(crashed, CONFIG)
    assert [(rec.kind, rec.body) for rec in reopened] == [(rec.kind, rec.body) for rec in records]
    assert verify_derivations(reopened, config=CONFIG.projection).ok
    with _open(crashed) as agent:  # repaired once: nothing left to append
        assert agent.seq == len(records) - 1 and agent.report.completed_refresh == 0


def test_a_decision_revised_mid_turn_is_never_shown_beside_its_old_text(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        with agent.turn(input="plan the migration") as turn:
            turn.add_work_item("W1", "migrate the database", state="active")
            turn.record_decision("d1", "copy with dump and restore")
        with agent.turn(input="go on") as turn:
            first = turn.context()
            assert "copy with dump and restore" in first.text
            turn.record_decision("d1", "copy with logical replication")
            second = turn.context()
            # Working memory was refreshed before this prompt, so it was rendered again.
            assert second is not first and turn.prompts_rendered == 2
            assert "copy with logical replication" in second.text
            assert "copy with dump and restore" not in second.text
            assert [m["role"] for m in turn.messages()] == ["system", "user"]
            assert turn.context() is second  # nothing new superseded: the prompt holds
    _, records = fold_ledger(tmp_path / "l", CONFIG)
    assert verify_derivations(records, config=CONFIG.projection).ok
    deltas = [rec.body for rec in records if isinstance(rec.body, r.WorkingMemoryDelta)]
    assert any(d.reason == "superseded" for d in deltas)


def test_recovery_records_carry_the_time_of_the_crash_not_of_the_restart(tmp_path: Path) -> None:
    # A daemon that died and was restarted an hour later: the interrupted turn's end and
    # the unknown outcome are stamped with the last record's time, so the turn's duration
    # (audit `turns.duration_ms`) does not include the hour of downtime.
    path = tmp_path / "l"
    agent = _open(path)
    turn = agent.turn(input="migrate the database")
    intent_seq = turn.tool("migrate", {"db": "prod"}, idempotency_key="migrate-7").intent_seq
    assert intent_seq is not None
    crashed_at = agent.ledger.get(intent_seq).ts
    agent.ledger.close()
    agent._core.closed = True

    restarted = crashed_at + 3_600_000
    with Agent.open(path, config=CONFIG, clock=lambda: restarted) as agent:
        started = next(rec for rec in agent.ledger.read() if rec.kind == "turn_started")
        tail = list(agent.ledger.read(intent_seq + 1))
        assert [rec.kind for rec in tail[:2]] == ["tool_result", "turn_ended"]
        assert [rec.ts for rec in tail[:2]] == [crashed_at, crashed_at]
        assert tail[1].ts - started.ts < 3_600_000
        with agent.turn(input="what happened?"):
            pass
        assert agent.ledger.get(agent.seq).ts == restarted  # the next turn runs on the clock again


# ---------------------------------------------------------------- preview


def test_preview_renders_the_next_turns_prompt_for_an_input_and_appends_nothing(tmp_path: Path) -> None:
    now = [1_700_000_000_000]
    with Agent.open(
        tmp_path / "L", agent_id="t1", config=CONFIG, clock=lambda: now[0], policy=POLICY
    ) as agent:
        _work_turns(agent, 4)
        before = tree_bytes(tmp_path / "L")
        seq, revision, turn_index = agent.seq, agent.memory.revision, agent.next_turn_index
        preview = agent.preview(input="now fix the parser's unicode escapes")
        # Nothing recorded, nothing confirmed: the ledger's bytes and the agent's state are as they were.
        assert tree_bytes(tmp_path / "L") == before
        assert (agent.seq, agent.memory.revision, agent.next_turn_index) == (seq, revision, turn_index)
        assert "now fix the parser's unicode escapes" in preview.text
        assert agent.preview(input="now fix the parser's unicode escapes") == preview  # twice, the same
        other = agent.preview(input="something else entirely")
        assert other.text != preview.text
        with agent.turn(input="now fix the parser's unicode escapes") as turn:
            rendered = turn.context()
            # The preview is the prompt the turn then renders for that input, byte for byte.
            assert rendered.text == preview.text and rendered.prompt_hash == preview.prompt_hash
            assert rendered.cache_key == preview.cache_key
            with pytest.raises(UsageError, match="preview renders a new turn's first prompt"):
                agent.preview(input="x")
    with _open(tmp_path / "L") as agent, pytest.raises(UsageError, match="input role 'assistant'"):
        agent.preview(input="x", role="assistant")


# --------------------------------------------------------------------------- durable between model calls
# A tool's result recorded between two model calls of a turn is flushed before the next
# one (a ``kill -9`` during it, the longest phase of a turn, lost the result), and a
# checkpoint past the ledger's head is pruned, never the new one.


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
