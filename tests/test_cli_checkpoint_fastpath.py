"""The whole-ledger reads take their first pass's findings from a verified checkpoint.

`holon memory`, and `render` / `explain` of the next prompt, read every record once to
learn the ledger's projection config, its newest recorded render settings and its last
record, before folding from the checkpoint. With a checkpoint that verifies, stating the
ledger's config, they read only the records after it (holon.replay.Checkpoints); the
results are the full pass's byte for byte, and any doubt falls back to the full pass.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import msgspec
import pytest

import holon.records as r
from holon.context import EpisodeIndex
from holon.ledger import Ledger
from holon.projections import DEFAULT_CONFIG, ProjectionConfig, fold
from holon.replay import ledger_projection, memory_at, memory_of, next_prompt, next_prompt_of
from holon.runtime import AgentConfig, checkpoint_resume
from holon.runtime.checkpoints import CheckpointResume, list_checkpoints
from tests.cli_support import checkpoint_at_head, fixture_names, invoke, live_records
from tests.runtime_support import load_daemon

#: A non-default projection config, as an agent may be configured with.
OTHER = ProjectionConfig(turn_cap=5, messages_window=10)


def _write(
    directory: Path, records: Sequence[r.Record], at: int | None, *, agent_id: str, config: ProjectionConfig
) -> Path:
    """A ledger of ``records`` with a checkpoint (under ``config``) after its record ``at``."""
    with Ledger.create(directory, agent_id=agent_id, fsync="never") as ledger:
        split = len(records) if at is None else at + 1
        ledger.append_many(records[:split])
        if at is not None:
            checkpoint_at_head(ledger, config=config)
        if records[split:]:
            ledger.append_many(records[split:])
    return directory


def _counted(ledger: Ledger) -> tuple[Callable[[], Iterator[r.Record]], list[int], CheckpointResume]:
    """A reader of ``ledger`` up to its head, as the CLI reads, the passes it made, and its checkpoints."""
    head = ledger.head()
    passes: list[int] = []

    def read() -> Iterator[r.Record]:
        passes.append(1)
        return ledger.read(0, head[0] + 1)

    return read, passes, checkpoint_resume(ledger, head)


def _whole_reads(path: Path) -> tuple[bytes, bytes, int, int]:
    """memory_of and next_prompt_of of ``path`` as the CLI reads it, and how many passes each read."""
    with Ledger.open(path, readonly=True) as ledger:
        read, passes, resume = _counted(ledger)
        memory = msgspec.json.encode(memory_of(read, resume=resume))
        memory_passes = len(passes)
        passes.clear()
        prompt = msgspec.json.encode(next_prompt_of(read, agent_id=ledger.agent_id, resume=resume))
        return memory, prompt, memory_passes, len(passes)


def _full(path: Path) -> tuple[bytes, bytes]:
    """The same reads of the records held in a list, folded from seq 0."""
    with Ledger.open(path, readonly=True) as ledger:
        records = list(ledger.read())
        agent = ledger.agent_id
    return (
        msgspec.json.encode(memory_at(records)),
        msgspec.json.encode(next_prompt(records, agent_id=agent)),
    )


def _cli(path: Path) -> list[tuple[int, bytes, str]]:
    """What memory, render and explain (text and --json) print for ``path``."""
    results = []
    for args in (
        ("memory",),
        ("memory", "--json"),
        ("render",),
        ("render", "--json"),
        ("render", "--format", "anthropic"),
        ("explain",),
        ("explain", "--json"),
    ):
        result = invoke(*args, path)
        results.append((result.exit_code, result.stdout_bytes, result.stderr))
    return results


def _without_checkpoints(path: Path, copy: Path) -> Path:
    shutil.copytree(path, copy)
    shutil.rmtree(copy / "checkpoints", ignore_errors=True)
    return copy


def _positions(records: Sequence[r.Record]) -> list[int]:
    """Where to checkpoint: before the first prompt, at it, at the last one, at the head, between."""
    prompts = [i for i, x in enumerate(records) if isinstance(x.body, r.PromptRendered)]
    n = len(records)
    return sorted({0, max(prompts[0] - 1, 0), prompts[0], n // 3, n // 2, 2 * n // 3, prompts[-1], n - 1})


@pytest.mark.parametrize("name", fixture_names())
def test_a_checkpoint_anywhere_gives_the_full_passes_results_without_a_first_pass(
    name: str, tmp_path: Path
) -> None:
    records = live_records(name)
    for at in _positions(records):
        path = _write(tmp_path / f"at{at}", records, at, agent_id=name, config=DEFAULT_CONFIG)
        memory, prompt, memory_passes, prompt_passes = _whole_reads(path)
        assert (memory, prompt) == _full(path), f"checkpoint after seq {at}"
        # Not one pass over the ledger: the records after the checkpoint came with it.
        assert (memory_passes, prompt_passes) == (0, 0), f"checkpoint after seq {at}"


def test_the_commands_print_the_same_bytes_from_a_mid_ledger_checkpoint(tmp_path: Path) -> None:
    records = live_records("session_multi_work")
    prompts = [i for i, x in enumerate(records) if isinstance(x.body, r.PromptRendered)]
    # Prompts after the checkpoint: the newest render settings are the tail's.
    at = prompts[len(prompts) // 2]
    path = _write(tmp_path / "ledger", records, at, agent_id="session_multi_work", config=DEFAULT_CONFIG)
    assert _cli(path) == _cli(_without_checkpoints(path, tmp_path / "copy"))


@pytest.fixture(scope="module")
def agent_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A holon.Agent ledger under a non-default projection config, checkpointed after every turn."""
    path = tmp_path_factory.mktemp("agent") / "ledger"
    config = AgentConfig(projection=OTHER, checkpoint_every=1, checkpoints_kept=6)
    load_daemon().run(path, turns=14, quiet=True, config=config)
    assert len(list_checkpoints(path)) == 6
    return path


