"""Adversarial review of episode and memory search: queries, ranking ties, the saved index.

Each test pins a bug found in review (it fails on the code before its fix) or an edge
the review checked and found sound.
"""

# ruff: noqa: RUF001, RUF003  (look-alike letters of other scripts are the point)

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon import records as r
from holon.context import EpisodeIndex
from holon.context.search import terms
from holon.importers import import_transcript
from holon.ledger import Ledger
from holon.runtime import Agent, AgentConfig
from holon.runtime.checkpoints import CHECKPOINT_DIR, list_checkpoints
from holon.search import MemorySearch, search_terms
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
    # The two messages are near-duplicates: one hit, with both refs, newest first.
    hits = MemorySearch(alone).search("signing keys")
    assert [h.refs for h in hits] == [("ledger:4", "ledger:3"), ("ledger:0",)]


# ---------------------------------------------------------------- queries in any script

# (recorded text, a query a person would type for it). Before search folded text, each
# query found nothing: terms were ASCII [0-9a-z] runs of the lowercased text, so a word
# with an accent was cut in two, ß and İ lowercased to other letters than ss and i, and
# Chinese, Japanese, Hebrew, Arabic or Cyrillic text gave no terms at all.
_FOUND_BY = [
    ("Straße nach Köln gesperrt", "strasse"),
    ("STRASSE gesperrt", "straße"),
    ("İSTANBUL office moved", "istanbul"),
    ("the KAPI sensor", "kapı"),  # Turkish dotless ı
    ("café résumé naïve", "resume"),
    ("e\u0301tude (decomposed accent)", "étude"),
    ("ｆｕｌｌｗｉｄｔｈ letters", "fullwidth"),
    ("ex\u00adample with a soft hyphen", "example"),
    ("数据库迁移失败", "迁移"),  # Chinese, no spaces
    ("数据库迁移失败", "数据库"),
    ("データベースの移行が完了", "データベース"),  # Japanese: kana and kanji in one run
    ("ｶﾞｲﾄﾞを読む", "ガイド"),  # halfwidth katakana
    ("한국어 검색 테스트", "검색"),
    ("שלום עולם", "עולם"),  # Hebrew, right to left
    ("\u200fמסד נתונים\u200f", "נתונים"),  # with direction marks
    ("مرحبا بالعالم", "مرحبا"),
    ("Привет мир, база данных", "данных"),
    ("ΟΔΟΣ κλειστή", "οδός"),  # final sigma
]


@pytest.mark.parametrize(("text", "query"), _FOUND_BY)
def test_a_query_in_any_script_finds_the_record_that_says_it(text: str, query: str) -> None:
    index = MemorySearch([_msg(0, "unrelated deploy notes"), _msg(1, text), _msg(2, "more unrelated words")])
    hits = index.search(query)
    assert [h.ref for h in hits] == ["ledger:1"], (text, query, search_terms(text), search_terms(query))
    assert hits[0].matched and hits[0].snippet == text.strip()


_ASCII = st.text(alphabet="ab_-z09 ./\n:QX", max_size=40)


@given(text=_ASCII, other=st.sampled_from(["é", "—", "→", "数", "\u00ad", "ß"]))
@settings(max_examples=300, deadline=None)
def test_ascii_text_has_the_terms_episode_selection_uses_with_or_without_other_characters(
    text: str, other: str
) -> None:
    # Folding is for characters outside ASCII only: ASCII words keep exactly the terms
    # holon.context.search.terms gives them, wherever a non-ASCII character is.
    # (Memory search adds identifiers written with marks after these: tests/test_memory_search.py.)
    assert terms(text + " " + other) == terms(text) + [t for t in terms(other) if t]
    assert terms(other + " " + text) == [t for t in terms(other) if t] + terms(text)
    assert search_terms(text + " " + other)[: len(terms(text + " " + other))] == terms(text + " " + other)


# ---------------------------------------------------------------- holon_search answers


@pytest.mark.parametrize("query", ["", "   ", "!!! ???", "🚀🔥", "the and of", "a b c", "\u200f\u00ad"])
def test_a_query_without_words_is_told_so_not_that_nothing_matches(tmp_path: Path, query: str) -> None:
    # "nothing this agent recorded matches ''" reads as "there is no such evidence";
    # the model should learn that its query had nothing to search for.
    with Agent.open(tmp_path / "l", agent_id="a", clock=Tick()) as agent:
        with agent.turn(input="the deploy failed") as turn:
            turn.record_message("the deploy failed again")
            call = turn.recall("holon_search", {"query": query})
        assert agent.search(query) == []
    assert call.result is not None and call.result.status == "ok"
    assert call.output.startswith(f"the query {query!r} has no words to search for")


def test_a_huge_query_is_quoted_back_clipped(tmp_path: Path) -> None:
    # The answer quoted the whole query, twice the cost of a long query in the window.
    query = "deploy " + "x" * 100_000
    with (
        Agent.open(tmp_path / "l", agent_id="a", clock=Tick()) as agent,
        agent.turn(input="the deploy failed") as turn,
    ):
        found = turn.recall("holon_search", {"query": query}).output
        missing = turn.recall("holon_search", {"query": "zebra " * 20_000}).output
    assert found.startswith("1 hit for 'deploy xxx") and len(found) < 1_000
    assert "…' best first" not in found and "…', best first:" in found
    assert missing.startswith("nothing this agent recorded matches 'zebra zebra") and len(missing) < 300


