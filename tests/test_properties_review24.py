"""Review 24: DESIGN.md invariants 2 (incremental equals batch) and 7 (replay verification), harder.

test_projection_properties checks a checkpoint at one drawn position and a mutation of
two fields (a delta's lines, an episode's to_seq). Here a checkpoint is taken at *every*
position of a generated run (mid-turn, between a tool intent and its result, between a
turn_ended and its derived records, right after an episode, right after a prompt) and
the run is resumed from it three ways: folded on, verified on, and re-derived on from
its evidence the way the runtime appends; and every field of one derived record is
mutated in turn, verified from seq 0 and from a checkpoint before it.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon import records as r
from holon.errors import UsageError
from holon.ledger import Ledger, import_jsonl
from holon.ledger.jsonl import blobs_dir_for
from holon.projections import (
    ProjectionConfig,
    ProjectionState,
    apply,
    encode_checkpoint,
    fold,
    owed_refresh,
    post_turn_refresh,
    refresh_before_prompt,
    restore_checkpoint,
    verify_derivations,
)
from holon.replay import projection_config_of
from holon.runtime import Agent, AgentConfig
from tests.cli_support import invoke, tree_bytes
from tests.live import LiveLedger, evidence_of, replay_live
from tests.runtime_support import Tick
from tests.strategies import AgentRun, agent_runs, configs

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _restored(state: ProjectionState) -> ProjectionState:
    """``state`` through checkpoint bytes, as Agent.open and the CLI's fast path get it."""
    back = restore_checkpoint(
        encode_checkpoint(state, head_hash="h"), hash_at=lambda seq: "h", config=state.config
    )
    assert isinstance(back, ProjectionState), back
    return back


def _continue_live(state: ProjectionState, last_ts: int | None, tail: list[r.Record]) -> list[r.Record]:
    """The records the runtime appends after resuming at ``state``, given the tail's evidence.

    First what the checkpoint still owes (a refresh after a turn_ended, or the episode
    after its delta), then the evidence, each prompt preceded by the refresh before a
    prompt and each turn_ended followed by the post-turn refresh.
    """
    out: list[r.Record] = []

    def put(record: r.Record) -> None:
        nonlocal state, last_ts
        stored = r.Record(body=record.body, ts=record.ts, turn=record.turn, seq=state.seq + 1)
        out.append(stored)
        state = apply(state, stored)
        last_ts = stored.ts

    for record in owed_refresh(state):
        put(record)
    for record in tail:
        if record.kind in r.DERIVED_KINDS:
            continue
        if record.kind == r.PromptRendered.KIND:
            assert last_ts is not None
            for derived in refresh_before_prompt(state, ts=last_ts):
                put(derived)
        put(record)
        if record.kind == r.TurnEnded.KIND:
            for derived in post_turn_refresh(state):
                put(derived)
    return out


@PROPERTY
@given(agent_runs(max_turns=8))
def test_a_checkpoint_at_every_position_resumes_to_the_same_state_records_and_report(run: AgentRun) -> None:
    records = run.records
    batch = fold(records, config=run.config)
    encoded = msgspec.msgpack.encode(batch)
    derived = sum(rec.kind in r.DERIVED_KINDS for rec in records)
    state = fold((), config=run.config)
    for split in range(len(records) + 1):
        if split:
            state = apply(state, records[split - 1])
        restored = _restored(state)
        assert restored == state
        tail = records[split:]
        # Folded on: the batch state, byte for byte.
        resumed = fold(tail, restored)
        assert msgspec.msgpack.encode(resumed) == encoded, f"split {split}"
        # Verified on: ok, every derived record of the tail checked (none left pending).
        report = verify_derivations(tail, state=restored, last_ts=records[split - 1].ts if split else None)
        assert report.ok, (split, report.divergence and report.divergence.describe())
        assert report.derived_checked == sum(rec.kind in r.DERIVED_KINDS for rec in tail)
        assert not report.pending_refresh
        # Re-derived on, as the runtime appends after Agent.open: the same records.
        last_ts = records[split - 1].ts if split else None
        assert _continue_live(restored, last_ts, tail) == tail, f"split {split}"
    assert derived == sum(rec.kind in r.DERIVED_KINDS for rec in records)