def test_an_agent_ledger_under_another_config_reads_from_its_checkpoint(
    agent_ledger: Path, tmp_path: Path
) -> None:
    memory, prompt, memory_passes, prompt_passes = _whole_reads(agent_ledger)
    assert (memory, prompt) == _full(agent_ledger)
    assert (memory_passes, prompt_passes) == (0, 0)
    assert _cli(agent_ledger) == _cli(_without_checkpoints(agent_ledger, tmp_path / "copy"))


def test_prompts_after_the_checkpoint_are_read_for_the_config_and_settings(
    agent_ledger: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "ledger"
    shutil.copytree(agent_ledger, copy)
    # The newest three removed: turns with prompts follow the newest checkpoint left.
    for seq, ckpt in list_checkpoints(copy)[:3]:
        ckpt.unlink()
        assert seq > 0
    with Ledger.open(copy, readonly=True) as ledger:
        newest = list_checkpoints(copy)[0][0]
        tail = list(ledger.read(newest + 1))
    assert any(isinstance(x.body, r.PromptRendered) and x.body.render_config for x in tail)
    memory, prompt, memory_passes, prompt_passes = _whole_reads(copy)
    assert (memory, prompt) == _full(copy)
    assert (memory_passes, prompt_passes) == (0, 0)
    assert _cli(copy) == _cli(_without_checkpoints(copy, tmp_path / "copy"))


def test_a_newest_checkpoint_under_another_config_falls_back_to_the_full_pass(
    agent_ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "ledger"
    shutil.copytree(agent_ledger, copy)
    for _seq, ckpt in list_checkpoints(copy)[:2]:
        ckpt.unlink()
    with Ledger.open(copy) as ledger:
        # Written under the default, the ledger's prompts state OTHER: it says nothing of the config.
        checkpoint_at_head(ledger, config=DEFAULT_CONFIG)
        episodes = fold(ledger.read(), config=OTHER).memory.archive.count
    used = _saved_indexes(monkeypatch)
    memory, prompt, memory_passes, prompt_passes = _whole_reads(copy)
    assert (memory, prompt) == _full(copy)
    # The first pass, then the fold from the older checkpoint under OTHER (its tail only),
    # rendered with the episode index saved beside that checkpoint.
    assert (memory_passes, prompt_passes) == (1, 1)
    assert used == [episodes]
    assert _cli(copy) == _cli(_without_checkpoints(copy, tmp_path / "copy"))


def test_a_checkpoint_on_a_default_ledger_under_another_config_falls_back(tmp_path: Path) -> None:
    records = live_records("boundary_turn_cap")
    path = _write(tmp_path / "ledger", records, len(records) // 2, agent_id="b", config=OTHER)
    memory, prompt, memory_passes, prompt_passes = _whole_reads(path)
    assert (memory, prompt) == _full(path)
    assert (memory_passes, prompt_passes) == (2, 2)  # the first pass, then the fold from seq 0


@pytest.mark.parametrize("damage", ["head_hash", "bytes"])
def test_a_checkpoint_that_does_not_verify_falls_back(damage: str, tmp_path: Path) -> None:
    records = live_records("session_multi_work")
    at = len(records) // 2
    path = tmp_path / "ledger"
    with Ledger.create(path, agent_id="session_multi_work", fsync="never") as ledger:
        ledger.append_many(records[: at + 1])
        checkpoint_at_head(
            ledger, config=DEFAULT_CONFIG, head_hash="00" * 32 if damage == "head_hash" else None
        )
        ledger.append_many(records[at + 1 :])
    if damage == "bytes":
        ckpt = list_checkpoints(path)[0][1]
        data = bytearray(ckpt.read_bytes())
        data[-1] ^= 0xFF
        ckpt.write_bytes(bytes(data))
    memory, prompt, memory_passes, prompt_passes = _whole_reads(path)
    assert (memory, prompt) == _full(path)
    assert (memory_passes, prompt_passes) == (2, 2)
    assert _cli(path) == _cli(_without_checkpoints(path, tmp_path / "copy"))


def test_a_last_prompt_without_render_settings_leaves_render_to_the_full_pass(tmp_path: Path) -> None:
    records = list(live_records("session_multi_work"))
    prompts = [i for i, x in enumerate(records) if isinstance(x.body, r.PromptRendered)]
    at = prompts[len(prompts) // 2]
    body = records[at].body
    assert isinstance(body, r.PromptRendered)
    # Another program's prompt: an older one holds the settings the next prompt is rendered with.
    records[at] = msgspec.structs.replace(records[at], body=msgspec.structs.replace(body, render_config={}))
    path = _write(tmp_path / "ledger", records[: at + 5], at, agent_id="s", config=DEFAULT_CONFIG)
    memory, prompt, memory_passes, prompt_passes = _whole_reads(path)
    assert (memory, prompt) == _full(path)
    assert memory_passes == 0  # memory needs only the config, which the prompt states by omission
    assert prompt_passes == 1  # the first pass finds the older settings; the fold resumes as before
    assert _cli(path) == _cli(_without_checkpoints(path, tmp_path / "copy"))


def test_a_prompt_after_the_checkpoint_recording_another_config_is_the_same_error(
    agent_ledger: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "ledger"
    shutil.copytree(agent_ledger, copy)
    with Ledger.open(copy) as ledger:
        seq = ledger.head()[0]
        while not isinstance((last := ledger.get(seq)).body, r.PromptRendered):
            seq -= 1
        body = last.body
        assert isinstance(body, r.PromptRendered)
        other = msgspec.to_builtins(msgspec.structs.replace(OTHER, turn_cap=7))
        config = {**body.render_config, "projection": other}
        tail_ts = ledger.get(ledger.head()[0]).ts
        changed = msgspec.structs.replace(body, render_config=config)
        ledger.append(r.Record(body=changed, ts=tail_ts, turn=None))
    results = _cli(copy)
    assert all(code == 2 and "changed within this ledger" in err for code, _out, err in results), results
    assert results == _cli(_without_checkpoints(copy, tmp_path / "copy"))


def test_a_given_projection_config_needs_no_first_pass(agent_ledger: Path) -> None:
    with Ledger.open(agent_ledger, readonly=True) as ledger:
        read, passes, resume = _counted(ledger)
        records = list(ledger.read())
        for projection, expected in ((OTHER, 0), (DEFAULT_CONFIG, 1)):
            passes.clear()
            view = memory_of(read, projection=projection, resume=resume)
            assert msgspec.json.encode(view) == msgspec.json.encode(memory_at(records, projection=projection))
            # Under its own config the checkpoint is all; under another, one fold from seq 0.
            assert len(passes) == expected


def test_a_config_first_recorded_after_a_default_checkpoint_is_the_full_passes(tmp_path: Path) -> None:
    records = list(live_records("session_multi_work"))
    prompts = [i for i, x in enumerate(records) if isinstance(x.body, r.PromptRendered)]
    at = prompts[len(prompts) // 2]
    # The prompts up to the checkpoint record no config (the default, as a holon before it was
    # recorded wrote them); the first to record one comes after it, and it is the ledger's.
    # So the derived records state none, as a holon before projection version 9 wrote them.
    for i, record in enumerate(records):
        if isinstance(record.body, r.WorkingMemoryDelta | r.ContextEpisodeRecord):
            old = msgspec.structs.replace(record.body, projection_version=8)
            records[i] = msgspec.structs.replace(record, body=old)
    for i in prompts[len(prompts) // 2 + 1 :]:
        body = records[i].body
        assert isinstance(body, r.PromptRendered)
        config = {**body.render_config, "projection": msgspec.to_builtins(OTHER)}
        changed = msgspec.structs.replace(body, render_config=config)
        records[i] = msgspec.structs.replace(records[i], body=changed)
    path = _write(tmp_path / "ledger", records, at, agent_id="s", config=DEFAULT_CONFIG)
    memory, prompt, memory_passes, prompt_passes = _whole_reads(path)
    assert (memory, prompt) == _full(path)
    assert (memory_passes, prompt_passes) == (2, 2)  # folded from seq 0 under OTHER
    assert _cli(path) == _cli(_without_checkpoints(path, tmp_path / "copy"))


def _saved_indexes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each saved episode index a read asks for: its episodes, or -1 when it was not used."""
    used: list[int] = []
    saved = CheckpointResume.episode_index

    def spy(
        self: CheckpointResume, seq: int, episodes: Iterable[r.ContextEpisodeRecord]
    ) -> EpisodeIndex | None:
        index = saved(self, seq, episodes)
        used.append(len(index) if index is not None else -1)
        return index

    monkeypatch.setattr(CheckpointResume, "episode_index", spy)
    return used


def test_the_next_prompt_uses_the_episode_index_saved_with_the_checkpoint(
    agent_ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "ledger"
    shutil.copytree(agent_ledger, copy)
    # An older checkpoint: the episodes archived after it are added to its saved index.
    for _seq, ckpt in list_checkpoints(copy)[:4]:
        ckpt.unlink()
    with Ledger.open(copy, readonly=True) as ledger:
        newest = list_checkpoints(copy)[0][0]
        archived_after = [x for x in ledger.read(newest + 1) if isinstance(x.body, r.ContextEpisodeRecord)]
        before = [x for x in ledger.read(0, newest + 1) if isinstance(x.body, r.ContextEpisodeRecord)]
    assert before and archived_after
    used = _saved_indexes(monkeypatch)
    memory, prompt, _memory_passes, prompt_passes = _whole_reads(copy)
    assert (memory, prompt) == _full(copy)
    assert prompt_passes == 0
    assert used == [len(before) + len(archived_after)]
    assert _cli(copy) == _cli(_without_checkpoints(copy, tmp_path / "copy"))
    # Without its saved index (a cache: missing) the renderer builds it; the same prompt.
    used.clear()
    for path in (copy / "checkpoints").glob("*.episodes"):
        path.unlink()
    assert _whole_reads(copy)[:2] == (memory, prompt)
    assert used == [-1]


def test_stats_takes_the_config_from_the_checkpoint_and_prints_the_same(
    agent_ledger: Path, tmp_path: Path
) -> None:
    # `holon stats` read the whole ledger once for the config before its counting pass (1M
    # records: 7.0-8.4 s, now 4.5-4.7 s); what it prints is the same with checkpoints or without.
    with Ledger.open(agent_ledger, readonly=True) as ledger:
        read, passes, resume = _counted(ledger)
        assert ledger_projection(read, resume) == OTHER
        assert passes == []
        # Without a checkpoint that states it, a pass of its own, as before.
        assert ledger_projection(read) == OTHER
        assert passes == [1]
    for flag in ((), ("--json",)):
        fast = invoke("stats", agent_ledger, *flag)
        assert fast.exit_code == 0, fast.stderr
        copy = _without_checkpoints(agent_ledger, tmp_path / f"copy{len(flag)}")
        assert fast.stdout == invoke("stats", copy, *flag).stdout
