"""Bad use of the Agent gets a clear error from holon.errors and leaves the ledger unchanged."""

from __future__ import annotations

import errno
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import holon
from benchmarks.runtime import _probe_turn
from holon import records as r
from holon.errors import InvalidRecord, InvalidRef, LedgerLocked, NotALedger, UsageError
from holon.ledger import Ledger, writer
from holon.runtime import Agent, AgentConfig
from holon.runtime import checkpoints as ck
from tests.ledger_support import child_env, without_ts_check
from tests.runtime_support import ROOT, Tick


def _agent(path: Path) -> Agent:
    return Agent.open(path, agent_id="e1", clock=Tick())


def test_turns_do_not_nest(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="outer") as outer:
        seq = agent.seq
        with pytest.raises(UsageError, match=f"turn {outer.index} is still open"):
            agent.turn(input="inner")
        assert agent.seq == seq
        outer.record_message("the outer turn goes on")


def test_recording_outside_a_turn_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="one") as turn:
            pass
        seq = agent.seq
        for attempt in (
            lambda: turn.record_message("late"),
            lambda: turn.tool("bash", {"cmd": "ls"}),
            turn.context,
            lambda: turn.record_plan([r.PlanStep(id="s", text="t")]),
        ):
            with pytest.raises(UsageError, match="outside a turn"):
                attempt()
        assert agent.seq == seq


def test_runtime_records_cannot_be_forged_through_a_turn(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="x") as turn:
        seq = agent.seq
        with pytest.raises(UsageError, match="written by the runtime"):
            turn.record(r.TurnEnded(outcome="completed"))
        with pytest.raises(UsageError, match=r"turn\.tool"):
            turn.record(r.ToolResult(call_id="c", tool="bash", status="ok"))
        assert agent.seq == seq


def test_a_second_process_cannot_open_the_ledger_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "l"
    code = (
        "import sys\n"
        "from holon.errors import LedgerLocked\n"
        "from holon.runtime import Agent\n"
        "try:\n"
        f"    Agent.open({str(path)!r})\n"
        "except LedgerLocked as exc:\n"
        "    print(exc); sys.exit(3)\n"
    )
    with _agent(path) as agent:
        head = agent.seq
        proc = subprocess.run(
            [sys.executable, "-c", code],
            check=False,
            capture_output=True,
            text=True,
            env=child_env(),
            cwd=ROOT,
        )
        assert proc.returncode == 3, proc.stderr
        assert "locked for writing by process" in proc.stdout
        with pytest.raises(LedgerLocked):  # and not from this process either
            Agent.open(path)
        assert agent.seq == head
    with Agent.open(path) as again:  # released on close
        assert again.seq == head


def test_a_path_that_is_not_a_ledger_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("buy milk")
    with pytest.raises(NotALedger):
        Agent.open(folder, agent_id="e1")
    assert sorted(p.name for p in folder.iterdir()) == ["todo.txt"]
    file = tmp_path / "file.txt"
    file.write_text("x")
    with pytest.raises(NotALedger, match="is a file"):
        Agent.open(file, agent_id="e1")


def test_creating_needs_an_agent_id_and_resuming_needs_the_right_one(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="agent_id"):
        Agent.open(tmp_path / "new")
    assert not (tmp_path / "new").exists()
    _agent(tmp_path / "l").close()
    with pytest.raises(UsageError, match="belongs to agent 'e1'"):
        Agent.open(tmp_path / "l", agent_id="someone-else")
    Agent.open(tmp_path / "l").close()  # the lock was released by the failed open


def test_a_closed_agent_refuses_turns(tmp_path: Path) -> None:
    agent = _agent(tmp_path / "l")
    agent.close()
    with pytest.raises(UsageError, match="closed"):
        agent.turn(input="x")


def test_checkpointing_inside_a_turn_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="x"), pytest.raises(UsageError, match="between"):
        agent.checkpoint()


def test_an_invalid_record_is_refused_before_it_reaches_the_ledger(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="x") as turn:
        seq = agent.seq
        with pytest.raises(InvalidRecord, match="role"):
            turn.record_message("hi", role="robot")
        with pytest.raises(InvalidRecord):
            turn.tool("bash", {"cmd": object()})
        assert agent.seq == seq
        turn.record_message("still fine")
    with Ledger.open(tmp_path / "l", readonly=True) as ledger:  # and the ledger reads back cleanly
        texts = [rec.body.text for rec in ledger.read(0) if isinstance(rec.body, r.Message)]
    assert texts == ["x", "still fine"]


