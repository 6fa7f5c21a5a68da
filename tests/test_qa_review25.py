"""QA review 25: a ledger an older holon wrote, met by this one.

A version 1 ledger (sealed segments of one zstd frame, the header saying 1) stays readable
by the holon that wrote it until this holon seals a segment in the new layout: an open for
writing that seals nothing (a refused append, an Agent.open refusing its agent id or its
projection config, `holon append` of an empty file) leaves the header alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from holon.cli import main
from holon.errors import UsageError
from holon.ledger import FORMAT_VERSION, Ledger
from holon.ledger.compression import compress
from holon.ledger.segments import list_segments, load_segment
from holon.projections import ProjectionConfig
from holon.runtime import Agent, AgentConfig
from tests.ledger_support import AGENT, message
from tests.runtime_support import Tick


def _version(path: Path) -> int:
    version = json.loads((path / "holon-ledger.json").read_text())["format_version"]
    assert isinstance(version, int)
    return version


def _version_1_ledger(path: Path, n: int = 300) -> None:
    """A ledger as a holon before format version 2 left it: sealed segments of one frame, header 1."""
    with Ledger.create(path, agent_id=AGENT, segment_bytes=16384, fsync="never") as ledger:
        ledger.append_many(message(i, 120) for i in range(n))
    segs = list_segments(path / "segments")
    assert any(seg.sealed is not None for seg in segs)
    for seg in segs:
        if seg.sealed is not None:
            seg.sealed.write_bytes(compress(load_segment(seg)[0], level=3))
    header = path / "holon-ledger.json"
    header.write_text(header.read_text().replace('"format_version": 2', '"format_version": 1'))


def _files(path: Path) -> dict[str, bytes]:
    return {
        str(f.relative_to(path)): f.read_bytes()
        for f in sorted(path.rglob("*"))
        if f.is_file() and f.name != "holon-ledger.lock"
    }


def test_an_open_for_writing_that_seals_nothing_leaves_a_version_1_header(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _version_1_ledger(path)
    before = _files(path)
    with Ledger.open(path) as writer:
        assert writer.header.format_version == 1
    assert _version(path) == 1
    assert _files(path) == before


def test_a_refused_append_leaves_an_older_holons_ledger_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _version_1_ledger(path)
    before = _files(path)
    backwards = tmp_path / "back.jsonl"
    backwards.write_text(
        '{"seq":0,"ts":0,"turn":null,"kind":"message","v":3,"body":{"role":"operator","text":"late"}}\n'
    )
    result = CliRunner().invoke(main, ["append", str(path), str(backwards)])
    assert result.exit_code == 2, result.output
    assert "timestamps never go backwards" in result.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = CliRunner().invoke(main, ["append", str(path), str(empty)])
    assert result.exit_code == 0, result.output
    assert "nothing to append" in result.output
    assert _files(path) == before  # the header too: the holon that wrote it still reads it


def test_an_agent_open_refused_leaves_a_version_1_header(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _version_1_ledger(path)
    with pytest.raises(UsageError, match="belongs to agent"):
        Agent.open(path, agent_id="someone-else")
    assert _version(path) == 1


def test_the_first_seal_raises_the_header_before_it_writes_the_new_layout(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _version_1_ledger(path)
    with Ledger.open(path, fsync="never") as writer:
        writer.append_many(message(i, 120) for i in range(300, 302))
        assert writer.header.format_version == 1  # no segment sealed yet
        writer.append_many(message(i, 120) for i in range(302, 600))
        assert writer.header.format_version == FORMAT_VERSION
    assert _version(path) == FORMAT_VERSION
    with Ledger.open(path, readonly=True) as reader:
        assert [record.seq for record in reader.read()] == list(range(600))
        assert reader.verify().ok


def test_a_segment_left_plain_by_a_crash_is_sealed_under_a_raised_header(tmp_path: Path) -> None:
    # A crash between a rollover and its seal leaves a plain segment before the active one:
    # the next writer's recovery seals it in the new layout, so it raises the header first.
    path = tmp_path / "l"
    _version_1_ledger(path)
    segs = list_segments(path / "segments")
    victim = segs[-2]
    assert victim.sealed is not None
    plain = path / "segments" / victim.sealed.name.removesuffix(".zst")
    plain.write_bytes(load_segment(victim)[0])
    victim.sealed.unlink()
    with Ledger.open(path) as writer:
        assert writer.header.format_version == FORMAT_VERSION
    assert _version(path) == FORMAT_VERSION
    assert not plain.exists()


def test_agent_open_with_another_projection_config_leaves_a_version_1_header(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Agent.open(path, agent_id=AGENT, clock=Tick()) as agent:
        for i in range(4):
            with agent.turn(input=f"tick {i}", trigger="timer") as turn:
                if agent.state.active_work_item is None:
                    turn.add_work_item("W1", "watch the queue", state="active")
                turn.record_message(f"tick {i}: nothing new")
    header = path / "holon-ledger.json"
    header.write_text(header.read_text().replace('"format_version": 2', '"format_version": 1'))
    before = _files(path)
    other = AgentConfig(projection=ProjectionConfig(turn_cap=3))
    with pytest.raises(UsageError, match="was derived under"):
        Agent.open(path, config=other, clock=Tick())
    assert _files(path) == before
