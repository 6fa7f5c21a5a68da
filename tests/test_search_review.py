"""Adversarial review of episode and memory search: queries, ranking ties, the saved index.

Each test pins a bug found in review (it fails on the code before its fix) or an edge
the review checked and found sound.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from holon import records as r
from holon.context import EpisodeIndex
from holon.importers import import_transcript
from holon.ledger import Ledger
from holon.runtime import Agent, AgentConfig
from holon.runtime.checkpoints import CHECKPOINT_DIR, list_checkpoints
from holon.search import MemorySearch
from tests.runtime_support import Tick

ROOT = Path(__file__).resolve().parent.parent

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


# ---------------------------------------------------------------- MemorySearch documents


def _msg(seq: int, text: str, turn: int | None = 1) -> r.Record:
    return r.Record(body=r.Message(role="user", text=text), ts=seq, turn=turn, seq=seq)


def test_a_turn_input_recorded_as_turn_started_and_as_its_message_is_one_hit() -> None:
    # Importers write each user message twice: TurnStarted(input=text), then the Message.
    # Both were indexed, so every search for a user's words returned two equal hits.
    records = import_transcript(ROOT / "fixtures/importers/claude-code/session.jsonl", "claude-code")
    records = [msgspec.structs.replace(rec, seq=seq) for seq, rec in enumerate(records)]
    started = next(rec for rec in records if isinstance(rec.body, r.TurnStarted) and rec.body.input)
    message = records[started.seq + 1]
    assert isinstance(message.body, r.Message) and message.body.text == started.body.input
    hits = MemorySearch(records).search(started.body.input, limit=25)
    same_text = [h for h in hits if h.snippet == started.body.input.strip()]
    assert [(h.ref, h.source) for h in same_text] == [(f"ledger:{message.seq}", "message")]
    # A turn input without its message is still found, and a later message with the
    # same words (not the input's message) is a hit of its own.
    alone = [
        r.Record(body=r.TurnStarted(trigger="timer", input="rotate the signing keys"), ts=0, turn=1, seq=0),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=0, turn=1, seq=1),
        r.Record(body=r.TurnStarted(trigger="user", input="rotate the signing keys"), ts=0, turn=2, seq=2),
        _msg(3, "rotate the signing keys", turn=2),
        _msg(4, "rotate the signing keys", turn=2),
    ]
    assert [h.ref for h in MemorySearch(alone).search("signing keys")] == ["ledger:4", "ledger:3", "ledger:0"]
