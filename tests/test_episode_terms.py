"""Episode selection matches the words of any script, as ``holon search`` does.

The renderer's terms were ASCII ``[0-9a-z]`` words: an agent working in Chinese,
Russian or Japanese got archived episodes selected only by structural matches (same
work item, shared files), never by the words of its input or objective, and German
text matched only by ASCII fragments of its words (``Straße`` was ``stra``). Each
selection test here selects nothing on that code.

A saved episode index depends on the terms (``INDEX_FORMAT`` 3): one saved by the code
that tokenized ASCII words only is rejected as stale and rebuilt, never used.
"""

# ruff: noqa: RUF001  (fullwidth question marks are how the inputs are written)

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import blake3
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.records as r
import holon.search.episodes as search_module
from holon.context import (
    Budget,
    CurrentInput,
    EpisodeIndex,
    EpisodeIndexRejected,
    RenderConfig,
    build_context,
    select_episodes,
)
from holon.context.search import INDEX_FORMAT, terms
from holon.projections import WorkingMemorySnapshot
from holon.runtime import Agent, AgentConfig
from holon.runtime.checkpoints import list_checkpoints
from holon.search import STOP_WORDS, MemorySearch, search_terms
from tests.context_inputs import inputs
from tests.runtime_support import Tick

ROOT = Path(__file__).resolve().parent.parent


def _episode(i: int, objective: str) -> r.ContextEpisodeRecord:
    return r.ContextEpisodeRecord(
        episode_id=i,
        boundary_reason="active_work_switched",
        work_item_id=f"w{i}",
        first_turn=i * 10,
        last_turn=i * 10 + 9,
        from_seq=i * 100,
        to_seq=i * 100 + 99,
        objective=objective,
        projection_version=1,
    )


# Archived work in several languages; each case below asks about one of them.
ARCHIVE = [
    _episode(0, "修复数据库迁移失败的问题"),  # fix the failed database migration
    _episode(1, "Починить миграцию базы данных"),  # fix the database migration
    _episode(2, "Straßensperrung in der Innenstadt melden"),  # report the road closure downtown
    _episode(3, "データベースの移行を完了する"),  # finish the database migration
    _episode(4, "rotate the signing keys of the billing service"),
    _episode(5, "重新设计登录页面"),  # redesign the login page
]

# (current input, the episode it asks about). The active work item is another one and
# no file is shared: only the input's words can make the episode relevant.
ASKED = [
    ("数据库迁移现在怎么样了？", 0),  # how is the database migration going now?
    ("Что с базы данных сейчас?", 1),  # what about the database now?
    ("Wurde die STRASSENSPERRUNG schon gemeldet?", 2),  # ß written SS: in capitals, or in Swiss spelling
    ("データベースの状況は？", 3),  # how is the database?
]


@pytest.mark.parametrize(("text", "wanted"), ASKED)
def test_an_archived_episode_is_selected_by_the_words_of_an_input_in_its_language(
    text: str, wanted: int
) -> None:
    index = EpisodeIndex(ARCHIVE)
    snapshot = WorkingMemorySnapshot(active_work_item_id="w9", work_state="active", objective="")
    current = inputs(snapshot=snapshot, current_input=CurrentInput(text=text, seq=5000))
    chosen = select_episodes(current, index, limit=3)
    archived = [terms(e.objective or "") for e in ARCHIVE]
    assert [e.episode_id for e in chosen] == [wanted], (terms(text), archived)


def test_an_objective_in_another_script_selects_its_earlier_episodes_and_the_prompt_shows_them() -> None:
    # The active work item's own objective is part of the query too.
    index = EpisodeIndex(ARCHIVE)
    objective = "登录页面的按钮颜色"  # the login page's buttons
    snapshot = WorkingMemorySnapshot(active_work_item_id="w9", work_state="active", objective=objective)
    current = inputs(snapshot=snapshot, current_input=None)
    assert [e.episode_id for e in select_episodes(current, index, limit=3)] == [5]
    budget = Budget(context_window=8_000, output_reserve=1_000)
    prompt = build_context(current, budget, RenderConfig(), index=index)
    assert "重新设计登录页面" in prompt.text and "episode:5" in prompt.text


# ---------------------------------------------------------------- ASCII terms are unchanged