def test_an_idempotency_key_reused_for_a_different_call_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="refund") as turn:
            turn.tool("refund", {"order": "8812", "amount": 5}, idempotency_key="refund-8812").run(
                lambda: "ok"
            )
        with agent.turn(input="again") as turn:
            seq = agent.seq
            with pytest.raises(UsageError, match="a key names one effect"):
                turn.tool("refund", {"order": "8812", "amount": 50}, idempotency_key="refund-8812")
            with pytest.raises(UsageError, match="a key names one effect"):
                turn.tool("charge", {"order": "8812", "amount": 5}, idempotency_key="refund-8812")
            assert agent.seq == seq
            same = turn.tool("refund", {"amount": 5, "order": "8812"}, idempotency_key="refund-8812")
            assert same.replayed and same.output == "ok"


def test_a_bad_turn_input_appends_nothing(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        seq = agent.seq
        with pytest.raises(InvalidRecord):
            agent.turn(input=12345)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="input role"):
            agent.turn(input="hi", role="robot")
        assert agent.seq == seq and agent.current_turn is None
        with agent.turn(input="a real input") as turn:  # and the next turn opens normally
            assert turn.index == 1


def test_a_missing_ledger_is_not_created_when_create_is_false(tmp_path: Path) -> None:
    with pytest.raises(NotALedger, match="create=False"):
        Agent.open(tmp_path / "typo", agent_id="e1", create=False)
    assert not (tmp_path / "typo").exists()
    with _agent(tmp_path / "l"):
        pass
    with Agent.open(tmp_path / "l", create=False) as agent:  # an existing one opens as usual
        assert agent.agent_id == "e1"


def test_a_ledger_is_not_created_inside_another_ledger(tmp_path: Path) -> None:
    with _agent(tmp_path / "l"):
        pass
    with pytest.raises(UsageError, match="inside the ledger at"):
        Agent.open(tmp_path / "l" / "blobs" / "x", agent_id="e2")
    assert not (tmp_path / "l" / "blobs" / "x").exists()


def test_a_legacy_out_of_range_ts_does_not_become_the_floor_of_later_timestamps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A ledger written before the ledger checked ts may end in a nanosecond reading; as the
    # floor of later timestamps it made every append after it fail (the ledger refuses it).
    path = tmp_path / "l"
    with _agent(path) as agent, agent.turn(input="first"):
        pass
    with without_ts_check(), Ledger.open(path) as ledger:
        bad = ledger.append(
            r.Record(body=r.Message(role="user", text="clocked in ns"), ts=1_700_000_000_000_000_000)
        )
    with caplog.at_level("WARNING"), Agent.open(path, clock=Tick()) as agent:
        with agent.turn(input="second") as turn:
            turn.record_message("still recording")
        assert r.MIN_TS <= agent.last_ts <= r.MAX_TS
    assert f"seq {bad} has ts 1700000000000000000, outside" in caplog.text


# --------------------------------------------------------------------------- refused calls leave the head
# Every refused call raises a holon error and leaves the ledger exactly as it was (its
# head), and no misuse may leave a turn open in the ledger that the agent believes closed.


def _turn_kinds(path: Path) -> list[tuple[int | None, str]]:
    with Ledger.open(path, readonly=True) as ledger:
        return [
            (rec.turn, rec.kind)
            for rec in ledger.read(0)
            if rec.kind in (r.TurnStarted.KIND, r.TurnEnded.KIND)
        ]


def test_an_outcome_outside_the_schema_is_refused_when_chosen(tmp_path: Path) -> None:
    # Accepted by end(), it failed only at the turn_ended append: the turn stayed open in
    # the ledger while the agent let the next turn start on top of it.
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="one") as turn:
            head = agent.ledger.head()
            with pytest.raises(UsageError, match="outcome 'done' must be one of"):
                turn.end("done")  # type: ignore[arg-type]
            assert agent.ledger.head() == head
        assert turn.summary is not None and turn.summary.outcome == "completed"
        with agent.turn(input="two"):
            pass
    assert _turn_kinds(tmp_path / "l") == [
        (1, "turn_started"),
        (1, "turn_ended"),
        (2, "turn_started"),
        (2, "turn_ended"),
    ]


