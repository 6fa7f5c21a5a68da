"""`holon replay` reads the ledger in passes and prints each turn as it is folded, instead
of holding every record (and every turn): memory stays flat however long the ledger, and
the output is the bytes the held fold printed."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.records as r
from holon.cli.printing import _echo_json, _echo_json_list
from holon.errors import HolonError
from holon.ledger import Ledger
from holon.projections import verify_derivations
from holon.replay import (
    Replay,
    append_evidence,
    find_turn,
    projection_config_of,
    replay_of,
    replay_turns,
    state_after,
    turn_spans,
)
from tests.cli_support import build_ledger, fixture_names, invoke, live_records
from tests.ledger_support import AGENT, message, peak_memory
from tests.strategies import agent_runs
from tests.test_cli_fold_streaming import assert_flat


def _reader(records: Iterable[r.Record]) -> Callable[[], Iterable[r.Record]]:
    held = tuple(records)
    return lambda: iter(held)  # a fresh iterator per pass, never the sequence itself


COMMANDS = (
    ("replay",),
    ("replay", "--json"),
    ("replay", "--check"),
    ("replay", "--json", "--until-turn", "1"),
)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_replay_holds_a_piece_of_the_ledger_however_long_it_is(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    # Before: replay read every record into a list first (1M records: ~800 MB); 4x the
    # records took ~4x the memory.
    assert_flat(tmp_path, command)


def _many_turns(path: Path, turns: int) -> Path:
    """``turns`` turns of a question, an answer and a turn_ended each, with their refreshes."""
    with Ledger.create(path, agent_id=AGENT, fsync="never", segment_bytes=256 << 10) as ledger:
        for turn in range(1, turns + 1):
            ts = turn * 10
            append_evidence(
                ledger,
                [
                    r.Record(body=r.TurnStarted(trigger="user", input=f"question {turn}"), ts=ts, turn=turn),
                    msgspec.structs.replace(message(turn, 300), ts=ts + 1, turn=turn),
                    r.Record(body=r.TurnEnded(outcome="completed"), ts=ts + 2, turn=turn),
                ],
            )
    return path


@pytest.mark.slow
def test_the_turns_are_folded_as_they_come_not_held(tmp_path: Path) -> None:
    # A caller printing each turn (holon replay) holds one turn, not all of them. The records
    # are held outside the measure: what is measured is the passes over them.
    peaks = []
    for path in (_many_turns(tmp_path / "small", 150), _many_turns(tmp_path / "large", 600)):
        with Ledger.open(path, readonly=True) as ledger:
            read = _reader(ledger.read())
        replay = replay_of(read)

        def run(replay: Replay = replay) -> None:
            for _turn in replay.turns():
                pass

        peaks.append(peak_memory(run))
        assert replay.state is not None and replay.state.seq == replay.last_seq
    assert peaks[1] < 1.5 * peaks[0], peaks


# --------------------------------------------------------------------------- the same results


def _reference(records: list[r.Record], until_turn: int | None) -> object:
    """What `holon replay` computed before it read in passes: the held prefix, folded."""
    projection = projection_config_of(records)
    end = len(records) if until_turn is None else find_turn(turn_spans(records), until_turn).end
    held = records[:end]
    turns = list(replay_turns(held, config=projection))
    final = state_after(held, projection) if held else None
    return (len(held), len(turns), held[-1].seq if held else -1, projection, turns, final)


def _passes(records: list[r.Record], until_turn: int | None) -> object:
    replay = replay_of(_reader(records), until_turn=until_turn)
    turns = list(replay.turns())
    final = replay.state if replay.records else None
    return (replay.records, replay.turn_count, replay.last_seq, replay.projection, turns, final)


def _kind(action: Callable[[], object]) -> object:
    """What ``action`` returns as bytes, or the type and message of the error it raises."""
    try:
        return msgspec.json.encode(action())
    except HolonError as exc:
        return (type(exc).__name__, str(exc))


def _assert_passes_equal_a_held_fold(records: list[r.Record]) -> None:
    turns = sorted({span.turn for span in turn_spans(records)})
    for until in [None, *turns, (turns[-1] + 1) if turns else 1]:
        passes = _kind(lambda u=until: _passes(records, u))
        assert passes == _kind(lambda u=until: _reference(records, u)), until


@pytest.mark.slow
@pytest.mark.parametrize("name", fixture_names())
def test_the_passes_equal_the_held_fold_on_every_fixture(name: str) -> None:
    _assert_passes_equal_a_held_fold(list(live_records(name)))


@settings(max_examples=40, deadline=None)
@given(agent_runs(max_turns=6, open_turn=True))
def test_the_passes_equal_the_held_fold_on_agent_runs(run: object) -> None:
    _assert_passes_equal_a_held_fold(run.records)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", fixture_names())
def test_replay_json_is_the_held_documents_bytes(name: str, tmp_path: Path) -> None:
    path = build_ledger(tmp_path / "L", name)
    records = list(live_records(name))
    projection = projection_config_of(records)
    turns = sorted({span.turn for span in turn_spans(records)})
    for until in (None, turns[len(turns) // 2]):
        args = ["--json", "--check"] + ([] if until is None else ["--until-turn", str(until)])
        end = len(records) if until is None else find_turn(turn_spans(records), until).end
        held = records[:end]
        final = state_after(held, projection)
        document = {
            "agent_id": name,
            "records": len(held),
            "last_seq": held[-1].seq,
            "turns": list(replay_turns(held, config=projection)),
            "revision": final.memory.revision,
            "compression_epoch": final.memory.compression_epoch,
            "episodes": final.memory.archived_episodes,
            "check": verify_derivations(held, config=projection),
        }
        expected = msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"
        assert invoke("replay", path, *args).stdout_bytes == expected, until


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.text(max_size=5).filter(lambda k: k != "items"), _JSON, max_size=3),
    st.lists(_JSON, max_size=4),
    st.dictionaries(st.text(max_size=5).filter(lambda k: k != "items"), _JSON, max_size=3),
)
def test_a_list_printed_item_by_item_is_the_whole_documents_bytes(
    head: dict[str, Any], items: list[Any], tail: dict[str, Any]
) -> None:
    tail = {k: v for k, v in tail.items() if k not in head}
    whole = _printed(lambda: _echo_json({**head, "items": items, **tail}))
    assert _printed(lambda: _echo_json_list(head, "items", iter(items), lambda: tail)) == whole


def _printed(action: Callable[[], None]) -> str:
    """What ``action`` prints with click.echo."""
    written: list[str] = []

    def echo(message: str = "", nl: bool = True, **_: object) -> None:
        written.append(f"{message}\n" if nl else message)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("click.echo", echo)
        action()
    return "".join(written)