def test_a_prompt_refresh_right_after_a_checkpoint_has_its_ts_checked() -> None:
    # The delta the refresh before a prompt appends carries the ts of the record before it,
    # which a state does not keep: verified from a state folded up to that record, a delta
    # whose ts was changed was reported ok, where the whole ledger reports it at its seq.
    live = LiveLedger()
    live.append(r.SystemPolicy(text="p"), in_turn=False)
    live.start_turn("user", "go")
    live.append(r.Decision(id="D1", text="use sqlite"))
    live.end_turn()
    live.start_turn("user", "more")
    live.append(r.Decision(id="D1", text="use postgres"))  # supersedes: refreshed before the prompt
    live.render()
    records = live.records
    (i,) = [j for j, rec in enumerate(records) if rec.kind == r.WorkingMemoryDelta.KIND and rec.turn == 2]
    assert records[i + 1].kind == r.PromptRendered.KIND
    mutated = [*records[:i], msgspec.structs.replace(records[i], ts=records[i].ts + 5), *records[i + 1 :]]
    whole = verify_derivations(mutated)
    resumed = verify_derivations(mutated[i:], state=fold(mutated[:i]), last_ts=mutated[i - 1].ts)
    for report in (whole, resumed):
        assert report.divergence is not None
        assert (report.divergence.seq, [d.field for d in report.divergence.diffs]) == (i, ["ts"])
    assert verify_derivations(records[i:], state=fold(records[:i]), last_ts=records[i - 1].ts).ok


# --------------------------------------------------------------------------- one derived record mutated


def _other(value: Any, *, field: str) -> Any:
    """A value of the same type as ``value`` that differs from it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "~"
    if isinstance(value, tuple):
        return (*value, "forged") if not value or isinstance(value[0], str) else value[:-1]
    if value is None:
        return {"turn_cap": 3} if field == "projection" else "forged"
    raise AssertionError(f"no mutation for {field}={value!r}")


def _mutations(record: r.Record) -> list[tuple[str, r.Record]]:
    """``record`` with one field changed, for every field of its envelope (but seq) and body."""
    body = record.body
    out: list[tuple[str, r.Record]] = [
        ("ts", msgspec.structs.replace(record, ts=record.ts + 1)),
        ("turn", msgspec.structs.replace(record, turn=(record.turn or 0) + 1)),
    ]
    for name in body.__struct_fields__:
        value = getattr(body, name)
        if name == "reason" and isinstance(body, r.WorkingMemoryDelta):
            changed: Any = "turn_completed" if value != "turn_completed" else "plan_changed"
        elif name == "boundary_reason":
            changed = "turn_cap" if value != "turn_cap" else "wait_boundary"
        elif name == "work_state":
            changed = "done" if value != "done" else "abandoned"
        elif name == "projection" and value is not None:
            changed = None
        else:
            changed = _other(value, field=name)
        try:
            mutated = msgspec.structs.replace(body, **{name: changed})
            # Through the codec, as a ledger would hold it: a field no body may hold is refused there.
            mutated = r.decode_msgpack_record(
                r.encode_msgpack_record(msgspec.structs.replace(record, body=mutated))
            ).body
        except (msgspec.ValidationError, ValueError, TypeError):
            continue
        out.append((f"body.{name}", msgspec.structs.replace(record, body=mutated)))
    return out


def _draw_derived(run: AgentRun, data: st.DataObject) -> int | None:
    """The index of one of the run's derived records (None: it has none)."""
    derived = [i for i, rec in enumerate(run.records) if rec.kind in r.DERIVED_KINDS]
    return data.draw(st.sampled_from(derived), label="derived index") if derived else None


