"""holon.replay: turn spans, past prompts, memory, appending like the runtime, refs over a ledger."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import msgspec
import pytest

import holon.replay
from holon import records as r
from holon.context import restore, restore_bytes
from holon.errors import InvalidRecord, RefNotFound, UsageError
from holon.ledger import Ledger
from holon.projections import fold, owed_refresh, verify_derivations
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
from tests.live import LiveLedger


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


@pytest.mark.slow
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


# --------------------------------------------------------------------------- append_evidence: turn numbers


def _turn_three(tmp_path: Path) -> Ledger:
    """A ledger whose turn 3 is open (a work item, then a result brief: the refresh closes an episode)."""
    ledger = Ledger.create(tmp_path / "L", agent_id="a", fsync="never")
    append_evidence(
        ledger,
        [
            r.Record(body=r.TurnStarted(trigger="user"), ts=1, turn=3),
            r.Record(body=r.WorkItem(id="W1", objective="o", state="active"), ts=2, turn=3),
            r.Record(body=r.Brief(status="result", text="done"), ts=3, turn=3),
        ],
    )
    return ledger


@pytest.mark.parametrize("turn", [1, None])
def test_append_evidence_refuses_a_turn_ended_naming_another_turn(tmp_path: Path, turn: int | None) -> None:
    # The runtime closes turn N with a turn_ended of turn N. One of turn 1 (a turn number
    # going backwards in an imported history) or of no turn was appended, and the refresh
    # closed the turn's episode with summary "turns 3-1" (last_turn 1) or "turns 3-None"
    # (last_turn -1), the episode record itself filed under turn 1 or no turn.
    with _turn_three(tmp_path) as ledger:
        head = ledger.head()
        with pytest.raises(InvalidRecord, match=r"turn_ended of turn .* while turn 3 is open"):
            append_evidence(ledger, [r.Record(body=r.TurnEnded(outcome="completed"), ts=4, turn=turn)])
        assert ledger.head() == head  # refused before anything was written
        append_evidence(ledger, [r.Record(body=r.TurnEnded(outcome="completed"), ts=4, turn=3)])
        episodes = [rec for rec in ledger.read() if isinstance(rec.body, r.ContextEpisodeRecord)]
    assert [(e.body.first_turn, e.body.last_turn, e.turn) for e in episodes] == [(3, 3, 3)]


def test_append_evidence_refuses_a_record_naming_another_turn_inside_a_turn(tmp_path: Path) -> None:
    # A message of turn 1 inside turn 3 was filed under turn 1: not the turn's input, and
    # shown in the history as a turn of its own. A record without a turn stays accepted.
    with _turn_three(tmp_path) as ledger:
        with pytest.raises(InvalidRecord, match="message of turn 1 while turn 3 is open"):
            append_evidence(ledger, [r.Record(body=r.Message(role="user", text="hi"), ts=4, turn=1)])
        append_evidence(ledger, [r.Record(body=r.Message(role="user", text="hi"), ts=4)])
        assert verify_derivations(ledger.read()).ok


def _prompt(revision: int, epoch: int) -> r.PromptRendered:
    return r.PromptRendered(
        working_memory_revision=revision, compression_epoch=epoch, cache_key="k", prompt_hash="h",
        total_tokens=1, budget=1, estimator="holon-heuristic",
    )  # fmt: skip


@pytest.mark.parametrize(("revision", "epoch", "field"), [(9, 0, "revision 9"), (0, 5, "epoch 5")])
def test_append_evidence_refuses_a_prompt_showing_what_was_not_derived_yet(
    tmp_path: Path, revision: int, epoch: int, field: str
) -> None:
    # A prompt confirms the working-memory revision it showed. One claiming revision 9 of a
    # ledger at revision 1 was accepted: the fold's confirmed revision went past the
    # ledger's, and the next change (revision 2) counted as shown before any prompt showed it.
    with _turn_three(tmp_path) as ledger:
        folded = state_after(ledger.read())
        head = ledger.head()
        with pytest.raises(InvalidRecord, match=f"the prompt records .*{field}.*but the ledger has reached"):
            append_evidence(ledger, [r.Record(body=_prompt(revision, epoch), ts=4, turn=3)])
        assert ledger.head() == head
        current = _prompt(folded.memory.revision, folded.memory.compression_epoch)
        append_evidence(ledger, [r.Record(body=current, ts=4, turn=3)])
        assert verify_derivations(ledger.read()).ok


# --------------------------------------------------------------------------- a refresh a writer died in


def _turn_with_delta_and_episode() -> LiveLedger:
    """One turn whose refresh derives a delta and an episode (a result brief is a checkpoint)."""
    live = LiveLedger()
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    live.append(r.Brief(status="result", text="shipped"))
    derived = live.end_turn()
    assert [d.kind for d in derived] == [r.WorkingMemoryDelta.KIND, r.ContextEpisodeRecord.KIND]
    return live


def test_append_evidence_appends_the_episode_a_writer_died_before(tmp_path: Path) -> None:
    # The runtime appends a refresh's derived records one by one, so a crash can leave the
    # delta without its episode. append_evidence (holon append / import) only made up a
    # refresh owed as a whole, so the evidence it appended stood where the episode belonged
    # and the ledger no longer verified ("expected a derived context_episode").
    live = _turn_with_delta_and_episode()
    episode = live.records[-1]
    later = r.Record(body=r.TurnStarted(trigger="user"), ts=live.ts + 5, turn=2)
    with Ledger.create(tmp_path / "L", agent_id="a", fsync="never") as ledger:
        ledger.append_many(live.records[:-1])
        assert owed_refresh(state_after(ledger.read())) == (
            r.Record(body=episode.body, ts=episode.ts, turn=episode.turn),
        )
        append_evidence(ledger, [later])
        stored = list(ledger.read())
    assert [rec.kind for rec in stored[-2:]] == [r.ContextEpisodeRecord.KIND, r.TurnStarted.KIND]
    assert stored[-2].body == episode.body
    report = verify_derivations(stored)
    assert report.ok and not report.pending_refresh, report


def test_the_prompt_check_module_of_before_the_package_imports_with_a_warning() -> None:
    sys.modules.pop("holon.prompt_check", None)  # imported afresh: the warning is the import's
    with pytest.warns(DeprecationWarning, match=r"holon\.prompt_check is deprecated"):
        old = importlib.import_module("holon.prompt_check")
    assert old.check_prompts is holon.replay.check_prompts
    assert old.PromptsSummary is holon.replay.PromptsSummary
    assert old.config_from_recorded is holon.replay.config_from_recorded  # a name it had imported
    with pytest.raises(AttributeError, match=r"module 'holon\.prompt_check' has no attribute 'nothing'"):
        old.nothing  # noqa: B018


def test_a_name_replay_py_only_imported_resolves_with_a_warning_naming_its_home() -> None:
    with pytest.warns(DeprecationWarning, match=r"import it from holon\.ledger$"):
        assert holon.replay.Ledger is Ledger
    with pytest.warns(DeprecationWarning, match=r"import it from holon\.projections$"):
        assert holon.replay.fold is fold
    with pytest.warns(DeprecationWarning):
        assert holon.replay.r is r
    with pytest.raises(AttributeError, match=r"module 'holon\.replay' has no attribute 'nothing'"):
        holon.replay.nothing  # noqa: B018