def _reference_terms(text: str) -> list[str]:
    """terms() as first written (INDEX_FORMAT 1 and 2): ASCII words, identifiers, path parts."""
    out: list[str] = []
    stop = STOP_WORDS
    for match in re.findall(r"[0-9a-z]+(?:[_-][0-9a-z]+)*", text.lower()):
        if len(match) > 1 and match not in stop:
            out.append(match)
        if "_" in match or "-" in match:
            out.extend(p for p in re.split(r"[_-]", match) if len(p) > 1 and p not in stop)
    return out


# Words, stop words, joiners, one-character terms, upper case; and any ASCII at all.
_ASCII = st.text(alphabet="ab_-z09 .\n/XyQfor the_ok-done", max_size=60) | st.text(
    alphabet=st.characters(max_codepoint=0x7F), max_size=60
)


@given(_ASCII)
@settings(max_examples=500, deadline=None)
def test_ascii_text_has_the_same_terms_in_the_same_order_as_ever(text: str) -> None:
    # Every saved index, recorded prompt and golden file of ASCII text depends on these
    # terms: making terms() read other scripts must not change one of them.
    assert terms(text) == _reference_terms(text)
    # Memory search's terms are these, then identifiers written with marks (not episode selection's).
    words = terms(text)
    assert search_terms(text)[: len(words)] == words
    assert all(any(mark in t for mark in "./:#@\\") for t in search_terms(text)[len(words) :])


# ---------------------------------------------------------------- a saved index of the old terms

# What the code before INDEX_FORMAT 3 wrote as the saved index's tokenizer fingerprint.
_OLD_FINGERPRINT = f"2|[0-9a-z]+(?:[_-][0-9a-z]+)*|{' '.join(sorted(STOP_WORDS))}"


def _saved_by_old_code(episodes: list[r.ContextEpisodeRecord], monkeypatch: pytest.MonkeyPatch) -> bytes:
    """The bytes EpisodeIndex.export() gave before INDEX_FORMAT 3: old terms, old fingerprint."""
    with monkeypatch.context() as patched:
        patched.setattr(search_module, "terms", _reference_terms)
        patched.setattr(search_module, "_TOKENIZER", _OLD_FINGERPRINT)
        return EpisodeIndex(episodes).export()


def test_an_index_saved_with_ascii_only_terms_is_rejected_as_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    old = _saved_by_old_code(ARCHIVE, monkeypatch)
    rejected = EpisodeIndex.restore(old, ARCHIVE)
    assert isinstance(rejected, EpisodeIndexRejected)
    assert rejected.reason == "stale"
    assert rejected.detail == (
        "saved episode index was built by other tokenizing code "
        f"(INDEX_FORMAT '2', this code's is {INDEX_FORMAT})"
    )
    # What the fingerprint protects against: the spot check re-tokenizes only the newest
    # 16 saved episodes, so an old index of a longer archive would pass it and be used,
    # and the older, non-ASCII episodes would never be found by their words.
    longer = ARCHIVE + [_episode(i, f"rotate key {i} of the billing service") for i in range(6, 22)]
    with monkeypatch.context() as patched:
        patched.setattr(search_module, "terms", _reference_terms)
        unmarked = EpisodeIndex(longer).export()  # old postings under the new fingerprint
    accepted = EpisodeIndex.restore(unmarked, longer)
    assert isinstance(accepted, EpisodeIndex) and accepted.search("数据库迁移") == []
    assert [h.episode.episode_id for h in EpisodeIndex(longer).search("数据库迁移")] == [0]


def test_another_unicode_database_is_named_as_the_reason() -> None:
    fields = msgspec.msgpack.decode(EpisodeIndex(ARCHIVE).export())
    fields[0] = re.sub(r"\|unicode [^|]*\|", "|unicode 1.0.0|", fields[0])
    rejected = EpisodeIndex.restore(msgspec.msgpack.encode(fields), ARCHIVE)
    assert isinstance(rejected, EpisodeIndexRejected) and rejected.reason == "stale"
    assert "'unicode 1.0.0', this Python's is 'unicode " in rejected.detail


CONFIG = AgentConfig(checkpoint_every=1, checkpoints_kept=2, fsync="never")