@PROPERTY
@given(agent_runs(max_turns=8), st.data())
def test_every_field_of_one_derived_record_mutated_is_named_at_its_seq(
    run: AgentRun, data: st.DataObject
) -> None:
    i = _draw_derived(run, data)
    if i is None:
        return
    split = data.draw(st.integers(0, i), label="checkpoint before it")
    start = _restored(fold(run.records[:split], config=run.config))
    for field, mutated_record in _mutations(run.records[i]):
        mutated = [*run.records[:i], mutated_record, *run.records[i + 1 :]]
        for report in (
            verify_derivations(mutated, config=run.config),
            verify_derivations(
                mutated[split:], state=start, last_ts=mutated[split - 1].ts if split else None
            ),
        ):
            divergence = report.divergence
            assert divergence is not None, f"{field} mutated at seq {i}: reported ok"
            assert (divergence.seq, divergence.kind) == (i, "mismatch"), (field, divergence.describe())
            assert field in [d.field for d in divergence.diffs], (field, divergence.describe())


# ------------------------------------------------------------------ the same, through a ledger and the CLI


def _write_jsonl(path: Path, records: list[r.Record]) -> None:
    path.write_bytes(b"".join(r.encode_json_record(rec) + b"\n" for rec in records))


def _imported(tmp: Path, name: str, records: list[r.Record], blobs: dict[str, bytes]) -> Path:
    """A ledger holding ``records``, imported from JSONL as `holon import` does."""
    source = tmp / f"{name}.jsonl"
    _write_jsonl(source, records)
    store = blobs_dir_for(source)
    store.mkdir()
    for digest, data in blobs.items():
        (store / digest).write_bytes(data)
    path = tmp / name
    with Ledger.create(path, agent_id=name, fsync="never") as ledger:
        import_jsonl(source, ledger, require_empty=True)
    return path


def _cli_divergence(path: Path) -> tuple[int, str]:
    """(exit code, the seq `holon verify --json` and `holon replay --check --json` name, or 'ok')."""
    verify = invoke("verify", path, "--json")
    found = json.loads(verify.stdout) if verify.stdout.startswith("{") else None
    divergence = found and found["derivations"] and found["derivations"]["divergence"]
    named = "ok" if divergence is None else str(divergence["seq"])
    if found is None:
        named = verify.stderr.strip()
    return verify.exit_code, named


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent_runs(max_turns=6), st.data())
def test_holon_verify_names_the_one_mutated_derived_record_of_an_imported_ledger(
    run: AgentRun, data: st.DataObject
) -> None:
    i = _draw_derived(run, data)
    if i is None:
        return
    field, mutated_record = data.draw(st.sampled_from(_mutations(run.records[i])), label="mutation")
    mutated = [*run.records[:i], mutated_record, *run.records[i + 1 :]]
    with tempfile.TemporaryDirectory() as tmp:
        code, named = _cli_divergence(_imported(Path(tmp), "mutated", mutated, run.blobs))
    if field == "body.projection" and (code, named) != (1, str(i)):
        if code == 2:
            # Two records state two configs: the error names both seqs (which one was changed
            # the ledger cannot tell), the mutated one among them.
            assert "field `body.projection`" in named and re.search(rf"\bseq {i}\b", named), named
            return
        # The one record stating a config now states another: the ledger is what an agent under that
        # config would have written, and nothing in it tells the config it was really derived under.
        stated = projection_config_of(mutated)
        assert (code, named) == (0, "ok") and replay_live(evidence_of(mutated), stated).records == mutated
        return
    assert (code, named) == (1, str(i)), (field, named)


# ----------------------------------------------------------------- a crash anywhere, resumed by Agent.open


def _segment_tail(path: Path) -> Path:
    return sorted((path / "segments").glob("*.seg"))[-1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent_runs(max_turns=6), st.data())
