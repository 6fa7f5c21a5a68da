"""Checkpoints write what changed since the last one: chunk files named, not rewritten.

A chain of checkpoints at any cut points restores the batch fold byte for byte (state,
tool index, episode index); each archive chunk, index segment and key chunk is written
once however many checkpoints name it; a missing or damaged chunk makes its checkpoint
not verify (naming the file) and the reader falls back as for a damaged ``.ckpt``;
pruning keeps exactly the chunks the kept checkpoints name; checkpoints written before
chunks are still read.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import blake3
import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import holon.search.episodes as episode_index
from holon import records as r
from holon.context import EpisodeIndex, EpisodeIndexRejected
from holon.errors import LedgerCorrupt
from holon.ledger import Ledger
from holon.projections import (
    ARCHIVE_CHUNK,
    PROJECTION_VERSION,
    CheckpointRejected,
    ProjectionConfig,
    ProjectionState,
    encode_checkpoint,
    fold,
    initial_state,
    restore_checkpoint,
)
from holon.projections.projection import apply
from holon.runtime import Agent, AgentConfig
from holon.runtime import checkpoints as ck
from holon.runtime.checkpoints import (
    CHECKPOINT_DIR,
    CHUNK_DIR,
    CheckpointChunks,
    KeyEntry,
    ToolIndex,
    chain_hash,
    checkpoint_resume,
    list_checkpoints,
    load_checkpoint,
    load_episode_index,
    prune_checkpoints,
    write_checkpoint,
)
from tests.cli_support import tree_bytes
from tests.msgspec_styles import STYLES, styled
from tests.runtime_support import Tick

GENESIS = "00" * 32


def _episode(k: int, seq: int) -> r.ContextEpisodeRecord:
    return r.ContextEpisodeRecord(
        episode_id=k,
        boundary_reason="turn_cap",
        work_item_id=f"W{k % 5}",
        first_turn=k,
        last_turn=k,
        from_seq=seq,
        to_seq=seq,
        objective=f"objective {k} word{k % 7} deploy{k % 3}",
        decisions=(f"D{k % 4}: choice {k}",),
        projection_version=PROJECTION_VERSION,
        work_state="done" if k % 2 else "active",
    )


def _records(episodes: int, calls: list[tuple[int, bool, str]]) -> list[r.Record]:
    """``episodes`` archived episodes with tool calls between them: (key number, answered, status)."""
    bodies: list[r.Body] = []
    for k in range(max(episodes, len(calls))):
        if k < len(calls):
            key, answered, status = calls[k]
            bodies.append(r.ToolIntent(call_id=f"c{k}", tool="bash", idempotency_key=f"key{key}"))
            if answered:
                bodies.append(r.ToolResult(call_id=f"c{k}", tool="bash", status=status))  # type: ignore[arg-type]
        if k < episodes:
            bodies.append(_episode(k, len(bodies)))
    return [r.Record(body=body, ts=1_000 + seq, turn=None, seq=seq) for seq, body in enumerate(bodies)]


def _hashes(records: list[r.Record]) -> list[str]:
    out, prev = [], GENESIS
    for record in records:
        prev = chain_hash(prev, [record])
        out.append(prev)
    return out


def _batch(records: list[r.Record]) -> tuple[ProjectionState, ToolIndex]:
    tools = ToolIndex()
    for record in records:
        tools.apply(record)
    return fold(records), tools


def _same_tools(got: ToolIndex, want: ToolIndex) -> None:
    assert list(got.keys.items()) == list(want.keys.items())  # order too: a fold's order
    assert got.pending == want.pending and got.unknown == want.unknown and got.seq == want.seq


def _load(path: Path, records: list[r.Record], hashes: list[str]) -> tuple[ProjectionState, ToolIndex]:
    head = (len(records) - 1, hashes[-1])
    loaded = load_checkpoint(path, head=head, tail=lambda seq: records[seq + 1 :], config=None)
    assert not isinstance(loaded, CheckpointRejected), loaded
    state, tools, tail = loaded
    for record in tail:
        state = apply(state, record)
        tools.apply(record)
    return state, tools


calls_strategy = st.lists(
    st.tuples(st.integers(0, 12), st.booleans(), st.sampled_from(["ok", "error", "unknown"])), max_size=40
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    episodes=st.integers(0, 3 * ARCHIVE_CHUNK + 5),
    calls=calls_strategy,
    cuts=st.lists(st.floats(0, 1), min_size=1, max_size=6),
    key_chunk=st.integers(1, 6),
    kept=st.integers(1, 3),
)
def test_a_chain_of_checkpoints_at_any_cut_points_restores_the_batch_fold(
    tmp_path_factory: pytest.TempPathFactory,
    *,
    episodes: int,
    calls: list[tuple[int, bool, str]],
    cuts: list[float],
    key_chunk: int,
    kept: int,
) -> None:
    records = _records(episodes, calls)
    assume(records)
    hashes = _hashes(records)
    at = sorted({min(len(records) - 1, int(cut * len(records))) for cut in cuts})
    folder = tmp_path_factory.mktemp("chain")
    want_state, want_tools = _batch(records)
    want_index = EpisodeIndex(want_state.memory.archive).export()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ck, "KEY_CHUNK", key_chunk)  # seal key chunks often
        # The live agent's state, tool index and chunk memo, carried from cut to cut.
        state, tools, chunks, done = initial_state(), ToolIndex(), CheckpointChunks(), 0
        for cut in at:
            for record in records[done : cut + 1]:
                state = apply(state, record)
                tools.apply(record)
            done = cut + 1
            write_checkpoint(folder, state, tools, head_hash=hashes[cut], save_index=True, chunks=chunks)
            prune_checkpoints(folder, kept, head_seq=cut)
    written = list_checkpoints(folder)
    assert [seq for seq, _ in written] == at[::-1][:kept]
    for _seq, path in written:
        got_state, got_tools = _load(path, records, hashes)
        assert got_state == want_state
        assert msgspec.msgpack.encode(got_state) == msgspec.msgpack.encode(want_state)
        _same_tools(got_tools, want_tools)
        key = ck.read_checkpoint_key(path.read_bytes())
        assert not isinstance(key, CheckpointRejected)
        # The archive as it was at the checkpoint, as the runtime restores the index over it.
        restored = load_episode_index(
            path, seq=key.seq, head_hash=key.head_hash, episodes=want_state.memory.archive
        )
        assert isinstance(restored, EpisodeIndex), restored
        assert restored.export() == want_index
    # Pruning kept what the kept checkpoints name and nothing else.
    named = {name for _seq, path in written for name in ck._named_chunks(path)}
    chunk_dir = folder / CHECKPOINT_DIR / CHUNK_DIR
    assert named == ({p.name for p in chunk_dir.iterdir()} if chunk_dir.is_dir() else set())


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    names: list[str] = []
    real = ck._write_atomic

    def counting(path: Path, data: bytes) -> None:
        names.append(path.name)
        real(path, data)

    monkeypatch.setattr(ck, "_write_atomic", counting)
    return names


def test_each_chunk_is_written_once_and_a_checkpoint_writes_only_what_is_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = _records(5 * ARCHIVE_CHUNK + 3, [(k, True, "ok") for k in range(3000)])
    hashes = _hashes(records)
    writes = _count_writes(monkeypatch)
    tokenized: list[int] = []
    counts = episode_index._counts

    def counting(episode: r.ContextEpisodeRecord) -> dict[str, int]:
        tokenized.append(episode.episode_id)
        return counts(episode)

    monkeypatch.setattr(episode_index, "_counts", counting)
    state, tools, chunks, done = initial_state(), ToolIndex(), CheckpointChunks(), 0
    for cut in range(99, len(records), 100):
        for record in records[done : cut + 1]:
            state = apply(state, record)
            tools.apply(record)
        done = cut + 1
        before = len(writes)
        write_checkpoint(tmp_path, state, tools, head_hash=hashes[cut], save_index=True, chunks=chunks)
        prune_checkpoints(tmp_path, 2, head_seq=cut)
        new = writes[before:]
        # The three checkpoint files, and at most the chunks that filled since the last one.
        assert len([n for n in new if n.endswith((".ckpt", ".tools", ".episodes"))]) == 3
    arcs = [n for n in writes if n.endswith(".arc")]
    epxs = [n for n in writes if n.endswith(".epx")]
    keys = [n for n in writes if n.endswith(".keys")]
    assert len(arcs) == len(set(arcs)) == 5 and len(epxs) == len(set(epxs)) == 5
    assert len(keys) == len(set(keys)) == 2  # 3000 keys: two chunks of 1024, the rest in .tools
    # Each episode was tokenized once, by the first checkpoint after it was archived.
    assert tokenized == list(range(state.memory.archive.count))
    # The last checkpoint's .ckpt holds only the archive's newest chunk, not the 323 episodes.
    (_, newest), *_ = list_checkpoints(tmp_path)
    key = ck.read_checkpoint_key(newest.read_bytes())
    assert not isinstance(key, CheckpointRejected) and len(key.archive) == 5
    assert len(newest.read_bytes()) < len(encode_checkpoint(state, head_hash=hashes[-1])) / 3


# ---------------------------------------------------------------- through the agent


CONFIG = AgentConfig(checkpoint_every=25, checkpoints_kept=2, fsync="never")


@pytest.fixture(scope="module")
def agent_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An agent's ledger checkpointed at turns 125 (one full archive chunk) and 150 (two)."""
    path = tmp_path_factory.mktemp("agent") / "l"
    with Agent.open(path, agent_id="a", config=_config(path), clock=Tick()) as agent:
        for i in range(150):
            with agent.turn(input=f"turn {i} about parser{i % 9}") as turn:
                call = turn.tool("bash", {"command": f"make {i}"}, idempotency_key=f"k{i}")
                call.run(lambda i=i: (f"built {i}", 0))
                turn.record_message(f"done {i}")
        assert agent.memory.archive.count > 2 * ARCHIVE_CHUNK > 125
    return path


