"""Hypothesis properties of the projections over generated agent runs (DESIGN.md invariants 1, 2, 7)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon import records as r
from holon.projections import (
    ProjectionState,
    RuntimeState,
    apply,
    apply_runtime,
    derive_snapshot,
    encode_checkpoint,
    fold,
    restore_checkpoint,
    verify_derivations,
)
from tests.live import evidence_of, replay_live
from tests.strategies import AgentRun, agent_runs

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
