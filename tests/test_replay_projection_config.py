"""A ledger derived under a non-default projection config replays, verifies and renders under it.

The renderer records the projection config in ``PromptRendered.render_config`` (only
when it is not the default); replay, verification and ``holon render --at-turn`` fold
the ledger under the recorded config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from holon import records as r
from holon.context import Budget, build_context
from holon.errors import InvalidRecord, UsageError
from holon.ledger import Ledger
from holon.projections import DEFAULT_CONFIG, ProjectionConfig, apply, initial_state
from holon.replay import (
    append_evidence,
    describe_projection,
    memory_at,
    projection_config_of,
    prompt_at,
    state_after,
)
from holon.runtime import Agent, AgentConfig
from tests.cli_support import invoke, write_jsonl
from tests.runtime_support import Tick, ledger_records, prompted_turns

POLICY = r.SystemPolicy(text="You are a test agent.")
SHORT = ProjectionConfig(turn_cap=2)


def _run(path: Path, projection: ProjectionConfig, turns: range) -> None:
    prompted_turns(path, projection, turns, agent_id="pc", checkpoint_every=2)


def _records(path: Path) -> list[r.Record]:
    return ledger_records(path)


def _prompts(records: list[r.Record]) -> list[tuple[int, r.PromptRendered]]:
    return [(rec.seq, rec.body) for rec in records if isinstance(rec.body, r.PromptRendered)]


def _rewritten(path: Path, records: list[r.Record], projection: Any, *, at: int | None = None) -> Path:
    """A copy of ``records`` at ``path`` whose prompt at seq ``at`` (every prompt when None)
    records ``projection`` (``...`` removes the key)."""

    def edit(rec: r.Record) -> r.Record:
        body = rec.body
        if not isinstance(body, r.PromptRendered) or (at is not None and rec.seq != at):
            return rec
        config = dict(body.render_config)
        if projection is ...:
            config.pop("projection", None)
        else:
            config["projection"] = projection
        return msgspec.structs.replace(rec, body=msgspec.structs.replace(body, render_config=config))

    with Ledger.create(path, agent_id="pc", fsync="never") as ledger:
        ledger.append_many([edit(rec) for rec in records])
    return path


@pytest.fixture
def short_ledger(tmp_path: Path) -> Path:
    path = tmp_path / "short"
    _run(path, SHORT, range(4))
    return path


def test_a_ledger_derived_under_a_non_default_config_verifies_replays_and_renders(short_ledger: Path) -> None:
    verified = invoke("verify", short_ledger)
    assert verified.exit_code == 0, verified.stderr + verified.stdout
    replayed = invoke("replay", short_ledger, "--check")
    assert replayed.exit_code == 0, replayed.stderr + replayed.stdout
    for turn in (1, 2, 3, 4):
        # The recorded prompt_hash is checked: the prompt is rebuilt from the same fold.
        rendered = invoke("render", short_ledger, "--at-turn", turn)
        assert rendered.exit_code == 0, rendered.stderr
    assert invoke("memory", short_ledger, "--at-turn", 3).exit_code == 0

    records = _records(short_ledger)
    # The short turn cap finalized episodes the default one would not have.
    assert any(isinstance(rec.body, r.ContextEpisodeRecord) for rec in records)
    for _seq, body in _prompts(records):
        assert body.render_config["projection"] == msgspec.to_builtins(SHORT)

    assert projection_config_of(records) == SHORT
    assert state_after(records).config == SHORT
    assert memory_at(records, 3) == memory_at(records, 3, projection=SHORT)
    assert prompt_at(records, 3, agent_id="pc").matches


def test_evidence_appended_by_the_cli_is_derived_under_the_recorded_config(
    short_ledger: Path, tmp_path: Path
) -> None:
    ts = _records(short_ledger)[-1].ts
    turns = [
        rec
        for n in (5, 6)  # two turns: the second reaches the short turn cap, not the default one
        for rec in (
            r.Record(ts=ts + 10 * n, turn=n, body=r.TurnStarted(trigger="user", input=f"step {n}")),
            r.Record(ts=ts + 10 * n + 1, turn=n, body=r.Message(role="user", text=f"step {n}")),
            r.Record(ts=ts + 10 * n + 2, turn=n, body=r.Message(role="assistant", text=f"did step {n}")),
            r.Record(ts=ts + 10 * n + 3, turn=n, body=r.TurnEnded(outcome="completed")),
        )
    ]
    appended = invoke("append", short_ledger, write_jsonl(tmp_path / "turns.jsonl", turns))
    assert appended.exit_code == 0, appended.stderr
    assert isinstance(_records(short_ledger)[-1].body, r.ContextEpisodeRecord)
    verified = invoke("verify", short_ledger)
    assert verified.exit_code == 0, verified.stderr + verified.stdout


def test_the_projection_config_is_recorded_only_when_it_is_not_the_default(tmp_path: Path) -> None:
    path = tmp_path / "default"
    _run(path, DEFAULT_CONFIG, range(3))
    records = _records(path)
    assert all("projection" not in body.render_config for _seq, body in _prompts(records))
    assert projection_config_of(records) == DEFAULT_CONFIG

    budget = Budget(context_window=8_000, output_reserve=1_000)
    for config in (DEFAULT_CONFIG, SHORT):
        state = initial_state(config)
        for record in records:
            state = apply(state, record)
        recorded = build_context(state, budget, agent_id="pc").render_config
        assert ("projection" in recorded) == (config != DEFAULT_CONFIG)
        # In the form a record read back from the ledger holds, so the sticky episode
        # selection (which compares the two) keeps working after a replay.
        body = r.PromptRendered(
            working_memory_revision=0,
            compression_epoch=0,
            cache_key="k",
            prompt_hash="h",
            total_tokens=0,
            budget=0,
            estimator="holon-heuristic",
            render_config=recorded,
        )
        decoded = r.decode_json_record(r.encode_json_record(r.Record(seq=0, ts=0, body=body)))
        assert isinstance(decoded.body, r.PromptRendered)
        assert decoded.body.render_config == recorded


def test_a_ledger_whose_prompts_record_two_configs_is_refused(tmp_path: Path) -> None:
    # Agent.open refuses to go on under another config (see below), so the second config
    # is written into the last prompt by hand, as a program other than holon might.
    _run(tmp_path / "one", SHORT, range(4))
    records = _records(tmp_path / "one")
    later = _prompts(records)[-1][0]
    path = _rewritten(tmp_path / "two", records, msgspec.to_builtins(ProjectionConfig(turn_cap=3)), at=later)
    first = _prompts(records)[0][0]

    for args in (("verify",), ("replay", "--check"), ("render", "--at-turn", "1")):
        result = invoke(*args[:1], path, *args[1:])
        assert result.exit_code == 2, (args, result.stderr, result.stdout)
        message = result.stderr
        assert f"seq {later}" in message and f"seq {first}" in message, message
        assert "ProjectionConfig(turn_cap=2)" in message and "ProjectionConfig(turn_cap=3)" in message
        assert "body.render_config.projection" in message

    with pytest.raises(InvalidRecord) as caught:
        projection_config_of(_records(path))
    assert caught.value.where == f"seq {later}" and caught.value.field == "body.render_config.projection"


@pytest.mark.parametrize("bad", [{"turn_cap": 0}, {"turn_cap": "two"}, {"no_such_knob": 1}, None])
def test_a_malformed_recorded_projection_config_is_an_invalid_record(
    short_ledger: Path, tmp_path: Path, bad: Any
) -> None:
    records = _records(short_ledger)
    seq = _prompts(records)[1][0]
    path = _rewritten(tmp_path / "bad", records, bad, at=seq)

    result = invoke("verify", path)
    assert result.exit_code == 2, result.stderr + result.stdout
    assert f"seq {seq}" in result.stderr and "body.render_config.projection" in result.stderr
    with pytest.raises(InvalidRecord) as caught:
        projection_config_of(_records(path))
    assert caught.value.where == f"seq {seq}" and caught.value.field == "body.render_config.projection"


def test_a_divergence_without_a_recorded_config_hints_at_an_unrecorded_one(
    short_ledger: Path, tmp_path: Path
) -> None:
    # As a holon that did not record the config would have written it: neither in its
    # prompts nor in its derived records.
    records = [
        msgspec.structs.replace(rec, body=msgspec.structs.replace(rec.body, projection=None))
        if isinstance(rec.body, r.WorkingMemoryDelta | r.ContextEpisodeRecord)
        else rec
        for rec in _records(short_ledger)
    ]
    path = _rewritten(tmp_path / "old", records, ...)
    for args in (("verify",), ("replay", "--check")):
        result = invoke(*args[:1], path, *args[1:])
        assert result.exit_code == 1, (args, result.stderr)
        assert "non-default ProjectionConfig" in result.stderr, result.stderr


def test_appending_a_prompt_that_records_another_config_is_refused(short_ledger: Path) -> None:
    records = _records(short_ledger)
    _seq, body = _prompts(records)[-1]
    other = dict(body.render_config, projection=msgspec.to_builtins(ProjectionConfig(turn_cap=3)))
    turn = [
        r.Record(ts=records[-1].ts + 1, turn=5, body=r.TurnStarted(trigger="user", input="step 5")),
        r.Record(ts=records[-1].ts + 2, turn=5, body=msgspec.structs.replace(body, render_config=other)),
    ]
    with Ledger.open(short_ledger) as ledger:
        with pytest.raises(InvalidRecord) as caught:
            append_evidence(ledger, turn)
        assert ledger.head()[0] == records[-1].seq  # nothing appended
    assert caught.value.field == "body.render_config.projection"
    message = str(caught.value)
    assert "ProjectionConfig(turn_cap=3)" in message and "ProjectionConfig(turn_cap=2)" in message


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("written", "reopened"), [(SHORT, DEFAULT_CONFIG), (DEFAULT_CONFIG, SHORT)])
def test_agent_open_refuses_a_projection_config_other_than_the_ledgers(
    tmp_path: Path, written: ProjectionConfig, reopened: ProjectionConfig
) -> None:
    # A daemon restarted with a changed ProjectionConfig would append derived records under
    # it after the old ones, and the ledger would never verify again: refused, untouched.
    path = tmp_path / "agent"
    _run(path, written, range(3))
    before = _files(path)
    with pytest.raises(UsageError) as refused:
        Agent.open(path, config=AgentConfig(projection=reopened), clock=Tick())
    message = str(refused.value)
    assert "seq " in message and "start a new ledger" in message
    assert f"AgentConfig(projection={describe_projection(written)})" in message
    assert _files(path) == before
    # The config the ledger states opens it, and the agent goes on.
    _run(path, written, range(3, 4))
    assert invoke("verify", path).exit_code == 0


def test_agent_open_accepts_a_ledger_whose_prompts_state_no_config(tmp_path: Path) -> None:
    # Prompts rendered before render version 7 without a recorded config say nothing about
    # theirs: a daemon that ran a non-default config then must still reopen its ledger.
    records = _records(_run_and_return(tmp_path / "old", SHORT))
    old = []
    for rec in records:
        body = rec.body
        if isinstance(body, r.PromptRendered):
            config = {k: v for k, v in body.render_config.items() if k != "projection"}
            config["version"] = 6
            old.append(msgspec.structs.replace(rec, body=msgspec.structs.replace(body, render_config=config)))
        else:
            old.append(rec)
    path = tmp_path / "copy"
    with Ledger.create(path, agent_id="pc", fsync="never") as ledger:
        ledger.append_many(old)
    with Agent.open(path, config=AgentConfig(projection=SHORT), clock=Tick()) as agent:
        assert agent.report.folded == len(old)


def _run_and_return(path: Path, projection: ProjectionConfig) -> Path:
    _run(path, projection, range(3))
    return path
