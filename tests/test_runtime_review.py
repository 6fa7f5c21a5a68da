"""Findings of an adversarial review of the runtime facade, each pinned by a test.

Every refused call raises a holon error and leaves the ledger exactly as it was (its
head), and no misuse may leave a turn open in the ledger that the agent believes closed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holon import records as r
from holon.errors import InvalidRecord, InvalidRef, UsageError
from holon.ledger import Ledger, writer
from holon.runtime import Agent
from tests.runtime_support import Tick


def _agent(path: Path) -> Agent:
    return Agent.open(path, agent_id="rv", clock=Tick())


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