def test_text_that_is_not_utf8_is_an_invalid_record_and_appends_nothing(tmp_path: Path) -> None:
    # A lone surrogate (what surrogateescape makes of non-UTF-8 bytes: file names,
    # subprocess output) does not encode; it raised a bare UnicodeEncodeError.
    bad = "caf\udce9"
    with _agent(tmp_path / "l") as agent:
        head = agent.ledger.head()
        with pytest.raises(InvalidRecord, match="not valid UTF-8"):
            agent.turn(input=bad)
        assert agent.ledger.head() == head and agent.current_turn is None
    with _agent(tmp_path / "l") as agent, agent.turn(input="x") as turn:
        head = agent.ledger.head()
        with pytest.raises(InvalidRecord, match="not valid UTF-8"):
            turn.record_message(bad)
        with pytest.raises(InvalidRecord, match="not valid UTF-8"):
            turn.tool("read_file", {"path": bad})
        assert agent.ledger.head() == head
        call = turn.tool("cat", {})
        head = agent.ledger.head()
        for output in (bad, bad * 5_000):  # inline, and over the blob threshold
            with pytest.raises(InvalidRecord, match="not valid UTF-8"):
                call.finish(output)
        with pytest.raises(InvalidRecord, match="Expected `str`"):
            call.finish(None)  # type: ignore[arg-type]
        assert agent.ledger.head() == head and not call.done
        call.finish(bad.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def test_an_exception_whose_text_is_not_utf8_still_closes_the_turn_and_the_call(tmp_path: Path) -> None:
    # Its text went into turn_ended / the error result verbatim: the append failed, the
    # turn stayed open in the ledger (the next turn started inside it) and the daemon got
    # a UnicodeEncodeError instead of its own exception.
    with _agent(tmp_path / "l") as agent:
        with pytest.raises(RuntimeError, match="caf"), agent.turn(input="one") as turn:
            call = turn.tool("read_file", {"path": "cafe"})
            with call:
                raise RuntimeError("cannot read caf\udce9")
        assert call.result is not None and call.result.status == "error"
        assert call.result.output == "RuntimeError: cannot read caf\\udce9"
        with pytest.raises(RuntimeError, match="caf"), agent.turn(input="two"):
            raise RuntimeError("cannot read caf\udce9")
        assert agent.state.turn is not None and agent.state.turn.outcome == "failed"
        with agent.turn(input="three"):
            pass
    assert _turn_kinds(tmp_path / "l") == [
        (i, kind) for i in (1, 2, 3) for kind in ("turn_started", "turn_ended")
    ]


def test_an_input_too_large_for_a_record_leaves_no_turn_started_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ledger refuses a record over its payload limit (256 MiB) at append time; the
    # turn_started appended just before the input stayed, and no turn_ended ever closed
    # it. The limit is lowered here so the input need not be 256 MiB.
    monkeypatch.setattr(writer, "MAX_PAYLOAD", 4_096)
    with _agent(tmp_path / "l") as agent:
        head = agent.ledger.head()
        with pytest.raises(InvalidRecord, match="a record may be at most"):
            agent.turn(input="x" * 10_000)
        assert agent.ledger.head() == head and agent.seq == head[0]
        assert agent.current_turn is None and agent.state.turn is None
        with agent.turn(input="a real input") as turn:
            assert turn.index == 1
    assert _turn_kinds(tmp_path / "l") == [(1, "turn_started"), (1, "turn_ended")]


def test_tool_arguments_that_are_not_a_json_object_are_an_invalid_record(tmp_path: Path) -> None:
    # dict(args) ran before validation (TypeError / ValueError for None, a list, a
    # string), and a retried key compared arguments that did not encode (EncodeError).
    with _agent(tmp_path / "l") as agent, agent.turn(input="x") as turn:
        turn.tool("deploy", {"v": "1"}, idempotency_key="deploy:1").run(lambda: "done")
        head = agent.ledger.head()
        for args in (None, [1, 2], "v=1", [("v", "1")]):
            with pytest.raises(InvalidRecord, match="arguments must be a dict"):
                turn.tool("deploy", args)  # type: ignore[arg-type]
            with pytest.raises(InvalidRecord, match="arguments must be a dict"):
                turn.tool("deploy", args, idempotency_key="deploy:1")  # type: ignore[arg-type]
        with pytest.raises(InvalidRecord, match="does not encode"):
            turn.tool("deploy", {"v": object()}, idempotency_key="deploy:1")
        assert agent.ledger.head() == head
        # Recall arguments come from the model: they are an error result, not an exception
        # (tests/test_runtime_recall.py).
        call = turn.recall("holon_get", None)  # type: ignore[arg-type]
        assert call.result is not None and call.result.status == "error"
        assert "arguments must be a dict" in call.output


def test_recording_something_that_is_not_a_record_body_is_an_invalid_record(tmp_path: Path) -> None:
    # It raised AttributeError (type(body).KIND) from inside the kind check.
    with _agent(tmp_path / "l") as agent, agent.turn(input="x") as turn:
        head = agent.ledger.head()
        for body in (None, "a note", {"kind": "message", "text": "hi"}, r.PlanStep(id="s", text="t")):
            with pytest.raises(InvalidRecord, match="not a record body"):
                turn.record(body)  # type: ignore[arg-type]
        assert agent.ledger.head() == head


def test_an_unchanged_policy_is_not_recorded_again_whatever_containers_it_was_built_with(
    tmp_path: Path,
) -> None:
    # It was compared as given with the policy as stored: a list where the schema says
    # tuple, or a tuple inside the JSON schema (stored as a list), never compared equal,
    # so every restart recorded the same policy again.
    tool = r.ToolDefinition(
        name="bash", description="Run a command.", parameters={"type": "object", "required": ("command",)}
    )
    policy = r.SystemPolicy(text="You are careful.", tools=[tool])  # type: ignore[arg-type]
    for _ in range(3):
        with Agent.open(tmp_path / "l", agent_id="rv", clock=Tick(), policy=policy) as agent:
            assert agent.seq == 0


def test_a_string_where_a_tuple_of_strings_is_expected_is_refused_not_split(tmp_path: Path) -> None:
    # tuple("src/app.py") is ten one-character file names: recorded without complaint,
    # shown in working memory as the working set.
    with _agent(tmp_path / "l") as agent, agent.turn(input="x") as turn:
        call = turn.tool("edit", {"path": "src/app.py"})
        head = agent.ledger.head()
        with pytest.raises(InvalidRecord, match="touched_files"):
            call.finish("ok", touched_files="src/app.py")  # type: ignore[arg-type]
        with pytest.raises(InvalidRecord, match="scope_constraints"):
            turn.add_work_item("w1", "ship it", scope_constraints="no prod access")  # type: ignore[arg-type]
        assert agent.ledger.head() == head and not call.done
        call.finish("ok", touched_files=("src/app.py",))


def test_search_and_get_text_refuse_bad_arguments_with_holon_errors(tmp_path: Path) -> None:
    # limit=0, a negative limit or an unknown `only` returned [] as if nothing matched;
    # a non-string query or ref and a non-integer offset raised AttributeError/TypeError.
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="deploy the service") as turn:
            turn.record_message("deployed")
        assert agent.search("deploy", limit=1)
        for call in (
            lambda: agent.search("deploy", limit=0),
            lambda: agent.search("deploy", limit=-3),
            lambda: agent.search("deploy", only="everything"),  # type: ignore[arg-type]
            lambda: agent.search(None),  # type: ignore[arg-type]
            lambda: agent.get_text("ledger:0", offset="7"),  # type: ignore[arg-type]
        ):
            with pytest.raises(UsageError):
                call()
        with pytest.raises(InvalidRef):
            agent.get_text(1)  # type: ignore[arg-type]


