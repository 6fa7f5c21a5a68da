"""Every derived record states the projection config it was derived under (projection version 9).

Before, only ``PromptRendered.render_config["projection"]`` recorded the config, and only
for a non-default one. A ledger whose turns never rendered a prompt (timer or setup turns)
said nothing about its config, so an agent reopened under another config went on deriving
under it, and ``holon verify`` failed for good; a ledger derived under a non-default config
without prompts was folded under the default and reported divergent. Deltas and episodes
now carry ``projection`` (``None``: the default), which replay reads as it reads prompts
and ``Agent.open`` checks before it appends anything.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.errors import HolonError, InvalidRecord, ProjectionConfigMismatch, UsageError
from holon.ledger import Ledger
from holon.projections import (
    DEFAULT_CONFIG,
    PROJECTION_VERSION,
    CheckpointRejected,
    ProjectionConfig,
    ProjectionState,
    encode_checkpoint,
    fold,
    restore_checkpoint,
    stated_config,
    verify_derivations,
)
from holon.replay import memory_at, memory_of, next_prompt, projection_config_of
from holon.runtime import Agent, AgentConfig, checkpoint_resume
from tests.cli_support import invoke
from tests.live import LiveLedger
from tests.runtime_support import Tick, ledger_records, prompted_turns

POLICY = r.SystemPolicy(text="You are a test agent.")
SHORT = ProjectionConfig(turn_cap=3)


def _timer_turns(
    path: Path, projection: ProjectionConfig, turns: range, *, checkpoint_every: int = 100
) -> None:
    """Turns that never call ``turn.context()``: no prompt records the config."""
    config = AgentConfig(projection=projection, checkpoint_every=checkpoint_every)
    with Agent.open(path, agent_id="t", config=config, clock=Tick(), policy=POLICY) as agent:
        for i in turns:
            with agent.turn(input=f"tick {i}", trigger="timer") as turn:
                if agent.state.active_work_item is None:
                    turn.add_work_item("W1", "watch the queue", state="active")
                turn.record_message(f"tick {i}: nothing new")


def _prompted_turns(path: Path, projection: ProjectionConfig, turns: range) -> None:
    prompted_turns(path, projection, turns, agent_id="t")


def _records(path: Path) -> list[r.Record]:
    return ledger_records(path)


def _derived(records: list[r.Record]) -> list[r.Record]:
    return [rec for rec in records if rec.kind in r.DERIVED_KINDS]


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _copy(path: Path, records: list[r.Record]) -> Path:
    with Ledger.create(path, agent_id="t", fsync="never") as ledger:
        ledger.append_many(records)
    return path


# --------------------------------------------------------------------------- case 1


@pytest.mark.parametrize("checkpoint_every", [100, 5])
def test_an_agent_reopened_under_another_config_after_turns_without_prompts_is_refused(
    tmp_path: Path, checkpoint_every: int
) -> None:
    path = tmp_path / "timer"
    _timer_turns(path, DEFAULT_CONFIG, range(14), checkpoint_every=checkpoint_every)
    records = _records(path)
    assert not any(isinstance(rec.body, r.PromptRendered) for rec in records)
    episode = next(rec for rec in reversed(records) if isinstance(rec.body, r.ContextEpisodeRecord))
    before = _files(path)

    # It was let in (no prompt to look at), and every turn it ran broke `holon verify`.
    with pytest.raises(UsageError) as refused:
        Agent.open(path, config=AgentConfig(projection=SHORT), clock=Tick())
    message = str(refused.value)
    assert f"its context_episode at seq {episode.seq} records it" in message, message
    assert "ProjectionConfig(turn_cap=3)" in message
    assert "AgentConfig(projection=ProjectionConfig())" in message
    assert _files(path) == before  # refused before recovery or a checkpoint wrote anything

    # The config the ledger states opens it, and the ledger still verifies.
    _prompted_turns(path, DEFAULT_CONFIG, range(14, 16))
    verified = invoke("verify", path)
    assert verified.exit_code == 0, verified.stdout + verified.stderr


def test_a_non_default_ledger_without_prompts_refuses_the_default_config(tmp_path: Path) -> None:
    path = tmp_path / "short"
    _timer_turns(path, SHORT, range(4))
    before = _files(path)
    with pytest.raises(UsageError) as refused:
        Agent.open(path, config=AgentConfig(), clock=Tick())
    assert "was derived under ProjectionConfig(turn_cap=3)" in str(refused.value)
    assert _files(path) == before


# --------------------------------------------------------------------------- case 2


def test_a_non_default_ledger_without_prompts_verifies_and_replays_under_its_config(tmp_path: Path) -> None:
    path = tmp_path / "short"
    _timer_turns(path, SHORT, range(7))
    records = _records(path)
    assert not any(isinstance(rec.body, r.PromptRendered) for rec in records)
    # The short turn cap finalized episodes the default would not have: folded under the
    # default, the ledger diverged ("such a ledger cannot be told apart").
    assert any(isinstance(rec.body, r.ContextEpisodeRecord) for rec in records)

    for args in (("verify",), ("replay", "--check")):
        result = invoke(*args[:1], path, *args[1:])
        assert result.exit_code == 0, (args, result.stdout, result.stderr)
    assert projection_config_of(records) == SHORT
    # memory and the next prompt are the agent's own, not a default fold's.
    assert memory_at(records) == memory_at(records, projection=SHORT)
    assert next_prompt(records, agent_id="t") == next_prompt(records, agent_id="t", projection=SHORT)


def test_the_checkpoint_of_a_ledger_without_prompts_states_its_config(tmp_path: Path) -> None:
    # The checkpoint's newest delta and episode state the config: `holon memory` needs no first pass.
    path = tmp_path / "short"
    _timer_turns(path, SHORT, range(7), checkpoint_every=3)
    records = _records(path)
    with Ledger.open(path, readonly=True) as ledger:
        head = ledger.head()
        passes: list[int] = []

        def read() -> list[r.Record]:
            passes.append(1)
            return list(ledger.read(0, head[0] + 1))

        view = memory_of(read, resume=checkpoint_resume(ledger, head))
    assert view == memory_at(records, projection=SHORT)
    assert passes == []


# --------------------------------------------------------------------------- case 3


# The prompt's render settings without the config (a default one, since render version 7),
# or none at all (which says nothing of its config).
@pytest.mark.parametrize("settings", ["without-projection", "none"])
def test_a_prompt_appended_by_hand_that_records_no_config_does_not_open_the_ledger_to_another(
    tmp_path: Path, settings: str
) -> None:
    path = tmp_path / "short"
    _prompted_turns(path, SHORT, range(4))
    records = _records(path)
    last = next(rec for rec in reversed(records) if isinstance(rec.body, r.PromptRendered))
    assert isinstance(last.body, r.PromptRendered) and "projection" in last.body.render_config
    config = {k: v for k, v in last.body.render_config.items() if k != "projection"}
    body = msgspec.structs.replace(last.body, render_config=config if settings != "none" else {})
    with Ledger.open(path) as ledger:
        ledger.append(r.Record(ts=records[-1].ts + 1, body=body))
    before = _files(path)

    with pytest.raises(UsageError) as refused:
        Agent.open(path, config=AgentConfig(), clock=Tick())
    message = str(refused.value)
    delta = next(rec for rec in reversed(records) if isinstance(rec.body, r.WorkingMemoryDelta))
    assert f"its working_memory_delta at seq {delta.seq} records" in message, message
    assert "ProjectionConfig(turn_cap=3)" in message
    assert _files(path) == before


def test_a_ledger_stating_two_configs_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "short"
    _prompted_turns(path, SHORT, range(4))
    records = _records(path)
    last = next(rec for rec in reversed(records) if isinstance(rec.body, r.PromptRendered))
    assert isinstance(last.body, r.PromptRendered)
    config = {k: v for k, v in last.body.render_config.items() if k != "projection"}
    with Ledger.open(path) as ledger:
        seq = ledger.append(
            r.Record(ts=records[-1].ts + 1, body=msgspec.structs.replace(last.body, render_config=config))
        )
    for projection in (DEFAULT_CONFIG, SHORT):
        with pytest.raises(UsageError) as refused:
            Agent.open(path, config=AgentConfig(projection=projection), clock=Tick())
        message = str(refused.value)
        assert "states two projection configs" in message, message
        assert f"its prompt at seq {seq} records ProjectionConfig()" in message
        assert "records ProjectionConfig(turn_cap=3)" in message and "start a new ledger" in message


# --------------------------------------------------------------------------- the field


def test_derived_records_state_their_config_and_none_for_the_default(tmp_path: Path) -> None:
    _timer_turns(tmp_path / "default", DEFAULT_CONFIG, range(13))
    _timer_turns(tmp_path / "short", SHORT, range(4))
    default = _derived(_records(tmp_path / "default"))
    short = _derived(_records(tmp_path / "short"))
    assert {rec.kind for rec in default} == {rec.kind for rec in short} == set(r.DERIVED_KINDS)
    for rec in default:
        assert isinstance(rec.body, r.WorkingMemoryDelta | r.ContextEpisodeRecord)
        assert rec.body.projection is None and rec.body.projection_version == PROJECTION_VERSION
        assert stated_config(rec.body) == DEFAULT_CONFIG
        # The default leaves the bytes as they were before the field existed.
        assert b'projection"' not in r.encode_json_record(rec).replace(b'"projection_version"', b"")
    for rec in short:
        assert isinstance(rec.body, r.WorkingMemoryDelta | r.ContextEpisodeRecord)
        assert rec.body.projection == SHORT and stated_config(rec.body) == SHORT
        assert r.decode_json_record(r.encode_json_record(rec)) == rec
        assert r.decode_msgpack_record(r.encode_msgpack_record(rec)) == rec
        hash(rec.body)  # episodes are memoized by value when rendered: the field must stay hashable


def test_a_derived_record_stating_a_malformed_config_is_an_invalid_record(tmp_path: Path) -> None:
    _timer_turns(tmp_path / "short", SHORT, range(4))
    record = _derived(_records(tmp_path / "short"))[0]
    line = r.encode_json_record(record).replace(b'"turn_cap":3', b'"turn_cap":0')
    with pytest.raises(InvalidRecord) as caught:
        r.decode_json_record(line, where="line 1")
    assert caught.value.field is not None and caught.value.field.startswith("body.projection")


def test_records_stating_two_configs_are_an_invalid_record_naming_both(tmp_path: Path) -> None:
    _timer_turns(tmp_path / "short", SHORT, range(7))
    records = _records(tmp_path / "short")
    derived = _derived(records)
    first, later = derived[0], derived[-1]
    assert isinstance(later.body, r.WorkingMemoryDelta | r.ContextEpisodeRecord)
    edited = msgspec.structs.replace(later, body=msgspec.structs.replace(later.body, projection=None))
    records[later.seq] = edited
    with pytest.raises(InvalidRecord) as caught:
        projection_config_of(records)
    assert caught.value.where == f"seq {later.seq}" and caught.value.field == "body.projection"
    message = str(caught.value)
    assert f"{first.kind} at seq {first.seq} recorded ProjectionConfig(turn_cap=3)" in message, message
    assert f"the {later.kind} records ProjectionConfig()" in message
    result = invoke("verify", _copy(tmp_path / "two", records))
    assert result.exit_code == 2 and f"seq {later.seq}" in result.stderr, result.stderr


def test_derived_records_of_older_projection_versions_state_nothing(tmp_path: Path) -> None:
    # A ledger an older holon wrote: its derived records say nothing of their config, so
    # opening it works as before (an agent under any config), and the prompts decide.
    _timer_turns(tmp_path / "short", SHORT, range(4))
    old = [
        msgspec.structs.replace(
            rec, body=msgspec.structs.replace(rec.body, projection=None, projection_version=8)
        )
        if isinstance(rec.body, r.WorkingMemoryDelta | r.ContextEpisodeRecord)
        else rec
        for rec in _records(tmp_path / "short")
    ]
    for rec in old:
        if isinstance(rec.body, r.WorkingMemoryDelta | r.ContextEpisodeRecord):
            assert stated_config(rec.body) is None
    assert projection_config_of(old) == DEFAULT_CONFIG
    path = _copy(tmp_path / "old", old)
    with Agent.open(path, config=AgentConfig(projection=SHORT), clock=Tick()) as agent:
        assert agent.report.folded == len(old)


# --------------------------------------------------------------------------- another config


def _folded_under_turn_cap_3() -> tuple[ProjectionState, list[r.Record]]:
    live = LiveLedger(ProjectionConfig(turn_cap=3))
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    live.end_turn()
    return live.state, live.records


@pytest.mark.parametrize("call", ["fold", "verify_derivations"])
def test_another_config_than_the_states_is_a_holon_error_naming_the_fields(call: str) -> None:
    # A plain ValueError("config differs") said neither which knob differed nor what to do.
    state, _ = _folded_under_turn_cap_3()
    given = ProjectionConfig(turn_cap=5, files_cap=4)
    with pytest.raises(ProjectionConfigMismatch) as caught:
        if call == "fold":
            fold([], state, config=given)
        else:
            verify_derivations([], state=state, config=given)
    error = caught.value
    assert isinstance(error, HolonError) and isinstance(error, ValueError)
    message = str(error)
    assert message.startswith(f"{call}:"), message
    assert "turn_cap: the state's 3, given 5" in message, message
    assert "files_cap: the state's 16, given 4" in message, message
    assert "plan_cap" not in message, message
    assert "from seq 0" in message, message  # what to do
    assert error.differences == ("turn_cap", "files_cap")


def test_a_checkpoint_of_another_config_names_the_fields_that_differ() -> None:
    state, _ = _folded_under_turn_cap_3()
    data = encode_checkpoint(state, head_hash="h")
    rejected = restore_checkpoint(data, hash_at=lambda seq: "h", config=ProjectionConfig())
    assert isinstance(rejected, CheckpointRejected) and rejected.reason == "config"
    assert "turn_cap: the checkpoint's 3, given 12" in rejected.detail, rejected.detail
    assert "plan_cap" not in rejected.detail, rejected.detail