def test_a_ledger_cut_anywhere_and_reopened_verifies_and_resumes_from_its_checkpoint(
    run: AgentRun, data: st.DataObject
) -> None:
    # The writer died after record k (a torn frame after it, maybe): Agent.open cuts the tail,
    # appends what the crash left owed (the refresh, unknown outcomes, the interrupted turn),
    # and the ledger verifies. A checkpoint written then and the run's records appended after
    # it resume to the state a full fold reaches.
    k = data.draw(st.integers(1, len(run.records)), label="records kept")
    torn = data.draw(st.sampled_from([b"", b"\x10\x00", b"\xff" * 7]), label="torn tail")
    config = AgentConfig(projection=run.config, checkpoint_every=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agent"
        with Ledger.create(path, agent_id="a", fsync="never") as ledger:
            for digest, blob in run.blobs.items():
                assert ledger.blobs.put(blob).hash == digest
            ledger.append_many(run.records[:k])
        with _segment_tail(path).open("ab") as handle:
            handle.write(torn)
        clock = Tick(run.records[k - 1].ts)
        with Agent.open(path, config=config, clock=clock) as agent:
            agent.checkpoint()
            recovered = agent.seq + 1
        code, named = _cli_divergence(path)
        assert (code, named) == (0, "ok")
        with Ledger.open(path, fsync="never") as ledger:
            records = list(ledger.read(0))
            report = verify_derivations(records, config=run.config)
            assert report.ok and not report.pending_refresh, (
                report.divergence and report.divergence.describe()
            )
            assert records[:k] == run.records[:k]
            # More evidence after the checkpoint, as a later process would append it.
            more = [rec for rec in run.records[k:] if rec.kind not in r.DERIVED_KINDS and rec.turn is None]
            ledger.append_many([r.Record(body=rec.body, ts=clock(), turn=None) for rec in more])
            records = list(ledger.read(0))
        with Agent.open(path, config=config, clock=clock) as agent:
            assert agent.report.checkpoint_seq == recovered - 1
            assert agent.projection == fold(records, config=run.config)


# --------------------------------------------------------------------------- reopened under another config


def test_a_ledger_that_derived_nothing_is_refused_under_a_config_its_turns_derive_under() -> None:
    # Two timer turns that changed nothing under turn_cap=4 state no config (their input is a
    # channel's, not an operator's request, from which working memory would derive work).
    # Opened under
    # turn_cap=1 the agent was let in: recovery appended an episode after the last turn
    # and `holon verify` failed for good at the first (an episode missing after turn 1),
    # telling the user the writer skipped the post-turn refresh.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agent"
        clock = Tick()
        with Agent.open(
            path, agent_id="a", config=AgentConfig(projection=ProjectionConfig(turn_cap=4)), clock=clock
        ) as agent:
            for i in range(2):
                with agent.turn(input=f"tick {i}", trigger="timer", role="channel") as turn:
                    turn.record_message("nothing to do")
        before = tree_bytes(path)
        with pytest.raises(UsageError) as refused:
            Agent.open(path, config=AgentConfig(projection=ProjectionConfig(turn_cap=1)), clock=clock)
        message = str(refused.value)
        assert "holds no derived record, but under ProjectionConfig(turn_cap=1)" in message
        assert "after the turn_ended at seq 3 derives a context_episode it lacks (seq 4)" in message
        assert tree_bytes(path) == before
        # A config under which those turns derive nothing is let in, and the ledger verifies.
        with (
            Agent.open(
                path, config=AgentConfig(projection=ProjectionConfig(turn_cap=3)), clock=clock
            ) as agent,
            agent.turn(input="tick 3", trigger="timer", role="channel") as turn,
        ):
            turn.record_message("nothing to do")
        assert _cli_divergence(path) == (0, "ok")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent_runs(max_turns=5), configs, st.data())
def test_an_agent_reopened_under_another_config_is_refused_or_keeps_the_ledger_verifiable(
    run: AgentRun, other: ProjectionConfig, data: st.DataObject
) -> None:
    k = data.draw(st.integers(1, len(run.records)), label="records kept")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agent"
        with Ledger.create(path, agent_id="a", fsync="never") as ledger:
            for blob in run.blobs.values():
                ledger.blobs.put(blob)
            ledger.append_many(run.records[:k])
        before = tree_bytes(path)
        clock = Tick(run.records[k - 1].ts)
        try:
            agent = Agent.open(path, config=AgentConfig(projection=other, checkpoint_every=0), clock=clock)
        except UsageError:
            assert tree_bytes(path) == before  # refused before recovery appended anything
            return
        with agent:
            if agent.current_turn is None:
                with agent.turn(input="one more", trigger="timer") as turn:
                    turn.record_message("nothing to do")
        assert _cli_divergence(path) == (0, "ok")