def test_arguments_json_cannot_hold_are_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    # A daemon that parses model output with Python's json.loads gets NaN for the bare word;
    # the ledger holds no NaN (its JSONL form could not), so the call is refused by name.
    with _agent(tmp_path / "l") as agent, agent.turn(input="x") as turn:
        head = agent.ledger.head()
        with pytest.raises(InvalidRecord, match=r"append, field `body.args.tol`: the number nan has no JSON"):
            turn.tool("fit", {"tol": float("nan")})
        with pytest.raises(InvalidRecord, match=r"field `body.args.data`: a bytes value has no JSON form"):
            turn.tool("upload", {"data": b"\x00"}, idempotency_key="up:1")
        assert agent.ledger.head() == head
        # From the model, it is its mistake: an error result, recorded with the arguments as text.
        call = turn.recall("holon_search", {"query": "x", "limit": float("inf")})
        assert call.result is not None and call.result.status == "error"
        # Told in the tool's terms (the ledger's reason is advice to the daemon).
        assert call.output == "holon_search: `limit` must be an integer, got inf"


# --------------------------------------------------------------------------- what leaves a turn's block
# A daemon must be able to trust what leaves a turn's `with` block: the daemon's own
# exception or a holon error about its input, never an environmental failure of a cache,
# and no record that says something the runtime does not know.


