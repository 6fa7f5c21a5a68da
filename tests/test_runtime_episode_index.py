"""The episode index is saved beside each checkpoint and restored on open, never trusted blindly.

A restored index must make the next turn's prompt byte-identical to one rendered with a
rebuilt index; a missing, damaged or stale index file is reported, logged and rebuilt.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import msgspec
import pytest

from holon import records as r
from holon.context import Budget, EpisodeIndex, RenderConfig
from holon.ledger import Ledger
from holon.projections import ProjectionConfig
from holon.records import PlanStep
from holon.runtime import Agent, AgentConfig
from holon.runtime.checkpoints import CHECKPOINT_DIR, list_checkpoints
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


# ---------------------------------------------------------------- the runtime's episode index


def test_episodes_a_cut_short_refresh_archives_on_open_are_in_the_restored_index(tmp_path: Path) -> None:
    # A crash after turn_ended reached the disk and before its derived episode did (a
    # segment rollover flushed it first). Opening appends the missing episode; with an
    # index restored from the checkpoint, that episode must be indexed too, or
    # holon_get cannot restore it, selection never sees it, and the next checkpoint fails.
    config = AgentConfig(checkpoint_every=1, checkpoints_kept=5)
    live = tmp_path / "live"
    with Agent.open(live, agent_id="a", config=config, clock=Tick()) as agent:
        for item in ("W1", "W2", "W3"):  # each switch of the active work archives an episode
            with agent.turn(input=f"start {item}") as turn:
                turn.add_work_item(item, f"build the {item} parser", state="active")
    with Ledger.open(live, readonly=True) as ledger:
        records = list(ledger.read(0))
    ended = max(i for i, rec in enumerate(records) if rec.kind == "turn_ended")
    assert [rec.kind for rec in records[ended + 1 :]] == ["working_memory_delta", "context_episode"]

    crashed = tmp_path / "crashed"
    with Ledger.create(crashed, agent_id="a") as ledger:
        ledger.append_many(records[: ended + 1])
    # The checkpoint of the turn before, with its saved index: valid for the crashed prefix.
    seq, ckpt = next((seq, path) for seq, path in list_checkpoints(live) if seq < ended)
    (crashed / CHECKPOINT_DIR).mkdir()
    for ext in (".ckpt", ".tools", ".episodes"):
        shutil.copy(ckpt.with_suffix(ext), crashed / CHECKPOINT_DIR / ckpt.with_suffix(ext).name)

    with Agent.open(crashed, config=config, clock=Tick(start=2_000_000_000_000)) as agent:
        report = agent.report
        assert report.checkpoint_seq == seq and report.episode_index == "restored"
        assert report.completed_refresh == 2
        archive = agent.memory.archive
        assert archive.count == 2 and len(agent.episodes) == 2
        assert agent.episodes.export() == EpisodeIndex(archive).export()
        assert '"episode_id":1' in agent.get_text("episode:1")
        agent.checkpoint()  # the index covers the archive, so it can be saved with it
        with agent.turn(input="back to the W2 parser") as turn:
            turn.context()


# ---------------------------------------------------------------- the saved index on open


def _ledger_with_episodes(path: Path) -> None:
    config = AgentConfig(checkpoint_every=1, checkpoints_kept=5)
    with Agent.open(path, agent_id="a", config=config, clock=Tick()) as agent:
        for item in ("W1", "W2", "W3", "W4"):
            with agent.turn(input=f"start {item}") as turn:
                turn.add_work_item(item, f"build the {item} parser", state="active")


def _resign(path: Path, edit: Callable[[list[Any]], None]) -> None:
    """Rewrite a .episodes sidecar with ``edit`` applied to its index fields, checksum renewed."""
    data = path.read_bytes()
    # The index of the newest episodes (the whole index when no archive chunk is full),
    # then the names of the segment files of the older ones.
    seq, head_hash, index, *segments = msgspec.msgpack.decode(data[40:])
    fields = msgspec.msgpack.decode(index)
    edit(fields)
    payload = msgspec.msgpack.encode([seq, head_hash, msgspec.msgpack.encode(fields), *segments])
    path.write_bytes(b"HOLONEPX" + blake3.blake3(payload).digest() + payload)


@pytest.mark.parametrize(
    ("edit", "reason", "detail"),
    [
        (lambda f: f.__setitem__(0, "1|" + f[0].split("|", 1)[1]), "stale", "other tokenizing code"),
        (lambda f: f.__setitem__(3, f[3][8:] + f[3][:8]), "stale", "other episodes"),
        (lambda f: f.__setitem__(2, f[2] + 1), "corrupt", "inconsistent offsets"),
        (lambda f: f.__setitem__(1, f[1] + 1), "corrupt", "sizes"),
    ],
)
def test_a_saved_index_from_an_older_holon_or_for_other_episodes_is_rebuilt(
    tmp_path: Path, edit: Callable[[list[Any]], None], reason: str, detail: str
) -> None:
    # Checksum-valid sidecars that must still not be used: written by older tokenizing
    # code (INDEX_FORMAT 1), or for another archive, or internally inconsistent.
    _ledger_with_episodes(tmp_path / "l")
    (_, newest), *_ = list_checkpoints(tmp_path / "l")
    _resign(newest.with_suffix(".episodes"), edit)
    with Agent.open(tmp_path / "l", clock=Tick(start=2_000_000_000_000)) as agent:
        rejected = agent.report.episode_index_rejected
        assert agent.report.episode_index == "built" and rejected is not None
        assert rejected.reason == reason and detail in rejected.detail
        assert agent.episodes.export() == EpisodeIndex(agent.memory.archive).export()


# --------------------------------------------------------------------------- a decision revised

#: Small enough that a few turns archive an episode (turn_cap), checkpointed every turn.
REVISING = AgentConfig(
    budget=Budget(context_window=8_000, output_reserve=1_000),
    render=RenderConfig(),
    projection=ProjectionConfig(turn_cap=3),
    checkpoint_every=1,
    checkpoints_kept=2,
)


def _revising_agent(path: Path, turns: int) -> None:
    """An agent that revises its decision every turn (a decision is revised as work goes on)."""
    with Agent.open(path, agent_id="reviser", config=REVISING, clock=Tick()) as agent:
        for i in range(turns):
            with agent.turn(input=f"turn {i}: go on with the parser") as turn:
                turn.context()
                if i == 0:
                    turn.add_work_item("W1", "port the parser", state="active")
                    turn.record_plan([PlanStep(id="s1", text="port it")], work_item_id="W1")
                turn.record_decision("D1", f"parse with approach {i}")
                turn.record_message(f"turn {i} done", role="assistant")


def test_an_episode_that_lists_a_decision_revised_in_it_restores_its_saved_index() -> None:
    # An episode lists every revision of a decision made in it ("D1: a", "D1: b"); the
    # index keeps the last text. The restore's spot check compared each line with that
    # last text, so the first revision made the saved index "stale" and it was rebuilt.
    def episode(i: int, decisions: tuple[str, ...]) -> r.ContextEpisodeRecord:
        return r.ContextEpisodeRecord(
            episode_id=i,
            boundary_reason="turn_cap",
            work_item_id="W1",
            first_turn=i * 3,
            last_turn=i * 3 + 2,
            from_seq=i * 30,
            to_seq=i * 30 + 29,
            objective="port the parser",
            decisions=decisions,
            projection_version=1,
        )

    episodes = [
        episode(0, ("D1: parse by hand",)),
        episode(1, ("D1: parse with a grammar", "D2: keep the tests", "D1: parse with a generator")),
    ]
    restored = EpisodeIndex.restore(EpisodeIndex(episodes).export(), episodes)
    assert isinstance(restored, EpisodeIndex), restored
    assert restored.decisions == {"D1": "parse with a generator", "D2": "keep the tests"}
    assert restored.export() == EpisodeIndex(episodes).export()


def test_an_agent_that_revises_a_decision_reopens_from_its_saved_episode_index(tmp_path: Path) -> None:
    # What a daemon printed at every start: "saved episode index not used (stale: ...
    # another text for decision 'D1'); it is rebuilt", and `holon render` re-tokenized the
    # archive too, though nothing was stale.
    path = tmp_path / "ledger"
    _revising_agent(path, turns=7)
    with Agent.open(path, config=REVISING, clock=Tick(start=2_000_000_000_000)) as agent:
        report = agent.report
        assert report.checkpoint_seq is not None
        archived = list(agent.memory.archive)
        newest = archived[-1]
        revised = len({line.partition(": ")[0] for line in newest.decisions}) < len(newest.decisions)
        assert revised, "the scenario needs a newest episode that lists a decision revised in it"
        assert report.episode_index == "restored", report.episode_index_rejected
        assert agent.episodes.export() == EpisodeIndex(archived).export()
