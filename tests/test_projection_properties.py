"""Hypothesis properties of the projections over generated agent runs (DESIGN.md invariants 1, 2, 7)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
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
    RuntimeState,
    apply,
    apply_runtime,
    derive_snapshot,
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

ROOT = Path(__file__).resolve().parent.parent
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _encoded(records: list[r.Record]) -> bytes:
    return b"\n".join(r.encode_msgpack_record(rec) for rec in records)


@PROPERTY
@given(agent_runs())
def test_replay_is_deterministic_and_equals_the_live_ledger(run: AgentRun) -> None:
    evidence = evidence_of(run.records)
    first, second = replay_live(evidence, run.config), replay_live(evidence, run.config)
    assert _encoded(first.records) == _encoded(second.records) == _encoded(run.records)
    assert msgspec.msgpack.encode(first.state) == msgspec.msgpack.encode(second.state)


@PROPERTY
@given(agent_runs(), st.data())
def test_incremental_equals_batch_equals_checkpoint_resume(run: AgentRun, data: st.DataObject) -> None:
    batch = fold(run.records, config=run.config)
    incremental = replay_live(evidence_of(run.records), run.config).state
    assert incremental == batch
    split = data.draw(st.integers(0, len(run.records)))
    head = fold(run.records[:split], config=run.config)
    restored = restore_checkpoint(
        encode_checkpoint(head, head_hash="h"), hash_at=lambda seq: "h", config=run.config
    )
    assert isinstance(restored, ProjectionState)
    resumed = fold(run.records[split:], restored)
    assert resumed == batch
    assert msgspec.msgpack.encode(resumed) == msgspec.msgpack.encode(batch)


@PROPERTY
@given(agent_runs())
def test_revision_increases_exactly_when_the_snapshot_changes(run: AgentRun) -> None:
    state = fold((), config=run.config)
    for i, record in enumerate(run.records):
        state = apply(state, record)
        if record.kind != r.TurnEnded.KIND:
            continue
        changed = derive_snapshot(state.runtime, run.config) != state.memory.snapshot
        following = run.records[i + 1 : i + 3]
        has_delta = any(rec.kind == r.WorkingMemoryDelta.KIND for rec in following)
        assert has_delta == changed
        after = fold([rec for rec in following if rec.kind in r.DERIVED_KINDS], state)
        assert after.memory.revision == state.memory.revision + changed
        assert after.memory.snapshot == derive_snapshot(state.runtime, run.config)


@PROPERTY
@given(agent_runs())
def test_pending_delta_clears_only_on_a_confirming_prompt(run: AgentRun) -> None:
    state = fold((), config=run.config)
    for record in run.records:
        before = state.memory.pending
        state = apply(state, record)
        after = state.memory.pending
        confirming = (
            isinstance(record.body, r.PromptRendered)
            and before is not None
            and record.body.working_memory_revision >= before.to_revision
        )
        if before is not None and after is None:
            assert confirming
        if confirming:
            assert after is None
        if isinstance(record.body, r.WorkingMemoryDelta):
            assert after == record.body
            if before is not None:
                assert record.body.from_revision == before.from_revision


@PROPERTY
@given(agent_runs())
def test_finalized_episodes_are_immutable_and_do_not_overlap(run: AgentRun) -> None:
    state = fold((), config=run.config)
    archived: list[r.ContextEpisodeRecord] = []
    for record in run.records:
        state = apply(state, record)
        current = list(state.memory.archive)
        assert current[: len(archived)] == archived
        if isinstance(record.body, r.ContextEpisodeRecord):
            episode = record.body
            assert current[-1] == episode and episode.episode_id == len(archived)
            assert episode.from_seq <= episode.to_seq < record.seq
            assert episode.first_turn <= episode.last_turn
            # Files as the working set keys them: one entry per file, none blank.
            files = episode.touched_files
            assert len(set(files)) == len(files)
            assert all(f and f == f.strip() and not f.startswith("./") for f in files)
            if archived:
                assert episode.from_seq > archived[-1].to_seq
            assert state.memory.compression_epoch == len(current)
        archived = current


def _sub_agents(record: r.Record) -> bool:
    body = record.body
    return isinstance(body, r.Message | r.ToolIntent | r.ToolResult | r.WorkPlan) and body.task_id is not None


def _own(runtime: RuntimeState) -> tuple[object, ...]:
    """What of runtime state is the agent's own work, without the seqs that place it."""
    return (
        [m.message for m in runtime.messages],
        [(t.call_id, t.command, t.intent, t.result) for t in runtime.tools],
        [(f.path, f.work_item_id, f.via) for f in runtime.files.values()],
        {item: plan.steps for item, plan in runtime.plans.items()},
        runtime.unscoped_plan.steps if runtime.unscoped_plan is not None else None,
    )


@PROPERTY
@given(agent_runs())
def test_a_sub_agents_evidence_is_its_tasks_never_the_agents_own(run: AgentRun) -> None:
    evidence = evidence_of(run.records)
    full = RuntimeState()
    own = RuntimeState()
    for record in evidence:
        full = apply_runtime(full, record, run.config)
        if not _sub_agents(record):
            own = apply_runtime(own, record, run.config)
        assert _own(full) == _own(own)
        # A task's lists stay within their cap however long it runs: the fold stays flat.
        cap = run.config.task_list_cap
        for task in (*full.tasks.values(), *full.finished_tasks):
            assert max(len(task.commands), len(task.files), len(task.plan), len(task.calls)) <= cap