# ---------------------------------------------------------------- arguments


def _episode(i: int, objective: str) -> r.ContextEpisodeRecord:
    return r.ContextEpisodeRecord(
        episode_id=i,
        boundary_reason="turn_cap",
        work_item_id=None,
        first_turn=i,
        last_turn=i,
        from_seq=i * 10,
        to_seq=i * 10 + 9,
        objective=objective,
        projection_version=1,
    )


def test_a_limit_below_one_or_an_unknown_only_is_refused_not_half_applied() -> None:
    # EpisodeIndex.search(limit=-1) returned all hits but the last (ranked[:-1]); an
    # unknown `only` ("episode") filtered nothing. Both read as a real answer.
    index = EpisodeIndex([_episode(i, f"postgres {w}") for i, w in enumerate(("vacuum", "lag", "dump"))])
    assert len(index.search("postgres", limit=3)) == 3
    for limit in (0, -1):
        with pytest.raises(ValueError, match="limit must be at least 1"):
            index.search("postgres", limit=limit)
    archived = r.Record(body=_episode(0, "postgres vacuum"), ts=0, turn=None, seq=9)
    memory = MemorySearch([archived, _msg(10, "postgres")])
    assert [h.source for h in memory.search("postgres", only="episodes")] == ["episode"]
    with pytest.raises(ValueError, match="only must be None, 'episodes' or 'evidence'"):
        memory.search("postgres", only="episode")  # type: ignore[arg-type]


# ---------------------------------------------------------------- snippets


@pytest.mark.parametrize("where", [0, 20, 60, 119])
def test_the_snippet_of_a_long_line_shows_the_match(where: int) -> None:
    # A one-line JSON output: its snippet was the line's first 159 characters, which
    # did not show the match, so the model could not tell why the hit was found.
    fields = [f'"field{i}": {i}' for i in range(120)]
    fields.insert(where, '"error_code": "E_TIMEOUT"')
    line = "{" + ", ".join(fields) + "}"
    hit = MemorySearch([_msg(0, "unrelated"), _msg(1, f"curl said\n{line}\ndone")]).search("E_TIMEOUT")[0]
    assert hit.ref == "ledger:1" and len(hit.snippet) <= 160
    assert "E_TIMEOUT" in hit.snippet and hit.snippet.strip("…") in line
    assert hit.snippet.startswith("{") == (where < 3)  # an early match keeps the line's head


@pytest.mark.parametrize(
    ("query", "written"), [("strasse", "Straße"), ("cafe", "Café"), ("istanbul", "İSTANBUL")]
)
def test_the_snippet_of_a_long_line_shows_a_match_found_by_its_folded_form(query: str, written: str) -> None:
    # The match was looked for as written in the lowered line, so a term found by its
    # folded form was never located and the snippet fell back to the line's head.
    line = " ".join(f"Eintrag{i} ok" for i in range(40)) + f" Umleitung über die {written} Nord"
    hit = MemorySearch([_msg(0, "unrelated"), _msg(1, line)]).search(query)[0]
    assert hit.ref == "ledger:1" and len(hit.snippet) <= 160
    assert written in hit.snippet and hit.snippet.strip("…") in line


# ---------------------------------------------------------------- ties and hash seeds

_TIES = """
import msgspec
from holon import records as r
from holon.context import EpisodeIndex
from holon.search import MemorySearch

texts = ["Straße gesperrt", "strasse gesperrt", "数据库迁移", "数据库迁移", "deploy billing", "billing dep"]
records, episodes = [], []
for i in range(24):
    text = texts[i % len(texts)]
    if i % 4 == 3:
        episode = r.ContextEpisodeRecord(
            episode_id=len(episodes), boundary_reason="turn_cap", work_item_id=f"w{i % 2}", first_turn=i,
            last_turn=i, from_seq=i, to_seq=i, objective=text, projection_version=1,
        )
        episodes.append(episode)
        records.append(r.Record(body=episode, ts=i, turn=None, seq=i))
    else:
        records.append(r.Record(body=r.Message(role="user", text=text), ts=i, turn=i, seq=i))
memory = MemorySearch(records)
index = EpisodeIndex(episodes)
out = [memory.search(q, limit=7) for q in ("STRASSE", "迁移 数据库", "billing deploy", "gesperrt billing")]
out.append([(h.episode.episode_id, h.score) for q in ("strasse", "deploy") for h in index.search(q)])
print(msgspec.json.encode(out).decode())
"""


def test_ranking_ties_are_broken_the_same_under_any_hash_seed() -> None:
    # Equal scores everywhere (identical texts, an episode and a message at one seq):
    # the order must come from seq, kind and id, never from dict or set order.
    runs = []
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", _TIES], cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
        runs.append(done.stdout)
    assert runs[0] == runs[1] == runs[2]
    for hits in msgspec.json.decode(runs[0])[:4]:
        keys = [(-hit["score"], -hit["seq"], hit["source"] != "episode") for hit in hits]
        assert keys == sorted(keys), "equal scores: the newer record first, an episode before evidence"


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