def test_a_checkpoint_that_cannot_be_written_does_not_fail_the_turn_that_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A full disk (or a read-only checkpoints/) raised OSError out of the turn's `with`
    # block after the turn was recorded: the daemon's own exception was replaced, the
    # summary lost, and a partial temp file stayed behind.
    real_write = ck.os.write

    def full(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, "No space left on device")

    config = AgentConfig(checkpoint_every=1)
    with Agent.open(tmp_path / "l", agent_id="rv2", clock=Tick(), config=config) as agent:
        with agent.turn(input="one"):
            pass
        monkeypatch.setattr(ck.os, "write", full)
        with caplog.at_level(logging.WARNING, logger="holon.runtime"):
            with pytest.raises(ValueError, match="the daemon's own"), agent.turn(input="two") as turn:
                raise ValueError("the daemon's own error")
            with agent.turn(input="three") as ok:
                pass
        assert turn.summary is not None and turn.summary.outcome == "failed"
        assert turn.summary.checkpoint_seq is None
        assert ok.summary is not None and ok.summary.outcome == "completed"
        assert "checkpoint after turn 2 not written" in caplog.text
        assert not [p.name for p in (tmp_path / "l" / "checkpoints").iterdir() if p.name.endswith(".tmp")]
        # Asked for explicitly, the failure is the caller's to see.
        with pytest.raises(OSError, match="No space left"):
            agent.checkpoint()
        monkeypatch.undo()
    with Agent.open(tmp_path / "l", clock=Tick(), config=config) as agent:
        assert agent.report.checkpoint_seq is not None and agent.report.rejected == ()
        assert agent.state.turn is not None and agent.state.turn.index == 3


def test_a_value_run_cannot_record_leaves_the_call_open_not_an_error(tmp_path: Path) -> None:
    # execute() ran the effect and returned bytes (subprocess output not decoded): the
    # InvalidRecord was recorded as an `error` result, which says the effect did not
    # happen, and the key then replayed that error; a daemon retrying under a new key
    # deployed twice.
    with Agent.open(tmp_path / "l", agent_id="rv2", clock=Tick()) as agent:
        with agent.turn(input="deploy") as turn:
            call = turn.tool("sh", {"cmd": "make deploy"}, idempotency_key="deploy:1")
            head = agent.ledger.head()
            for value in (b"deployed\n", ("deployed", "0"), ("a", 0, "b"), "caf\udce9"):
                with pytest.raises(InvalidRecord, match=r"ran, but what it returned cannot be recorded"):
                    call.run(lambda value=value: value)  # type: ignore[misc]
            assert agent.ledger.head() == head and not call.done
            call.finish("deployed\n")
            assert call.result is not None and call.result.status == "ok"
            # An exception from execute() is still an error result, and propagates.
            failing = turn.tool("sh", {"cmd": "false"})
            with pytest.raises(RuntimeError, match="boom"):
                failing.run(lambda: (_ for _ in ()).throw(RuntimeError("boom")))
            assert failing.result is not None and failing.result.status == "error"
            assert failing.run(lambda: "again") is failing.result
            # Left open, the turn's end records the outcome as unknown.
            lost = turn.tool("sh", {"cmd": "make migrate"}, idempotency_key="migrate:1")
            with pytest.raises(InvalidRecord):
                lost.run(lambda: b"migrated")  # type: ignore[arg-type,return-value]
        assert lost.result is not None and lost.result.status == "unknown"
        assert agent.recorded_call("deploy:1") is not None
        assert agent.recorded_call("deploy:1").status == "ok"  # type: ignore[union-attr]


def test_a_clock_reading_that_is_not_integer_milliseconds_is_named_and_does_not_stick(tmp_path: Path) -> None:
    # `clock=lambda: time.time() * 1000` (a float) or an overflowing reading was kept as
    # the floor of every later timestamp: each append failed as an InvalidRecord about
    # field `ts`, and the agent stayed unusable after the clock was right again.
    # A microsecond and a nanosecond reading of today, and a negative one, too: each would
    # have stamped the append-only ledger wrong for good.
    readings: list[object] = [1.7e12, 1 << 64, True, 1_732_300_000_000_000, 1_732_300_000_000_000_000, -5]
    tick = Tick()

    def clock() -> int:
        return readings.pop(0) if readings else tick()  # type: ignore[return-value]

    with Agent.open(tmp_path / "l", agent_id="rv2", clock=clock) as agent:
        head = agent.ledger.head()
        for _ in range(6):
            with pytest.raises(UsageError, match=r"clock returned .*(integer milliseconds|not milliseconds)"):
                agent.turn(input="hello")
            assert agent.ledger.head() == head and agent.current_turn is None
        with agent.turn(input="hello") as turn:
            turn.record_message("hi")
        assert turn.summary is not None and turn.summary.outcome == "completed"
        assert agent.last_ts < 1 << 63