def _config(path: Path) -> AgentConfig:
    return msgspec.structs.replace(CONFIG, projection=ProjectionConfig(turn_cap=1))


def _full_fold(path: Path) -> tuple[ProjectionState, bytes]:
    copy = path.parent / (path.name + "-fold")
    shutil.copytree(path, copy)
    shutil.rmtree(copy / CHECKPOINT_DIR)
    with Agent.open(copy, config=_config(path)) as agent:
        assert agent.report.checkpoint_seq is None
        return agent.projection, agent.episodes.export()


def _opened(path: Path) -> tuple[Agent, ProjectionState]:
    agent = Agent.open(path, config=_config(path))
    return agent, agent.projection


def _copy(ledger: Path, tmp_path: Path) -> Path:
    path = tmp_path / "l"
    shutil.copytree(ledger, path)
    return path


def _chunk(path: Path, suffix: str) -> Path:
    """A chunk file both kept checkpoints name (the oldest archive chunk's)."""
    (_, newest), (_, older) = list_checkpoints(path)[:2]
    shared = set(ck._named_chunks(newest)) & set(ck._named_chunks(older))
    return path / CHECKPOINT_DIR / CHUNK_DIR / min(n for n in shared if n.endswith(suffix))


def test_an_agent_resumed_from_chunks_is_the_full_fold_and_its_next_checkpoint_names_them(
    agent_ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _copy(agent_ledger, tmp_path)
    want_state, want_index = _full_fold(path)
    agent, state = _opened(path)
    with agent:
        assert agent.report.checkpoint_seq == agent.seq and agent.report.episode_index == "restored"
        assert state == want_state and agent.episodes.export() == want_index
        writes = _count_writes(monkeypatch)
        agent.checkpoint()
    # The reopened agent names the chunks its checkpoint was restored from.
    assert not [name for name in writes if name.endswith((".arc", ".epx", ".keys"))]
    again, state = _opened(path)
    with again:
        assert state == want_state and again.episodes.export() == want_index


@pytest.mark.parametrize("damage", ["deleted", "flipped"])
def test_a_missing_or_damaged_archive_chunk_rejects_the_checkpoint_naming_the_file(
    agent_ledger: Path, tmp_path: Path, damage: str
) -> None:
    path = _copy(agent_ledger, tmp_path)
    want_state, want_index = _full_fold(path)
    chunk = _chunk(path, ".arc")
    if damage == "deleted":
        chunk.unlink()
    else:
        data = bytearray(chunk.read_bytes())
        data[len(data) // 2] ^= 0x01
        chunk.write_bytes(bytes(data))
    agent, state = _opened(path)
    with agent:
        # Both kept checkpoints name it: both are rejected, and the whole ledger is folded.
        assert agent.report.checkpoint_seq is None and len(agent.report.rejected) == 2
        for _name, why in agent.report.rejected:
            assert why.reason == "corrupt" and f"{CHUNK_DIR}/{chunk.name}" in why.detail
            assert ("is missing" if damage == "deleted" else "fails its checksum") in why.detail
        assert state == want_state and agent.episodes.export() == want_index
    # The read-only CLI path falls back the same way.
    with Ledger.open(path, readonly=True) as ledger:
        assert checkpoint_resume(ledger, ledger.head()).newest() is None


def test_an_archive_chunk_only_the_newest_checkpoint_names_falls_back_to_the_older(
    agent_ledger: Path, tmp_path: Path
) -> None:
    path = _copy(agent_ledger, tmp_path)
    want_state, _ = _full_fold(path)
    (newest_seq, newest), (older_seq, older) = list_checkpoints(path)[:2]
    only = sorted(set(ck._named_chunks(newest)) - set(ck._named_chunks(older)))
    arc = next(name for name in only if name.endswith(".arc"))
    (path / CHECKPOINT_DIR / CHUNK_DIR / arc).unlink()
    agent, state = _opened(path)
    with agent:
        assert agent.report.checkpoint_seq == older_seq
        ((name, why),) = agent.report.rejected
        assert name == newest.name and arc in why.detail
        assert state == want_state
    with Ledger.open(path, readonly=True) as ledger:
        found = checkpoint_resume(ledger, ledger.head()).newest()
        assert found is not None and found[0].seq == older_seq != newest_seq


def test_a_missing_or_damaged_key_chunk_rejects_the_checkpoint_naming_the_file(tmp_path: Path) -> None:
    records = _records(3, [(k, True, "ok") for k in range(2 * 1024 + 10)])
    hashes = _hashes(records)
    state, tools = _batch(records)
    write_checkpoint(tmp_path, state, tools, head_hash=hashes[-1])
    (_, path), *_ = list_checkpoints(tmp_path)
    keys = sorted((tmp_path / CHECKPOINT_DIR / CHUNK_DIR).glob("*.keys"))
    assert len(keys) == 1  # the first 2,058 keys set made one chunk
    head = (len(records) - 1, hashes[-1])
    keys[0].write_bytes(keys[0].read_bytes()[:-1])
    rejected = load_checkpoint(path, head=head, tail=lambda seq: records[seq + 1 :], config=None)
    assert isinstance(rejected, CheckpointRejected) and rejected.reason == "corrupt"
    assert f"{CHUNK_DIR}/{keys[0].name} fails its checksum" in rejected.detail
    keys[0].unlink()
    rejected = load_checkpoint(path, head=head, tail=lambda seq: records[seq + 1 :], config=None)
    assert isinstance(rejected, CheckpointRejected) and f"{keys[0].name} is missing" in rejected.detail


def test_a_missing_index_segment_rebuilds_the_index_and_keeps_the_checkpoint(
    agent_ledger: Path, tmp_path: Path
) -> None:
    path = _copy(agent_ledger, tmp_path)
    _, want_index = _full_fold(path)
    segment = _chunk(path, ".epx")
    segment.unlink()
    agent, _state = _opened(path)
    with agent:
        assert agent.report.checkpoint_seq == agent.seq and agent.report.episode_index == "built"
        why = agent.report.episode_index_rejected
        assert why is not None and why.reason == "missing" and f"{CHUNK_DIR}/{segment.name}" in why.detail
        assert agent.episodes.export() == want_index


def test_a_segment_with_a_posting_outside_its_episodes_is_rejected() -> None:
    archive = [_episode(k, k) for k in range(ARCHIVE_CHUNK + 3)]
    first = EpisodeIndex.export_segment(archive[:ARCHIVE_CHUNK], first=0)
    second = EpisodeIndex.export_segment(archive[ARCHIVE_CHUNK:], first=ARCHIVE_CHUNK)
    assert first is not None and second is not None
    restored = EpisodeIndex.restore_segments([first, second], archive)
    assert isinstance(restored, EpisodeIndex) and restored.export() == EpisodeIndex(archive).export()
    # The second segment saved as if it started at 0: its postings are the first's documents.
    shifted = EpisodeIndex.export_segment(archive[ARCHIVE_CHUNK:], first=0)
    assert shifted is not None
    rejected = EpisodeIndex.restore_segments([first, shifted], archive)
    assert isinstance(rejected, EpisodeIndexRejected) and rejected.reason == "corrupt"
    assert "before its first document 64 (segment 1)" in rejected.detail


def test_pruning_removes_the_chunks_no_kept_checkpoint_names_and_debris(
    agent_ledger: Path, tmp_path: Path
) -> None:
    path = _copy(agent_ledger, tmp_path)
    chunk_dir = path / CHECKPOINT_DIR / CHUNK_DIR
    (chunk_dir / ("ab" * 32 + ".arc")).write_bytes(b"left by a checkpoint never completed")
    (chunk_dir / ("cd" * 32 + ".epx.tmp")).write_bytes(b"a crash mid-write")
    (_, newest), (older_seq, older) = list_checkpoints(path)[:2]
    only_newest = set(ck._named_chunks(newest)) - set(ck._named_chunks(older))
    assert {name[64:] for name in only_newest} == {".arc", ".epx"}  # the second full chunk's
    # As after a cut back to the older checkpoint: the newest is past the head and goes.
    prune_checkpoints(path, 1, head_seq=older_seq)
    assert [path for _seq, path in list_checkpoints(path)] == [older]
    assert {p.name for p in chunk_dir.iterdir()} == set(ck._named_chunks(older))


def test_a_checkpoint_written_before_chunks_is_still_read(tmp_path: Path) -> None:
    records = _records(ARCHIVE_CHUNK + 9, [(k, k % 3 > 0, "ok") for k in range(30)])
    hashes = _hashes(records)
    state, tools = _batch(records)
    folder = tmp_path / CHECKPOINT_DIR
    folder.mkdir()
    stem = f"{state.seq:012d}"
    # The files as the code before chunks wrote them: the whole archive in the .ckpt, the
    # whole tool index (HOLONTIX), the whole episode index.
    (folder / (stem + ".ckpt")).write_bytes(encode_checkpoint(state, head_hash=hashes[-1]))
    old = {"seq": tools.seq, "head_hash": hashes[-1], "keys": tools.keys, "pending": tools.pending}
    payload = msgspec.msgpack.encode({**old, "unknown": tools.unknown})
    (folder / (stem + ".tools")).write_bytes(b"HOLONTIX" + blake3.blake3(payload).digest() + payload)
    index = EpisodeIndex(state.memory.archive).export()
    saved = msgspec.msgpack.encode([state.seq, hashes[-1], index])
    (folder / (stem + ".episodes")).write_bytes(b"HOLONEPX" + blake3.blake3(saved).digest() + saved)
    got_state, got_tools = _load(folder / (stem + ".ckpt"), records, hashes)
    assert got_state == state
    _same_tools(got_tools, tools)
    restored = load_episode_index(
        folder / (stem + ".ckpt"), seq=state.seq, head_hash=hashes[-1], episodes=state.memory.archive
    )
    assert isinstance(restored, EpisodeIndex) and restored.export() == index
    # The next checkpoint after it writes the new form; pruning leaves what it names.
    write_checkpoint(tmp_path, got_state, got_tools, head_hash=hashes[-1], save_index=True)
    prune_checkpoints(tmp_path, 1)
    assert _load(folder / (stem + ".ckpt"), records, hashes)[0] == state


def test_restore_checkpoint_without_a_chunk_reader_rejects_a_checkpoint_naming_chunks() -> None:
    records = _records(ARCHIVE_CHUNK + 1, [])
    state = fold(records)
    names = ("aa" * 32,)
    data = encode_checkpoint(state, head_hash="h", archive=names)
    rejected = restore_checkpoint(data, hash_at=lambda seq: "h")
    assert isinstance(rejected, CheckpointRejected) and rejected.reason == "corrupt"
    chunk = ck.encode_archive_chunk(state.memory.archive.chunks[0])
    assert restore_checkpoint(data, hash_at=lambda seq: "h", chunk=lambda name: chunk) == state


@pytest.mark.parametrize("style", STYLES)
def test_a_checksummed_index_holding_text_that_is_not_utf8_does_not_decode_whatever_msgspec_raises(
    monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    # msgspec before 0.23 raised UnicodeDecodeError for it, which escaped the checkpoint's checks.
    for name in ("_TOOLS_DECODER", "_EPISODES_DECODER"):
        monkeypatch.setattr(ck, name, styled(getattr(ck, name), style))
    saved = ck._SavedTools(seq=3, head_hash="ab" * 32, key_chunks=[], keys={}, pending={}, unknown=[])
    payload = msgspec.msgpack.encode(saved).replace(b"ab" * 32, b"\xff" * 64)
    tools = ck._TOOLS_MAGIC + blake3.blake3(payload).digest() + payload
    assert ck._decode_tools(tools) == f"does not decode: {_failure(ck._TOOLS_DECODER, payload)}"
    episodes = msgspec.msgpack.encode(ck._SavedEpisodes(seq=3, head_hash="ab" * 32, index=b""))
    episodes = episodes.replace(b"ab" * 32, b"\xff" * 64)
    data = ck._EPISODES_MAGIC + blake3.blake3(episodes).digest() + episodes
    assert ck._decode_episodes(data) == f"does not decode: {_failure(ck._EPISODES_DECODER, episodes)}"


def _failure(decoder: msgspec.msgpack.Decoder[object], data: bytes) -> str:
    try:
        decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        return str(exc)
    raise AssertionError("it decoded")


# ---------------------------------------------------------------- symbolic links


def _linked_state() -> tuple[ProjectionState, ToolIndex, str]:
    """A state whose checkpoint writes every kind of file: .ckpt, .tools, .episodes, .arc, .epx."""
    records = _records(ARCHIVE_CHUNK + 3, [(k, True, "ok") for k in range(10)])
    state, tools = _batch(records)
    return state, tools, _hashes(records)[-1]


def _checkpoint_files(root: Path) -> dict[str, Path]:
    """Each kind of file a checkpoint of :func:`_linked_state` writes under ``root``, by kind."""
    state, tools, head = _linked_state()
    root.mkdir()
    write_checkpoint(root, state, tools, head_hash=head, save_index=True)
    folder = root / CHECKPOINT_DIR
    (ckpt,) = folder.glob("*.ckpt")
    (arc,) = (folder / CHUNK_DIR).glob("*.arc")
    (epx,) = (folder / CHUNK_DIR).glob("*.epx")
    return {
        "ckpt": ckpt,
        "tools": ckpt.with_suffix(".tools"),
        "episodes": ckpt.with_suffix(".episodes"),
        "ckpt.tmp": ckpt.with_name(ckpt.name + ".tmp"),
        "arc": arc,
        "epx": epx,
        "arc.tmp": arc.with_name(arc.name + ".tmp"),
        "checkpoints": folder,
        "chunks": folder / CHUNK_DIR,
    }


@pytest.mark.parametrize(
    "kind", ["ckpt", "tools", "episodes", "ckpt.tmp", "arc", "epx", "arc.tmp", "checkpoints", "chunks"]
)
def test_a_checkpoint_never_writes_through_a_link_planted_where_it_writes(tmp_path: Path, kind: str) -> None:
    # Each file was written to <name>.tmp (O_TRUNC: through a link, the file it named was
    # truncated and overwritten) and renamed over <name> (a link there was replaced unseen);
    # through a linked directory, all of them were written into the directory it named.
    name = _checkpoint_files(tmp_path / "names")[kind].relative_to(tmp_path / "names")
    root = tmp_path / "l"
    root.mkdir()
    link = root / name
    link.parent.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "precious"
    if kind in ("checkpoints", "chunks"):
        outside.mkdir()
        (outside / "mine.txt").write_bytes(b"keep me\n")
        link.symlink_to(outside, target_is_directory=True)
    else:
        outside.write_bytes(b"keep me\n")
        link.symlink_to(outside)
    before = tree_bytes(outside) if outside.is_dir() else outside.read_bytes()
    state, tools, head = _linked_state()
    with pytest.raises(LedgerCorrupt) as refused:
        write_checkpoint(root, state, tools, head_hash=head, save_index=True)
    assert refused.value.file == str(link)
    assert "is a symbolic link" in refused.value.detail
    assert "remove the link" in refused.value.detail
    assert (tree_bytes(outside) if outside.is_dir() else outside.read_bytes()) == before


@pytest.mark.parametrize("directory", ["checkpoints", "chunks"])
def test_pruning_never_removes_files_of_a_directory_a_link_names(tmp_path: Path, directory: str) -> None:
    # Pruning removed every file of the chunk directory that no kept checkpoint names: through
    # a link, every file of the directory it pointed to.
    files = _checkpoint_files(tmp_path / "l")
    link = files[directory]
    outside = tmp_path / "elsewhere"
    shutil.move(link, outside)
    (outside / "mine.txt").write_bytes(b"keep me\n")
    link.symlink_to(outside, target_is_directory=True)
    before = tree_bytes(outside)
    with pytest.raises(LedgerCorrupt) as refused:
        prune_checkpoints(tmp_path / "l", 0)
    assert refused.value.file == str(link) and "is a symbolic link" in refused.value.detail
    assert tree_bytes(outside) == before


@pytest.mark.parametrize("kind", ["ckpt", "tools", "arc", "episodes", "epx"])
def test_a_checkpoint_file_that_is_a_link_is_rejected_by_name(tmp_path: Path, kind: str) -> None:
    # A reader took a checkpoint's state, tool index or chunk from wherever a link pointed.
    records = _records(ARCHIVE_CHUNK + 3, [(k, True, "ok") for k in range(10)])
    hashes = _hashes(records)
    files = _checkpoint_files(tmp_path / "l")
    link = files[kind]
    shutil.move(link, tmp_path / "elsewhere")
    link.symlink_to(tmp_path / "elsewhere")
    head = (len(records) - 1, hashes[-1])
    loaded = load_checkpoint(files["ckpt"], head=head, tail=lambda seq: records[seq + 1 :], config=None)
    if kind in ("episodes", "epx"):  # the checkpoint stands; its saved index is not used
        assert not isinstance(loaded, CheckpointRejected), loaded
        state, _tools, _tail = loaded
        rejected = load_episode_index(
            files["ckpt"], seq=state.seq, head_hash=hashes[state.seq], episodes=state.memory.archive
        )
        assert isinstance(rejected, EpisodeIndexRejected) and rejected.reason == "corrupt"
        detail = rejected.detail
    else:
        assert isinstance(loaded, CheckpointRejected) and loaded.reason == "corrupt", loaded
        detail = loaded.detail
    assert f"{link.name} is a symbolic link, which holon never writes: remove the link" in detail


def test_an_agent_whose_checkpoint_directory_becomes_a_link_says_so_and_runs_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The checkpoint after a turn is a cache: refused through a link, it is a warning (as a
    # full disk is), and the turn's summary is returned; asked for, it raises; opening the
    # ledger again names the link.
    path = tmp_path / "l"
    config = AgentConfig(checkpoint_every=1, fsync="never")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with Agent.open(path, agent_id="a", config=config, clock=Tick()) as agent:
        with agent.turn(input="one"):
            pass
        shutil.rmtree(path / CHECKPOINT_DIR)
        (path / CHECKPOINT_DIR).symlink_to(outside, target_is_directory=True)
        with agent.turn(input="two") as turn:
            pass
        assert turn.summary is not None and turn.summary.checkpoint_seq is None
        assert f"checkpoint after turn {turn.index} not written" in caplog.text
        assert "the checkpoint directory is a symbolic link" in caplog.text
        with pytest.raises(LedgerCorrupt, match="the checkpoint directory is a symbolic link"):
            agent.checkpoint()
    assert os.listdir(outside) == []
    with pytest.raises(LedgerCorrupt) as refused:
        Agent.open(path, config=config)
    assert refused.value.file == str(path / CHECKPOINT_DIR)


# ---------------------------------------------------------------- checkpoint chunk files


class _Killed(BaseException):
    """Stands for SIGKILL at one step of a checkpoint: nothing after it runs, nothing is cleaned up."""


_CK_CONFIG = AgentConfig(
    checkpoint_every=100, checkpoints_kept=1, fsync="never", projection=ProjectionConfig(turn_cap=1)
)
_CK_TURNS = 140


def _ck_agent(path: Path, turns: range, *, agent_id: str | None = None) -> None:
    with Agent.open(path, agent_id=agent_id, config=_CK_CONFIG, clock=Tick(1_000 * turns.start)) as agent:
        for i in turns:
            with agent.turn(input=f"turn {i} about parser{i % 9}") as turn:
                call = turn.tool("bash", {"command": f"make {i}"}, idempotency_key=f"k{i}")
                call.run(lambda i=i: (f"built {i}", 0))
                turn.record_message(f"done {i}")


@pytest.fixture(scope="module")
def ck_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An agent's ledger of 140 one-turn episodes checkpointed at turn 100 only (one full archive
    chunk, key chunks of 8 keys), and a chunk file no checkpoint names (a crash's debris)."""
    path = tmp_path_factory.mktemp("ck") / "l"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ck, "KEY_CHUNK", 8)
        _ck_agent(path, range(_CK_TURNS), agent_id="a")
    (path / CHECKPOINT_DIR / CHUNK_DIR / ("ab" * 32 + ".arc")).write_bytes(b"debris")
    return path


def _fold_all(path: Path, into: Path) -> tuple[ProjectionState, bytes, list[tuple[str, KeyEntry]]]:
    shutil.copytree(path, into)
    shutil.rmtree(into / CHECKPOINT_DIR)
    with Agent.open(into, config=_CK_CONFIG) as agent:
        return agent.projection, agent.episodes.export(), list(agent._core.tools.keys.items())


def _kill_at(monkeypatch: pytest.MonkeyPatch, kill_at: int, steps: list[str]) -> None:
    """Raise _Killed at the ``kill_at``-th step of what a checkpoint does to its files (each
    write before it starts, with half its temp file written, and done; each directory sync;
    each removal); ``steps`` lists the steps reached."""

    def step(what: str) -> None:
        steps.append(what)
        if len(steps) - 1 == kill_at:
            raise _Killed(what)

    write, fsync_dir, unlink = ck._write_atomic, ck._fsync_dir, Path.unlink

    def writing(path: Path, data: bytes) -> None:
        step(f"before writing {path.name}")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data[: len(data) // 2])
        step(f"half of {tmp.name} written")
        write(path, data)
        step(f"{path.name} written")

    def syncing(path: Path) -> None:
        step(f"syncing {path.name}/")
        fsync_dir(path)

    def removing(path: Path, missing_ok: bool = False) -> None:
        step(f"removing {path.name}")
        unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(ck, "_write_atomic", writing)
    monkeypatch.setattr(ck, "_fsync_dir", syncing)
    monkeypatch.setattr(Path, "unlink", removing)


def test_a_kill_at_every_step_of_a_checkpoint_falls_back_and_the_next_names_no_missing_chunk(
    ck_ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ck, "KEY_CHUNK", 8)
    want = _fold_all(ck_ledger, tmp_path / "fold")
    (old_seq, _), *_ = list_checkpoints(ck_ledger)
    kill_at, reached = 0, 0
    while True:
        path = tmp_path / f"k{kill_at}"
        shutil.copytree(ck_ledger, path)
        steps: list[str] = []
        agent = Agent.open(path, config=_CK_CONFIG)
        with monkeypatch.context() as patch:
            _kill_at(patch, kill_at, steps)
            try:
                agent.checkpoint()
            except _Killed:
                pass
            else:
                break  # every step was killed at once
            finally:
                agent.ledger.close()  # the process is gone: its lock with it
        where = f"killed {steps[-1]!r}"
        with Agent.open(path, config=_CK_CONFIG) as reopened:
            # A .ckpt is in place only with everything it names: none is rejected.
            assert reopened.report.rejected == (), where
            assert reopened.report.checkpoint_seq in (old_seq, reopened.seq), where
            got = reopened.projection, reopened.episodes.export(), list(reopened._core.tools.keys.items())
            assert got == want, where
            reopened.checkpoint()
        with Agent.open(path, config=_CK_CONFIG) as again:
            assert again.report.rejected == () and again.report.checkpoint_seq == again.seq, where
            assert again.projection == want[0], where
        (_, kept), *older = list_checkpoints(path)
        assert not older, where
        chunk_dir = path / CHECKPOINT_DIR / CHUNK_DIR
        assert {p.name for p in chunk_dir.iterdir()} == set(ck._named_chunks(kept)), where
        assert not [p for p in (path / CHECKPOINT_DIR).iterdir() if p.name.endswith(".tmp")], where
        reached = len(steps)
        kill_at += 1
    # The checkpoint wrote an archive chunk, its index segment and a key chunk, then its
    # three files, and removed the older checkpoint and the debris chunk.
    done = " | ".join(steps)
    for what in (".arc written", ".epx written", ".keys written", ".ckpt written", "removing " + "ab" * 32):
        assert what in done, done
    assert kill_at == reached >= 20