@PROPERTY
@given(agent_runs())
def test_state_keeps_plans_and_decisions_of_open_items_only_each_decision_once(run: AgentRun) -> None:
    state = fold((), config=run.config)
    for record in run.records:
        state = apply(state, record)
        runtime = state.runtime
        # Every bucket belongs to an open item, so finishing the item frees it: state stays bounded.
        assert set(runtime.plans) <= set(runtime.work_items)
        assert set(runtime.decisions) <= set(runtime.work_items)
        # A decision lives in one place, its latest version: an old copy would read as valid.
        kept = [d for bucket in runtime.decisions.values() for d in bucket] + list(runtime.unscoped_decisions)
        assert len({d.id for d in kept}) == len(kept)
        if isinstance(record.body, r.Decision):
            # Kept where it now belongs, or carried; never beside an older version.
            placed = record.body.work_item_id in (None, *runtime.work_items)
            assert any(d.seq == record.seq for d in kept) == placed
            assert [d.seq for d in kept if d.id == record.body.id] == ([record.seq] if placed else [])


@PROPERTY
@given(agent_runs())
def test_every_generated_ledger_verifies(run: AgentRun) -> None:
    report = verify_derivations(run.records, config=run.config)
    assert report.ok, report.divergence and report.divergence.describe()
    assert not report.pending_refresh
    assert report.derived_checked == sum(rec.kind in r.DERIVED_KINDS for rec in run.records)


def _mutate(record: r.Record) -> r.Record:
    body = record.body
    if isinstance(body, r.WorkingMemoryDelta):
        return msgspec.structs.replace(
            record, body=msgspec.structs.replace(body, lines=(*body.lines, "forged"))
        )
    assert isinstance(body, r.ContextEpisodeRecord)
    return msgspec.structs.replace(record, body=msgspec.structs.replace(body, to_seq=body.to_seq - 1))


@PROPERTY
@given(agent_runs(), st.data())
def test_verification_catches_a_mutated_derived_record_at_its_seq(run: AgentRun, data: st.DataObject) -> None:
    derived = [i for i, rec in enumerate(run.records) if rec.kind in r.DERIVED_KINDS]
    if not derived:
        return
    i = data.draw(st.sampled_from(derived))
    mutated = list(run.records)
    mutated[i] = _mutate(mutated[i])
    report = verify_derivations(mutated, config=run.config)
    assert report.divergence is not None
    assert (report.divergence.seq, report.divergence.kind) == (run.records[i].seq, "mismatch")
    assert report.divergence.diffs
    # Renumbered as a ledger holds them (gapless): a gap is a UsageError, not a divergence.
    kept = run.records[:i] + run.records[i + 1 :]
    dropped = verify_derivations(
        [msgspec.structs.replace(rec, seq=seq) for seq, rec in enumerate(kept)], config=run.config
    )
    assert dropped.divergence is not None or dropped.pending_refresh


_DIGEST_SCRIPT = """
import hashlib, sys
import msgspec
from holon import records as r
from tests.live import replay_live
from holon.projections import ProjectionConfig
config = msgspec.json.decode(sys.argv[2].encode(), type=ProjectionConfig)
with open(sys.argv[1], "rb") as f:
    evidence = [r.decode_json_record(line) for line in f.read().splitlines()]
live = replay_live(evidence, config)
digest = hashlib.sha256()
for record in live.records:
    digest.update(r.encode_msgpack_record(record))
digest.update(msgspec.msgpack.encode(live.state))
print(digest.hexdigest())
"""


def _digest_in_subprocess(path: Path, config_json: str, hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _DIGEST_SCRIPT, str(path), config_json],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent_runs(max_turns=20))
def test_determinism_across_processes_with_different_hash_seeds(run: AgentRun) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        path.write_bytes(b"\n".join(r.encode_json_record(rec) for rec in evidence_of(run.records)))
        config_json = msgspec.json.encode(run.config).decode()
        digests = {_digest_in_subprocess(path, config_json, seed) for seed in ("0", "1234567")}
    local = hashlib.sha256()
    for record in run.records:
        local.update(r.encode_msgpack_record(record))
    local.update(msgspec.msgpack.encode(fold(run.records, config=run.config)))
    assert digests == {local.hexdigest()}


# --------------------------------------------------------------------------- a checkpoint at every position
# Invariants 2 and 7, harder than above: a checkpoint is taken at *every* position of a
# generated run (mid-turn, between a tool intent and its result, between a turn_ended and
# its derived records, right after an episode, right after a prompt) and the run is resumed
# from it three ways: folded on, verified on, and re-derived on from its evidence the way
# the runtime appends; and every field of one derived record is mutated in turn, verified
# from seq 0 and from a checkpoint before it.

# Each example below folds its run again at every position: fewer of them than PROPERTY.
FEWER_EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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


@FEWER_EXAMPLES
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


@FEWER_EXAMPLES
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
