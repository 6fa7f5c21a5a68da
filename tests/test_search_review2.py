"""Second review of memory search: tool arguments as text, queries with no words, BM25 itself.

Each test pins a bug found in review (it fails on the code before its fix), or is the
property the review checked and found sound.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon import records as r
from holon.cli import EXIT_OK, EXIT_USAGE
from holon.context.search import episode_text, terms
from holon.search import FIELD_WEIGHTS, RECENCY, MemorySearch, evidence_text, search_terms
from tests.cli_support import build_ledger, invoke


def _intent(seq: int, args: dict[str, r.JSON], tool: str = "bash") -> r.Record:
    return r.Record(body=r.ToolIntent(call_id=f"c{seq}", tool=tool, args=args), ts=seq, turn=1, seq=seq)


def _msg(seq: int, text: str) -> r.Record:
    return r.Record(body=r.Message(role="user", text=text), ts=seq, turn=1, seq=seq)


# ---------------------------------------------------------------- tool calls as text


@pytest.mark.parametrize(
    ("args", "query"),
    [
        ({"command": "cd /repo\npytest -x tests/test_checkout.py"}, "pytest"),
        ({"command": "make lint\tmypy --strict"}, "mypy"),
        ({"path": "app.py", "content": "import os\nimport sys\nrevert_migration()\n"}, "revert_migration"),
        ({"edits": [{"old": "a = 1\nbilling_total = 2", "new": "x"}]}, "billing_total"),
        ({"note": 'say "rollback" now'}, "rollback"),
    ],
)
def test_a_word_starting_a_line_of_a_tool_argument_is_found(args: dict[str, r.JSON], query: str) -> None:
    # Intents were indexed as their arguments' JSON, where a line break or tab inside a
    # string is the escape backslash-n / backslash-t: `cd /repo\npytest` gave the term
    # `npytest`, so the first word of every line of a command or written file was lost.
    index = MemorySearch([_msg(0, "unrelated"), _intent(1, args), _msg(2, "other words")])
    hits = index.search(query)
    assert [h.ref for h in hits] == ["ledger:1"], terms(evidence_text(_intent(1, args).body) or "")
    assert query in hits[0].matched and query in hits[0].snippet


def test_a_tool_call_is_indexed_by_its_name_argument_names_and_every_value() -> None:
    args: dict[str, r.JSON] = {"timeout": 30, "flags": [True, None], "env": {"DEPLOY_ENV": "staging"}}
    text = evidence_text(r.ToolIntent(call_id="c", tool="run_job", args=args))
    assert text == "run_job\ntimeout: 30\nflags: true\nflags: null\nDEPLOY_ENV: staging"
    # No nesting is too deep (the walk is a loop, not a recursion).
    deep: r.JSON = "bottom_word"
    for _ in range(5_000):
        deep = {"k": [deep]}
    assert MemorySearch([_intent(0, {"deep": deep})]).search("bottom_word")[0].ref == "ledger:0"


# ---------------------------------------------------------------- the CLI's queries


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_ledger(tmp_path_factory.mktemp("search") / "L", "session_multi_work")


@pytest.mark.parametrize("command", [("search",), ("episodes", "--search")])
@pytest.mark.parametrize("query", ["", "  ", "the", "!!! ???", "🚀", "with the"])
def test_a_query_with_no_words_is_a_usage_error_not_nothing_matches(
    session: Path, command: tuple[str, ...], query: str
) -> None:
    # `holon search L the` printed "nothing matches 'the'" (exit 0): read as "the ledger holds
    # no such thing", when no ledger could match it. holon_search tells the model so too.
    result = invoke(command[0], session, *command[1:], query)
    assert result.exit_code == EXIT_USAGE, result.stdout
    assert result.stdout == ""
    assert f"the query {query!r} has no words to search for" in result.stderr
    found = invoke(command[0], session, *command[1:], "billing", "--json")
    assert found.exit_code == EXIT_OK and found.stdout.startswith("[")


# ---------------------------------------------------------------- BM25 against a reference


def _reference(records: list[r.Record], query: str, only: str | None) -> list[tuple[str, float]]:
    """Textbook BM25 over every document, weighted by field and recency, ranked in full (ref, score)."""
    docs: list[tuple[bool, int, Counter[str], str, float]] = []
    for rec in records:
        body = rec.body
        if isinstance(body, r.ContextEpisodeRecord):
            counts = Counter(search_terms(episode_text(body)))
            docs.append((True, body.to_seq, counts, f"episode:{body.episode_id}", 1.0))
        else:
            counts = Counter(search_terms(evidence_text(body) or ""))
            weight = FIELD_WEIGHTS["request" if isinstance(body, r.Message) else "tool call"]
            docs.append((False, rec.seq, counts, f"ledger:{rec.seq}", weight))
    # The prior's scale: the newest record indexed (one with a term), by its own seq.
    newest = max([rec.seq for rec, doc in zip(records, docs, strict=True) if doc[2]] + [0])
    docs = [doc for doc in docs if doc[2]]
    if not docs:
        return []
    n, avg = len(docs), sum(doc[2].total() for doc in docs) / len(docs)
    ranked = []
    for is_episode, seq, counts, ref, weight in docs:
        if only is not None and is_episode != (only == "episodes"):
            continue
        score, hit = 0.0, False
        for term in sorted(set(search_terms(query))):
            if term in counts:
                hit = True
                df = sum(1 for doc in docs if term in doc[2])
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                tf = counts[term]
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * counts.total() / avg))
        if hit:
            score *= weight * (1 + RECENCY * seq / max(1, newest))
            ranked.append((-score, -seq, not is_episode, ref))
    return [(item[3], -item[0]) for item in sorted(ranked)]


_WORDS = ("billing", "deploy", "Straße", "strasse", "数据库迁移", "test_checkout", "café", "cafe", "the")


@st.composite
def _ledger(draw: st.DrawFn) -> list[r.Record]:
    records: list[r.Record] = []
    episodes = 0
    for seq in range(draw(st.integers(0, 14))):
        text = " ".join(draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4)))
        kind = draw(st.sampled_from(("message", "message", "intent", "episode")))
        if kind == "episode" and seq:
            episode = r.ContextEpisodeRecord(
                episode_id=episodes,
                boundary_reason="turn_cap",
                work_item_id=None,
                first_turn=1,
                last_turn=1,
                from_seq=0,
                to_seq=seq - 1,  # an episode ends at the evidence before it: a tie on seq
                objective=text,
                projection_version=1,
            )
            episodes += 1
            records.append(r.Record(body=episode, ts=seq, turn=None, seq=seq))
        elif kind == "intent":
            records.append(_intent(seq, {"command": text.replace(" ", "\n")}))
        else:
            records.append(_msg(seq, text))
    return records


@settings(max_examples=300, deadline=None)
@given(
    records=_ledger(),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
    limit=st.integers(1, 6),
    only=st.sampled_from((None, "episodes", "evidence")),
    cut=st.integers(0, 14),
)
def test_hits_are_textbook_bm25_ranked_in_full_and_an_index_grown_by_add_is_a_rebuilt_one(
    records: list[r.Record], query: str, limit: int, only: str | None, cut: int
) -> None:
    # The postings, the heap's cut at the limit and the tie rule (newer seq, then the
    # episode) against BM25 computed document by document; and an index searched, then
    # extended (as Agent.search extends it between calls), answers as one built at once.
    grown = MemorySearch(records[:cut])
    grown.search(query)
    for record in records[cut:]:
        grown.add(record)
    rebuilt = MemorySearch(records)
    hits = rebuilt.search(query, limit=limit, only=only)  # type: ignore[arg-type]
    expected = _reference(records, query, only)
    rank = {ref: at for at, (ref, _) in enumerate(expected)}
    # Each hit is the best of its near-duplicates, with its reference score; the hits keep
    # the reference order, and every document ranked above the last hit is one of them.
    assert all(h.refs[0] == h.ref and h.count == len(h.refs) for h in hits)
    assert [rank[h.ref] for h in hits] == sorted(rank[h.ref] for h in hits)
    for hit in hits:
        assert hit.score == pytest.approx(expected[rank[hit.ref]][1], abs=2e-6)
        assert [rank[ref] for ref in hit.refs] == sorted(rank[ref] for ref in hit.refs)
    shown = {ref for h in hits for ref in h.refs}
    if hits:
        assert {ref for ref, _ in expected[: rank[hits[-1].ref] + 1]} <= shown
    assert len(hits) == limit or shown == set(rank)
    assert grown.search(query, limit=limit, only=only) == hits  # type: ignore[arg-type]
    assert len(grown) == len(rebuilt)
