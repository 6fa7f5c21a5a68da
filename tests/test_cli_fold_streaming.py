"""stats, memory, render and explain read the ledger in passes instead of holding every
record, and fold a whole ledger from its newest checkpoint that verifies (read-only): memory
stays flat however long the ledger, and every result equals the full fold's."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.records as r
from holon.context import RecordsView, RenderConfig, build_context
from holon.errors import HolonError, UsageError
from holon.ledger import Ledger
from holon.projections import ProjectionConfig
from holon.replay import (
    DEFAULT_BUDGET,
    MemoryView,
    PromptAt,
    RenderOverrides,
    append_evidence,
    find_turn,
    ledger_stats,
    memory_at,
    memory_of,
    next_prompt,
    next_prompt_of,
    projection_config_of,
    prompt_of,
    state_after,
    turn_spans,
)
from holon.replay.memory import _memory_view
from holon.replay.prompts import _recorded_settings, _render_next
from holon.replay.stats import _median
from holon.replay.turns import INPUT_ROLES
from holon.runtime import AgentConfig, checkpoint_resume
from tests.cli_support import build_ledger, fixture_names, invoke, live_records, tree_bytes, write_jsonl
from tests.ledger_support import AGENT, message, peak_memory, tool_output
from tests.runtime_support import load_daemon
from tests.strategies import agent_runs

SMALL, LARGE = 3_000, 12_000


def _long_ledger(path: Path, records: int) -> Path:
    """One turn with a recorded-less prompt point, then ``records`` messages and a few blobs."""
    with Ledger.create(
        path, agent_id=AGENT, fsync="never", blob_threshold=1024, segment_bytes=256 << 10
    ) as ledger:
        turn = [
            r.Record(body=r.TurnStarted(trigger="user", input="go"), ts=1, turn=1),
            r.Record(body=r.Message(role="user", text="go"), ts=2, turn=1),
            r.Record(body=r.TurnEnded(outcome="completed"), ts=3, turn=1),
        ]
        append_evidence(ledger, turn)
        ledger.append_many(message(i, 200) for i in range(records))
        ledger.append(tool_output(records, 5000))
    return path


COMMANDS = (
    ("stats", "--json"),
    ("memory", "--json"),
    ("memory", "--json", "--at-turn", "1"),
    ("render", "--format", "json"),
    ("render", "--format", "json", "--at-turn", "1"),
    ("explain", "--json"),
)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_whole_ledger_commands_hold_a_piece_of_it_however_long_it_is(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    # Before: each of these read every record into a list first; 4x the records took ~4x
    # the memory (1M records: ~795 MB).
    assert_flat(tmp_path, command)


def assert_flat(tmp_path: Path, command: tuple[str, ...]) -> None:
    """``holon <command> LEDGER`` holds about as much for 4x the records (ratio under 1.5)."""
    peaks = []
    for path in (_long_ledger(tmp_path / "small", SMALL), _long_ledger(tmp_path / "large", LARGE)):
        result = None

        def run(path: Path = path) -> None:
            nonlocal result
            result = invoke(command[0], path, *command[1:])

        peaks.append(peak_memory(run))
        assert result is not None and result.exit_code == 0, result.output if result else None
    assert peaks[1] < 1.5 * peaks[0], (command, peaks)


@pytest.mark.slow
def test_append_and_import_fold_the_ledger_without_holding_it(tmp_path: Path) -> None:
    # Before: `holon append` and `holon import` listed every record of the ledger to fold
    # the state the evidence goes onto; 4x the records took ~4x the memory.
    turn = [
        r.Record(body=r.TurnStarted(trigger="user", input="next"), ts=10**7, turn=10**6),
        r.Record(body=r.Message(role="user", text="next"), ts=10**7 + 1, turn=10**6),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=10**7 + 2, turn=10**6),
    ]
    evidence = write_jsonl(tmp_path / "evidence.jsonl", turn)
    assert_flat(tmp_path / "append", ("append", str(evidence)))
    chat = tmp_path / "chat.json"
    chat.write_text('[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]')
    assert_flat(tmp_path / "import", ("import", str(chat), "--from", "openai-chat"))


# --------------------------------------------------------------------------- the same results


def _reader(records: Iterable[r.Record]) -> Callable[[], Iterable[r.Record]]:
    held = tuple(records)
    return lambda: iter(held)  # a fresh iterator per pass, never the sequence itself


# The reference: what the list functions did before they read in passes — fold the held
# prefix the turn spans name, and render its history from the records held. The passes
# share only the rendering with it.


def _memory_reference(records: list[r.Record], turn: int | None) -> MemoryView:
    upto = len(records) if turn is None else find_turn(turn_spans(records), turn).end
    return _memory_view(turn, state_after(records[:upto], projection_config_of(records)))


def _next_reference(records: list[r.Record], agent_id: str, projection: ProjectionConfig) -> PromptAt:
    source = next((rec for rec in reversed(records) if _recorded_settings(rec) is not None), None)
    return _render_next(
        source,
        records[-1] if records else None,
        lambda: (state_after(records, projection), RecordsView(records)),
        agent_id=agent_id,
        overrides=RenderOverrides(),
    )


def _prompt_reference(records: list[r.Record], turn: int, call: int, agent_id: str) -> PromptAt:
    projection = projection_config_of(records)
    span = find_turn(turn_spans(records), turn)
    if call < 1:
        raise UsageError("call below 1")
    calls = [i for i in range(span.start, span.end) if isinstance(records[i].body, r.PromptRendered)]
    if not calls:
        if call != 1:
            raise UsageError("no call")
        end = span.start + 1
        while end < span.end:
            body = records[end].body
            if not (isinstance(body, r.Message) and body.role in INPUT_ROLES):
                break
            end += 1
        return msgspec.structs.replace(_next_reference(records[:end], agent_id, projection), turn=turn)
    if call > len(calls):
        raise UsageError("past the calls")
    record = records[calls[call - 1]]
    recorded = record.body
    assert isinstance(recorded, r.PromptRendered)
    state = state_after(records[: calls[call - 1]], projection)
    settings = _recorded_settings(record)
    budget, config = settings or (DEFAULT_BUDGET, RenderConfig())
    return PromptAt(
        turn=turn,
        before_seq=record.seq,
        prompt=build_context(
            state, budget, config, agent_id=agent_id, history=RecordsView(records[: calls[call - 1]])
        ),
        recorded=recorded,
        recorded_seq=record.seq,
        checked=settings is not None,
        reproducible=settings is not None,
        delta_confirmed=state.memory.pending is None,
    )


def _kind(action: Callable[[], object]) -> object:
    """What ``action`` returns as bytes, or the type of the error it raises."""
    try:
        return msgspec.json.encode(action())
    except HolonError as exc:
        return type(exc).__name__


def _assert_passes_equal_a_held_fold(records: list[r.Record], agent_id: str = AGENT) -> None:
    read = _reader(records)
    turns = sorted({span.turn for span in turn_spans(records)})
    probes = [None, *turns, (turns[-1] + 1) if turns else 1]
    for turn in probes:
        assert _kind(lambda t=turn: memory_of(read, t)) == _kind(lambda t=turn: _memory_reference(records, t))
    projection = projection_config_of(records)
    assert _kind(lambda: next_prompt_of(read, agent_id=agent_id)) == _kind(
        lambda: _next_reference(records, agent_id, projection)
    )
    for turn in probes[1:]:
        assert turn is not None
        # Call 0 is refused, call 2 is often past the turn's prompts (or a turn without any).
        for call in (0, 1, 2) if turn == probes[1] else (1, 2):
            assert _kind(lambda t=turn, c=call: prompt_of(read, t, agent_id=agent_id, call=c)) == _kind(
                lambda t=turn, c=call: _prompt_reference(records, t, c, agent_id)
            ), (turn, call)


@pytest.mark.slow
@pytest.mark.parametrize("name", fixture_names())
def test_the_streaming_folds_equal_the_list_folds_on_every_fixture(name: str) -> None:
    _assert_passes_equal_a_held_fold(list(live_records(name)), agent_id=name)


@settings(max_examples=40, deadline=None)
@given(agent_runs(max_turns=6, open_turn=True))
def test_the_streaming_folds_equal_the_list_folds_on_agent_runs(run: object) -> None:
    records = run.records  # type: ignore[attr-defined]
    _assert_passes_equal_a_held_fold(records)


@given(st.lists(st.integers(0, 50), min_size=1, max_size=40))
def test_the_median_of_counted_values_is_statistics_median(values: list[int]) -> None:
    ordered = sorted(Counter(values).items())
    assert float(_median(ordered, len(values))) == float(statistics.median(values))


def test_unknown_outcomes_count_every_intent_no_result_answers() -> None:
    # A result answers every intent with its call id, before or after it (as before the
    # counts were kept by id): c1 answered after, c2 answered before its intent, c3 twice
    # unanswered, c4 recorded unknown.
    bodies: list[r.RecordBody] = [
        r.ToolIntent(call_id="c1", tool="t", args={}),
        r.ToolResult(call_id="c2", tool="t", status="ok", output=""),
        r.ToolIntent(call_id="c2", tool="t", args={}),
        r.ToolResult(call_id="c1", tool="t", status="ok", output=""),
        r.ToolIntent(call_id="c3", tool="t", args={}),
        r.ToolIntent(call_id="c3", tool="t", args={}),
        r.ToolIntent(call_id="c4", tool="t", args={}),
        r.ToolResult(call_id="c4", tool="t", status="unknown", output=""),
    ]
    records = [r.Record(body=b, ts=i, seq=i) for i, b in enumerate(bodies)]
    stats = ledger_stats(records)
    assert (stats.tool_calls, stats.unknown_outcomes) == (5, 3)


# --------------------------------------------------------------------------- checkpoints


@pytest.fixture(scope="module")
def agent_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger written by holon.Agent (examples/daemon.py), checkpointed every 5 turns (at its head too)."""
    path = tmp_path_factory.mktemp("daemon") / "ledger"
    load_daemon().run(path, turns=25, quiet=True, config=AgentConfig(checkpoint_every=5, checkpoints_kept=2))
    assert len(list((path / "checkpoints").glob("*.ckpt"))) == 2
    return path