def test_a_turn_whose_end_could_not_be_recorded_is_not_nested_into_by_the_next(tmp_path: Path) -> None:
    # The clock failed (or returned garbage) as the turn ended: turn_ended was never
    # appended, yet the agent let the next turn start inside the open one; that turn
    # then stayed open in the ledger for good, and no open closed it.
    failing = [False]
    tick = Tick()

    def clock() -> int:
        if failing[0]:
            failing[0] = False
            raise RuntimeError("NTP unreachable")
        return tick()

    with Agent.open(tmp_path / "l", agent_id="rv2", clock=clock) as agent:
        with pytest.raises(RuntimeError, match="NTP"), agent.turn(input="one"):
            failing[0] = True
        head = agent.ledger.head()
        with pytest.raises(UsageError, match="turn 1 is still open in ledger"):
            agent.turn(input="two")
        assert agent.ledger.head() == head
    with Agent.open(tmp_path / "l", clock=clock) as agent:
        assert agent.report.interrupted_turn == 1
        with agent.turn(input="two") as turn:
            pass
        assert turn.index == 2
    with Ledger.open(tmp_path / "l", readonly=True) as ledger:
        ends = [(rec.turn, rec.kind) for rec in ledger.read(0) if rec.kind in ("turn_started", "turn_ended")]
    assert ends == [(1, "turn_started"), (1, "turn_ended"), (2, "turn_started"), (2, "turn_ended")]


# --------------------------------------------------------------------------- ids the fold could not place
# `turn.activate("W2")` for an undeclared item used to append a state change the fold
# carried (``state.carried``, shown in no prompt): a daemon's typo silently lost the
# model's active work. The named methods refuse such a call with a UsageError that names
# the id, what is known instead and what to do, before anything is appended;
# `turn.record(body)` stays the permissive raw path.


def _refused(agent: Agent, call: Callable[[], object], *fragments: str) -> str:
    """Assert ``call`` raises a UsageError holding every fragment and records nothing."""
    seq, carried = agent.seq, agent.state.carried_count
    with pytest.raises(UsageError) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert "nothing was recorded" in message
    assert agent.seq == seq
    assert agent.state.carried_count == carried
    return message


# --------------------------------------------------------------------------- work item states


def test_activating_an_undeclared_work_item_is_refused_and_the_active_work_stays(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "release 2.4.1", state="active")
        turn.add_work_item("W3", "triage", state="queued")
        _refused(
            agent,
            lambda: turn.activate("W2"),
            "turn.activate('W2')",
            f"in turn {turn.index}",
            "no work item 'W2'",
            "open work items: 'W1', 'W3'",
            "turn.add_work_item('W2', objective, state='active')",
            "turn.record(holon.records.WorkItemState(id='W2', state='active'))",
        )
        assert agent.state.active_work_item_id == "W1"


def test_finishing_or_moving_an_unknown_work_item_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "release", state="active")
        _refused(agent, lambda: turn.finish_work("w1"), "turn.finish_work('w1')", "state='done'", "'W1'")
        _refused(
            agent,
            lambda: turn.set_work_state("W9", "abandoned", reason="dropped"),
            "turn.set_work_state('W9')",
            "state='abandoned'",
        )
        assert agent.state.active_work_item_id == "W1"


def test_a_work_item_declared_earlier_in_the_same_turn_is_accepted(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "release")
        turn.activate("W1")
        turn.record_plan([r.PlanStep(id="s1", text="build")], work_item_id="W1")
        turn.record_decision("D1", "ship from main", work_item_id="W1")
        state = agent.state
        assert state.active_work_item_id == "W1"
        plan = state.plan_of("W1")
        assert plan is not None and [s.id for s in plan.steps] == ["s1"]
        assert [d.id for d in state.decisions["W1"]] == ["D1"]
        assert state.carried_count == 0


def test_a_recently_finished_work_item_can_be_reopened_or_finished_again(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="go") as turn:
            turn.add_work_item("W1", "release", state="active")
            turn.finish_work("W1", reason="published")
            turn.finish_work("W1", reason="published, and announced")  # done again: the new reason
            done = agent.state.find_work_item("W1")
            assert done is not None and done.state == "done"
            assert done.state_reason == "published, and announced"
        with agent.turn(input="the release broke, reopen it") as turn:
            turn.activate("W1", reason="regression")  # reopens a finished item
        state = agent.state
        assert state.active_work_item_id == "W1"
        assert [e.id for e in state.finished_work] == []
        assert state.carried_count == 0


