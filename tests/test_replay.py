"""holon.replay: turn spans, past prompts, memory, appending like the runtime, refs over a ledger."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.context import restore, restore_bytes
from holon.errors import InvalidRecord, RefNotFound, UsageError
from holon.ledger import Ledger
from holon.projections import fold, verify_derivations
from holon.replay import (
    LedgerRefSource,
    RenderOverrides,
    append_evidence,
    memory_at,
    next_prompt,
    prompt_at,
    state_after,
    turn_spans,
)
from tests.cli_support import build_ledger, fixture_names, live_records


def _prompted_turns(records: tuple[r.Record, ...]) -> list[tuple[int, int]]:
    """(turn, call) of every recorded prompt."""
    out: list[tuple[int, int]] = []
    for span in turn_spans(records):
        calls = sum(isinstance(records[i].body, r.PromptRendered) for i in range(span.start, span.end))
        out.extend((span.turn, call) for call in range(1, calls + 1))
    return out


def test_turn_spans_cover_each_turn_and_its_derived_records() -> None:
    records = live_records("boundary_result_checkpoint")
    spans = turn_spans(records)
    assert [s.turn for s in spans] == [1, 2]
    for span in spans:
        assert isinstance(records[span.start].body, r.TurnStarted)
        inside = records[span.start : span.end]
        ended = [i for i, rec in enumerate(inside) if isinstance(rec.body, r.TurnEnded)]
        assert len(ended) == 1 and inside[ended[0]].seq == span.ended_seq
        assert all(rec.kind in r.DERIVED_KINDS for rec in inside[ended[0] + 1 :])
    assert spans[-1].end == len(records)
    open_turn = turn_spans(records[: spans[-1].start + 2])
    assert open_turn[-1].ended_seq is None and open_turn[-1].end == spans[-1].start + 2


@pytest.mark.parametrize("name", fixture_names())
def test_every_recorded_prompt_is_reproduced_byte_for_byte(name: str, tmp_path: Path) -> None:
    path = build_ledger(tmp_path / "L", name)
    with Ledger.open(path, readonly=True) as ledger:
        records = tuple(ledger.read())
    prompted = _prompted_turns(records)
    assert prompted
    mismatched = []
    for turn, call in prompted:
        found = prompt_at(records, turn, agent_id=name, call=call)
        assert found.checked and found.recorded is not None
        if not found.matches:
            mismatched.append(turn)
    assert mismatched == []


def test_overrides_are_applied_and_unchecked() -> None:
    records = live_records("boundary_turn_cap")
    found = prompt_at(
        records, 5, agent_id="boundary_turn_cap", overrides=RenderOverrides(context_window=4000)
    )
    assert not found.checked and not found.matches and found.recorded is not None
    budget = found.prompt.render_config["budget"]
    assert budget["context_window"] == 4000 and budget["output_reserve"] == 1000
    assert found.prompt.identity.prompt_cache_key == "golden"
    with pytest.raises(UsageError, match="there is no call 2"):
        prompt_at(records, 5, agent_id="boundary_turn_cap", call=2)
    with pytest.raises(UsageError, match=r"turns 1\.\.14"):
        prompt_at(records, 15, agent_id="boundary_turn_cap")


def test_a_changed_estimator_version_is_named_as_the_likely_reason() -> None:
    records = list(live_records("boundary_turn_cap"))
    index = next(i for i, rec in enumerate(records) if isinstance(rec.body, r.PromptRendered))
    body = records[index].body
    assert isinstance(body, r.PromptRendered)
    config = {**body.render_config, "estimator_version": "0-old", "version": 0}
    records[index] = msgspec.structs.replace(
        records[index], body=msgspec.structs.replace(body, render_config=config)
    )
    found = prompt_at(records, records[index].turn or 0, agent_id="boundary_turn_cap")
    reasons = found.mismatch_reasons()
    assert any("estimator holon-heuristic was version 0-old" in reason for reason in reasons)
    assert any("renderer version 0" in reason for reason in reasons)


def test_a_broken_render_config_is_an_invalid_record() -> None:
    records = list(live_records("boundary_turn_cap"))
    index = next(i for i, rec in enumerate(records) if isinstance(rec.body, r.PromptRendered))
    body = records[index].body
    assert isinstance(body, r.PromptRendered)
    broken = {**body.render_config, "budget": {"context_window": "lots"}}
    records[index] = msgspec.structs.replace(
        records[index], body=msgspec.structs.replace(body, render_config=broken)
    )
    with pytest.raises(InvalidRecord, match=f"seq {records[index].seq}.*render_config"):
        prompt_at(records, records[index].turn or 0, agent_id="boundary_turn_cap")


def test_next_prompt_renders_after_the_last_record() -> None:
    records = live_records("boundary_wait_boundary")
    found = next_prompt(records, agent_id="a")
    assert found.before_seq == records[-1].seq + 1 and found.turn is None
    assert found.prompt.identity.working_memory_revision == fold(records).memory.revision


def test_memory_at_is_the_fold_after_the_turns_refresh() -> None:
    records = live_records("boundary_task_rejoined")
    end = turn_spans(records)[0].end
    view = memory_at(records, 1)
    state = fold(records[:end])
    assert view.after_seq == records[end - 1].seq
    assert (view.revision, view.compression_epoch, view.snapshot) == (
        state.memory.revision,
        state.memory.compression_epoch,
        state.memory.snapshot,
    )
    assert memory_at(records).revision == fold(records).memory.revision


def _evidence(name: str) -> list[r.Record]:
    return [
        msgspec.structs.replace(rec, seq=-1) for rec in live_records(name) if rec.kind not in r.DERIVED_KINDS
    ]


def test_append_evidence_writes_what_the_live_runtime_wrote(tmp_path: Path) -> None:
    name = "boundary_active_work_switched"
    with Ledger.create(tmp_path / "L", agent_id=name, fsync="never") as ledger:
        seqs = append_evidence(ledger, _evidence(name))
        stored = list(ledger.read())
    assert seqs == list(range(len(stored)))
    assert [r.encode_json_record(rec) for rec in stored] == [
        r.encode_json_record(rec) for rec in live_records(name)
    ]
    assert verify_derivations(stored).ok


def test_append_evidence_appends_an_owed_refresh_first(tmp_path: Path) -> None:
    name = "boundary_result_checkpoint"
    evidence = _evidence(name)
    first_end = next(i for i, rec in enumerate(evidence) if isinstance(rec.body, r.TurnEnded)) + 1
    with Ledger.create(tmp_path / "L", agent_id=name, fsync="never") as ledger:
        # A writer that died right after turn_ended: its refresh was never appended.
        ledger.append_many(evidence[:first_end])
        append_evidence(ledger, evidence[first_end:], state=state_after(ledger.read()))
        stored = list(ledger.read())
    assert [r.encode_json_record(rec) for rec in stored] == [
        r.encode_json_record(rec) for rec in live_records(name)
    ]


def test_append_evidence_appends_nothing_on_error(tmp_path: Path) -> None:
    name = "boundary_turn_cap"
    records = list(live_records(name))
    with Ledger.create(tmp_path / "L", agent_id=name, fsync="never") as ledger:
        with pytest.raises(InvalidRecord, match=r"input record 7.*derived record"):
            append_evidence(ledger, [msgspec.structs.replace(rec, seq=-1) for rec in records])
        assert ledger.head()[0] == -1
        with pytest.raises(UsageError, match="folded to seq"):
            append_evidence(ledger, [], state=fold(records))


def test_ledger_ref_source_restores_records_blobs_and_episodes(tmp_path: Path) -> None:
    path = build_ledger(tmp_path / "L", "boundary_wait_boundary")
    output = "x" * 9000
    with Ledger.open(path) as ledger:
        seq = ledger.append(
            r.Record(body=r.ToolResult(call_id="c", tool="bash", status="ok", output=output), ts=1)
        )
    with Ledger.open(path, readonly=True) as ledger:
        source = LedgerRefSource(ledger)
        assert restore_bytes(f"ledger:{seq}", source) == output.encode()
        stored = ledger.get(seq).body
        assert isinstance(stored, r.ToolResult) and stored.blob is not None
        assert restore(f"blob:{stored.blob.hash}", source) == output.encode()
        episode = restore("episode:0", source)
        assert isinstance(episode, r.ContextEpisodeRecord) and episode.boundary_reason == "wait_boundary"
        with pytest.raises(RefNotFound, match=r"episodes 0\.\.0"):
            restore("episode:1", source)