def _folds(path: Path) -> tuple[list[bytes], bool]:
    """memory, the next prompt and stats of ``path``, resumed from a checkpoint when one verifies."""
    with Ledger.open(path, readonly=True) as ledger:
        head = ledger.head()
        records = list(ledger.read())
        read = _reader(records)
        resume = checkpoint_resume(ledger, head)
        projection = projection_config_of(records)
        resumed = resume(projection) is not None
        folds = [
            msgspec.json.encode(memory_of(read, resume=resume)),
            msgspec.json.encode(next_prompt_of(read, agent_id=ledger.agent_id, resume=resume)),
            msgspec.json.encode(ledger_stats(read(), projection=projection, resume=resume)),
        ]
        full = [
            msgspec.json.encode(memory_at(records)),
            msgspec.json.encode(next_prompt(records, agent_id=ledger.agent_id)),
            msgspec.json.encode(ledger_stats(records)),
        ]
    assert folds == full
    return folds, resumed


def test_a_verified_checkpoint_gives_the_full_folds_results(agent_ledger: Path) -> None:
    _results, resumed = _folds(agent_ledger)
    assert resumed


def test_a_rejected_checkpoint_falls_back_to_an_older_one_or_the_full_fold(
    agent_ledger: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "ledger"
    files = tree_bytes(agent_ledger)
    for name, data in files.items():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes(data)
    expected, _ = _folds(agent_ledger)
    checkpoints = sorted((copy / "checkpoints").glob("*.ckpt"), reverse=True)
    # The newest damaged: the older one is used; both damaged: the full fold. Same results.
    for damaged in checkpoints:
        data = bytearray(damaged.read_bytes())
        data[-1] ^= 0xFF
        damaged.write_bytes(bytes(data))
        folds, resumed = _folds(copy)
        assert folds == expected
    assert not resumed
    # A checkpoint of another ledger state (its ledger cut short since) is never used.
    (copy / "checkpoints").rename(tmp_path / "moved")
    build_ledger(tmp_path / "other", fixture_names()[0])
    (tmp_path / "moved").rename(tmp_path / "other" / "checkpoints")
    _folds(tmp_path / "other")


def test_the_commands_write_nothing_and_print_what_the_full_fold_gives(
    agent_ledger: Path, tmp_path: Path
) -> None:
    before = tree_bytes(agent_ledger)
    with_checkpoints = [
        invoke(*c[:1], agent_ledger, *c[1:]).stdout_bytes
        for c in (("stats",), ("memory",), ("render",), ("explain",), ("memory", "--at-turn", "3"))
    ]
    assert tree_bytes(agent_ledger) == before
    copy = tmp_path / "ledger"
    for name, data in before.items():
        if not name.startswith("checkpoints"):
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).write_bytes(data)
    without = [
        invoke(*c[:1], copy, *c[1:]).stdout_bytes
        for c in (("stats",), ("memory",), ("render",), ("explain",), ("memory", "--at-turn", "3"))
    ]
    assert with_checkpoints == without