def _chinese_agent(path: Path) -> None:
    """A ledger of an agent working in Chinese: the migration archived, then 30 turns of other work."""
    with Agent.open(path, agent_id="a", config=CONFIG, clock=Tick()) as agent:
        with agent.turn(input="开始修复数据库迁移") as turn:
            turn.add_work_item("W1", "修复数据库迁移失败的问题", state="active")
            turn.record_message("迁移脚本在第三步失败")  # the migration script fails at step three
        with agent.turn(input="先做登录页面") as turn:  # the login page first: W1's episode is archived
            turn.add_work_item("W2", "重新设计登录页面", state="active")
        for i in range(30):  # enough turns for the migration to leave the recent window
            with agent.turn(input=f"登录页面第{i}步") as turn:
                turn.record_message(f"按钮第{i}个完成")


def _next_prompt(path: Path) -> r.PromptRendered:
    with Agent.open(path, config=CONFIG, clock=Tick(start=2_000_000_000_000)) as agent:
        with agent.turn(input="数据库迁移现在怎么样了？") as turn:
            turn.context()
        records = agent.ledger.read(turn.first_seq)
        (rendered,) = [x.body for x in records if isinstance(x.body, r.PromptRendered)]
    return rendered


def test_an_agent_opened_with_an_old_saved_index_rebuilds_it_and_selects_by_chinese_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "l"
    _chinese_agent(path)
    (_, newest), *_ = list_checkpoints(path)
    sidecar = newest.with_suffix(".episodes")
    data = sidecar.read_bytes()
    seq, head_hash, *_saved = msgspec.msgpack.decode(data[40:])  # written whole below, as old code did
    with Agent.open(path, config=CONFIG) as agent:
        archive = list(agent.memory.archive)
    payload = msgspec.msgpack.encode([seq, head_hash, _saved_by_old_code(archive, monkeypatch)])
    sidecar.write_bytes(data[:8] + blake3.blake3(payload).digest() + payload)

    with caplog.at_level(logging.WARNING), Agent.open(path, config=CONFIG) as agent:
        rejected = agent.report.episode_index_rejected
        assert agent.report.episode_index == "built" and rejected is not None
        assert rejected.reason == "stale" and sidecar.name in rejected.detail
        assert "INDEX_FORMAT '2'" in rejected.detail
        assert agent.episodes.export() == EpisodeIndex(agent.memory.archive).export()
    assert "saved episode index not used (stale" in caplog.text
    migration = next(e.episode_id for e in archive if e.work_item_id == "W1")
    assert migration in _next_prompt(path).episodes


# ---------------------------------------------------------------- determinism

_SEEDED = """
import hashlib
from holon.context import CurrentInput, EpisodeIndex, select_episodes
from holon.context.search import terms
from holon.projections import WorkingMemorySnapshot
from tests.context_inputs import inputs
from tests.test_episode_terms import ARCHIVE, ASKED

index = EpisodeIndex(ARCHIVE)
snapshot = WorkingMemorySnapshot(active_work_item_id="w9", work_state="active", objective="")
asked = [inputs(snapshot=snapshot, current_input=CurrentInput(text=text, seq=5000)) for text, _ in ASKED]
chosen = [[e.episode_id for e in select_episodes(one, index, limit=6)] for one in asked]
print(hashlib.sha256(index.export()).hexdigest(), chosen, [terms(text) for text, _ in ASKED])
"""


def test_terms_index_bytes_and_selection_are_the_same_under_any_hash_seed() -> None:
    runs = set()
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", _SEEDED], cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
        runs.add(done.stdout)
    assert len(runs) == 1, runs


# ---------------------------------------------------------------- queries in any script


def _msg(seq: int, text: str, turn: int | None = 1) -> r.Record:
    return r.Record(body=r.Message(role="user", text=text), ts=seq, turn=turn, seq=seq)


# (recorded text, a query a person would type for it). Before search folded text, each
# query found nothing: terms were ASCII [0-9a-z] runs of the lowercased text, so a word
# with an accent was cut in two, ß and İ lowercased to other letters than ss and i, and
# Chinese, Japanese, Hebrew, Arabic or Cyrillic text gave no terms at all.
_FOUND_BY = [
    ("Straße nach Köln gesperrt", "strasse"),
    ("STRASSE gesperrt", "straße"),
    ("İSTANBUL office moved", "istanbul"),
    ("the KAPI sensor", "kapı"),  # Turkish dotless ı  # noqa: RUF003
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


_ASCII_TEXT = st.text(alphabet="ab_-z09 ./\n:QX", max_size=40)


@given(text=_ASCII_TEXT, other=st.sampled_from(["é", "—", "→", "数", "\u00ad", "ß"]))
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