def test_a_work_item_finished_too_long_ago_is_refused_until_declared_again(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        window = agent.config.projection.finished_window
        for i in range(window + 1):
            turn.add_work_item(f"W{i}", f"item {i}", state="active")
            turn.finish_work(f"W{i}")
        assert agent.state.find_work_item("W0") is None
        _refused(
            agent,
            lambda: turn.activate("W0"),
            "no work item 'W0' is open or recently finished",
            f"recently finished: 'W{window}', 'W{window - 1}'",
            "and ",
            "more",
        )
        turn.add_work_item("W0", "item 0, again", state="queued")
        turn.activate("W0")
        assert agent.state.active_work_item_id == "W0"


def test_a_long_list_of_open_items_is_cut_to_a_few(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        for i in range(8):
            turn.add_work_item(f"W{i}", f"item {i}")
        message = _refused(agent, lambda: turn.activate("X"), "'W0', 'W1', 'W2', 'W3', 'W4' and 3 more")
        assert "'W5'" not in message


def test_checks_come_after_the_turn_check(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="go") as turn:
            pass
        seq = agent.seq
        for late in (
            lambda: turn.activate("W9"),
            lambda: turn.resolve_wait("q"),
            lambda: turn.task_result("t", status="ok", summary="s"),
            lambda: turn.follow_up("f", "x", status="done"),
            lambda: turn.record_plan([r.PlanStep(id="s", text="t")], work_item_id="W9"),
            lambda: turn.record_decision("d", "t", work_item_id="W9"),
        ):
            with pytest.raises(UsageError, match="has ended"):
                late()
        assert agent.seq == seq


# --------------------------------------------------------------------------- plans and decisions


def test_a_plan_or_decision_for_an_undeclared_work_item_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "release", state="active")
        _refused(
            agent,
            lambda: turn.record_plan([r.PlanStep(id="s1", text="build")], work_item_id="W2"),
            "turn.record_plan(work_item_id='W2')",
            "no open or recently finished work item is 'W2'",
            "open work items: 'W1'",
            "turn.add_work_item('W2', objective)",
            "turn.record(holon.records.WorkPlan(...))",
        )
        _refused(
            agent,
            lambda: turn.record_decision("D1", "ship", work_item_id="W2"),
            "turn.record_decision(work_item_id='W2')",
            "turn.record(holon.records.Decision(...))",
        )
        assert "W2" not in agent.state.plans
        assert "W2" not in agent.state.decisions


def test_a_plan_or_decision_for_a_finished_work_item_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "release", state="active")
        done_seq = turn.finish_work("W1")
        for call in (
            lambda: turn.record_plan([r.PlanStep(id="s1", text="x")], work_item_id="W1"),
            lambda: turn.record_decision("D1", "x", work_item_id="W1"),
        ):
            _refused(agent, call, f"work item 'W1' is done (since seq {done_seq})", "turn.activate('W1')")
        # The default target (no active item now) is still the unscoped plan.
        turn.record_plan([r.PlanStep(id="s1", text="x")])
        assert agent.state.unscoped_plan is not None


# --------------------------------------------------------------------------- waits


def test_resolving_a_wait_that_is_not_open_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.wait_for("qa-2.4.1", "QA sign-off")
        _refused(
            agent,
            lambda: turn.resolve_wait("qa"),
            "turn.resolve_wait('qa')",
            "no wait 'qa' is open",
            "open waits: 'qa-2.4.1'",
            "turn.wait_for('qa', waiting_on)",
            "turn.record(holon.records.WaitingResolved(id='qa', ...))",
        )
        assert "qa-2.4.1" in agent.state.waits


def test_resolving_a_wait_twice_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="go") as turn:
            turn.wait_for("qa", "QA sign-off")
        with agent.turn(input="signed off") as turn:
            seq = turn.resolve_wait("qa")  # opened in an earlier turn: accepted
            _refused(
                agent,
                lambda: turn.resolve_wait("qa", resolution="cancelled"),
                f"wait 'qa' was already resolved (arrived) at seq {seq}",
                "open waits: none",
            )


