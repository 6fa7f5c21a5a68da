"""The episode index is saved beside each checkpoint and restored on open, never trusted blindly.

A restored index must make the next turn's prompt byte-identical to one rendered with a
rebuilt index; a missing, damaged or stale index file is reported, logged and rebuilt.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from holon import records as r
from holon.context import EpisodeIndex, RenderConfig
from holon.runtime import Agent, AgentConfig
from holon.runtime.checkpoints import list_checkpoints
from tests.runtime_support import Tick, load_daemon, same_record

# The RFC's layout selects episodes for the probe's new question at its new revision (the
# recitation layout keeps the previous selection until the history moves): the index must
# be read for the comparison to mean anything.
CONFIG = AgentConfig(checkpoint_every=40, checkpoints_kept=2, render=RenderConfig(layout="rfc"))
TURNS = 90


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A daemon ledger of 90 turns: checkpoints at turns 40 and 80, episodes archived after both."""
    path = tmp_path_factory.mktemp("episodes") / "l"
    load_daemon().run(path, turns=TURNS, seed=7, quiet=True, config=CONFIG)
    return path


def _copy(ledger: Path, tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    shutil.copytree(ledger, out)
    return out


def _next_turn(path: Path) -> tuple[r.PromptRendered, str]:
    """Open the ledger and run one turn: its prompt record and prompt text."""
    with Agent.open(path, config=CONFIG, clock=Tick(start=2_000_000_000_000)) as agent:
        first = agent.memory.archive.get(0)  # ask about old work, so selection reaches the archive
        question = f"back to {first.objective}: what did we decide?"
        with agent.turn(input=question) as turn:
            prompt = turn.context()
            turn.record_message("looking")
        rendered = [x.body for x in agent.ledger.read(turn.first_seq) if isinstance(x.body, r.PromptRendered)]
    assert len(rendered) == 1
    return rendered[0], prompt.text


def test_open_restores_the_saved_index_and_the_next_prompt_is_the_rebuilt_ones(
    ledger: Path, tmp_path: Path
) -> None:
    restored_path = _copy(ledger, tmp_path, "restored")
    rebuilt_path = _copy(ledger, tmp_path, "rebuilt")
    for path in (rebuilt_path / "checkpoints").glob("*.episodes"):
        path.unlink()
    with Agent.open(restored_path, config=CONFIG) as agent:
        (newest, _), _ = list_checkpoints(restored_path)
        assert agent.report.checkpoint_seq == newest and agent.report.folded > 0
        assert agent.report.episode_index == "restored" and agent.report.episode_index_rejected is None
        archive = agent.memory.archive
        tail = [x for x in agent.ledger.read(newest + 1) if isinstance(x.body, r.ContextEpisodeRecord)]
        assert tail, "episodes archived after the checkpoint are indexed on restore too"
        assert agent.episodes.export() == EpisodeIndex(archive).export()
    with Agent.open(rebuilt_path, config=CONFIG) as agent:
        assert agent.report.episode_index == "built"
        rejected = agent.report.episode_index_rejected
        assert rejected is not None and rejected.reason == "missing"
    record_a, text_a = _next_turn(restored_path)
    record_b, text_b = _next_turn(rebuilt_path)
    assert text_a == text_b
    assert same_record(record_a, record_b)
    assert record_a.episodes, "the probe must select archived episodes for the comparison to mean anything"


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["corrupt", "stale"])
def test_a_bad_index_file_is_rejected_logged_and_rebuilt(
    ledger: Path, tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = _copy(ledger, tmp_path, how)
    (newest, newest_ckpt), (_older, older_ckpt) = list_checkpoints(path)
    saved = newest_ckpt.with_suffix(".episodes")
    if how == "corrupt":
        _damage(saved)
    else:  # a valid file, but saved at another checkpoint
        shutil.copy(older_ckpt.with_suffix(".episodes"), saved)
    with Agent.open(path, config=CONFIG) as agent:
        assert agent.report.checkpoint_seq == newest, "the checkpoint itself is still used"
        assert agent.report.episode_index == "built"
        rejected = agent.report.episode_index_rejected
        assert rejected is not None and rejected.reason == how and saved.name in rejected.detail
        assert agent.episodes.export() == EpisodeIndex(agent.memory.archive).export()
    assert "saved episode index not used" in caplog.text
    good = _copy(ledger, tmp_path, "good")
    assert _next_turn(path)[1] == _next_turn(good)[1]


def test_every_checkpoint_saves_the_index_and_pruning_removes_it(ledger: Path) -> None:
    names = sorted(p.name for p in (ledger / "checkpoints").iterdir())
    stems = [p.stem for _, p in list_checkpoints(ledger)]
    assert names == sorted(f"{stem}{ext}" for stem in stems for ext in (".ckpt", ".episodes", ".tools"))