def test_a_wait_opened_earlier_in_the_same_turn_can_be_resolved(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.wait_for("qa", "QA sign-off")
        turn.resolve_wait("qa", resolution="timed_out")
        assert agent.state.waits == {}
        assert agent.state.carried_count == 0


# --------------------------------------------------------------------------- tasks


def test_a_result_for_a_task_never_started_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.start_task("build-1", "build the module")
        _refused(
            agent,
            lambda: turn.task_result("build1", status="ok", summary="built"),
            "turn.task_result('build1')",
            "no task 'build1' was started",
            "running tasks: 'build-1'",
            "turn.start_task('build1', description)",
            "turn.record(holon.records.TaskResult(id='build1', ...))",
        )
        assert "build-1" in agent.state.tasks


def test_a_second_result_for_a_task_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.start_task("t1", "build")
        seq = turn.task_result("t1", status="error", summary="failed")  # same turn: accepted
        _refused(
            agent,
            lambda: turn.task_result("t1", status="ok", summary="passed"),
            f"task 't1' already rejoined (error) at seq {seq}",
            "running tasks: none",
        )
        assert [t.id for t in agent.state.finished_tasks] == ["t1"]


# --------------------------------------------------------------------------- follow-ups


def test_closing_a_follow_up_that_is_not_open_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.follow_up("F1", "tell the release channel")
        _refused(
            agent,
            lambda: turn.follow_up("F2", "tell them", status="done"),
            "turn.follow_up('F2', status='done')",
            "no follow-up 'F2' is open",
            "open follow-ups: 'F1'",
            "turn.follow_up('F2', text)",
            "turn.record(holon.records.FollowUp(id='F2', ..., status='done'))",
        )
        seq = turn.follow_up("F1", "told them", status="done")
        _refused(
            agent,
            lambda: turn.follow_up("F1", "told them", status="dropped"),
            f"follow-up 'F1' was already closed (done) at seq {seq}",
        )
        turn.follow_up("F1", "tell them again")  # declaring reopens it
        assert list(agent.state.follow_ups) == ["F1"]


# --------------------------------------------------------------------------- the raw path


def test_turn_record_still_records_what_the_fold_carries(tmp_path: Path) -> None:
    # Importers and replays record other tools' histories as they are: the raw path
    # stays permissive, and the fold keeps what it cannot place in state.carried.
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        seq = agent.seq
        turn.record(r.WorkItemState(id="W2", state="active"))
        turn.record(r.WaitingResolved(id="qa", resolution="arrived"))
        turn.record(r.TaskResult(id="t0", status="ok", summary="imported"))
        assert agent.seq == seq + 3
        assert agent.state.carried_count == 2
        assert [t.id for t in agent.state.finished_tasks] == ["t0"]


# --------------------------------------------------------------------------- callers


def test_the_runtime_benchmark_probe_declares_its_work_item_on_any_ledger(tmp_path: Path) -> None:
    # benchmarks/runtime.py's cold-open probes start at i = 10**6 on a ledger that never
    # declared PROBE: their record_plan(work_item_id="PROBE") recorded a plan no prompt
    # showed (and is refused now). The probe declares the item on its first turn.
    with _agent(tmp_path / "l") as agent:
        for i in range(10**6, 10**6 + 3):  # 10**6 + 2 records the plan
            _probe_turn(agent, i)
        state = agent.state
        assert state.active_work_item_id == "PROBE"
        assert state.plan_of("PROBE") is not None
        assert state.carried_count == 0


# --------------------------------------------------------------------------- ids still open
# The fold replaces an open wait or running task redeclared under the same id: the first
# one's ``waiting_on`` / description left the prompt without a trace, and one resolution
# (or result) then ended both. A daemon mapping a model's tools onto these methods reuses
# ids easily (a model repeats "qa" or "build"), so the named methods refuse it before
# anything is appended; ``turn.record(body)`` stays the deliberate way to replace one.


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


# ------------------------------------------------------------------------ blank tool names, outputs read once


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


# --------------------------------------------------------------------------- a plan of strings


def test_a_plan_of_strings_is_refused_with_how_to_write_it(tmp_path: Path) -> None:
    # `turn.record_plan(...)` is how the guide says to keep the plan; a list of step texts
    # is the first thing one tries. It must say what a step is, and record nothing.
    with Agent.open(tmp_path / "a", agent_id="a") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "ship it", state="active")
        before = agent.seq
        with pytest.raises(InvalidRecord, match=r"holon\.PlanStep\(id='s1', text='build'\)") as caught:
            turn.record_plan(["build", "review"])
        assert "body.steps[0]" in str(caught.value)
        with pytest.raises(InvalidRecord, match=r"a plan is a list of steps.*holon\.PlanStep"):
            turn.record_plan("build it")  # type: ignore[arg-type]
        assert agent.seq == before, "nothing is recorded"
        steps = [holon.PlanStep(id="s1", text="build"), holon.PlanStep(id="s2", text="review")]
        seq = turn.record_plan(steps)
        plan = agent.ledger.get(seq).body
        assert isinstance(plan, r.WorkPlan) and [s.text for s in plan.steps] == ["build", "review"]
