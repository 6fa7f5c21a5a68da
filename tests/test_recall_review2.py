"""Second adversarial review of the recall tools, as a daemon and the model calling them hit them.

Each test pins a bug found in review (it fails on the code before its fix) or an edge
the review checked and found sound (said so in its docstring).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.runtime.agent as agent_module
from holon import records as r
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.runtime import RECALL_TOOLS, Agent, AgentConfig
from holon.runtime.recall import blob_text_of, get_text, is_recall, recall_args
from holon.search import MemoryHit, MemorySearch
from tests.runtime_support import Tick

POLICY = r.SystemPolicy(text="You are a test agent.", tools=RECALL_TOOLS)


def _open(path: Path, config: AgentConfig | None = None) -> Agent:
    return Agent.open(path, agent_id="t1", config=config or AgentConfig(), clock=Tick(), policy=POLICY)


def _fresh_hits(path: Path, query: str) -> list[MemoryHit]:
    """What a search index built now from the whole ledger answers (recall calls left out)."""
    with Ledger.open(path, readonly=True) as ledger:
        # Blob-stored outputs by their text, as the agent's index reads them (review 24).
        index = MemorySearch(
            (record for record in ledger.read(0) if not is_recall(record)), blob_text=blob_text_of(ledger)
        )
        return index.search(query, limit=25)


def _busy_turn(agent: Agent, i: int) -> None:
    """A turn with a message, a tool call whose output goes to the blob store, and recall calls."""
    with agent.turn(input=f"check the flamingo enclosure {i}") as turn:
        turn.context()
        turn.record_message(f"flamingo count {i} recorded at the loading dock")
        output = "".join(f"flamingo feeding log {i} line {n}\n" for n in range(400))
        turn.tool("bash", {"cmd": f"cat feeding-{i}.log"}).run(lambda: output)
        turn.recall("holon_search", {"query": "flamingo"})
        turn.recall("holon_get", {"ref": "ledger:1"})


# ---------------------------------------------------------------- search: no ledger read per call


def test_a_search_after_the_first_reads_nothing_back_from_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each search read the ledger from the index's last seq, which walks the active segment
    from its start (up to 8 MB, ~15 ms at 3 MB) on every holon_search call, even with nothing
    new. The agent now keeps the records it appends for the next search."""
    path = tmp_path / "l"
    with _open(path) as agent:
        _busy_turn(agent, 0)
        assert agent.search("flamingo")  # the first search builds the index from the ledger

        def no_read(*_args: Any, **_kwargs: Any) -> Any:
            raise AssertionError("a later search read the ledger")

        monkeypatch.setattr(agent.ledger, "read", no_read)
        for i in range(1, 4):
            _busy_turn(agent, i)  # appends, turn ends and their derived records, recall calls
            with agent.turn(input="and now?") as turn:
                seq = turn.record_message(f"zebra number {i} crossed")
                # Fresh in the same turn, right after the append.
                assert [h.ref for h in agent.search(f"zebra number {i}", limit=1)] == [f"ledger:{seq}"]
        live = agent.search("flamingo feeding log", limit=25)
        monkeypatch.undo()
    # The same hits as an index built from the whole ledger, and after a reopen.
    assert live == _fresh_hits(path, "flamingo feeding log")
    with _open(path) as agent:
        assert agent.search("flamingo feeding log", limit=25) == live


def test_more_records_than_the_agent_keeps_are_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sound: past _SEARCH_PENDING records since the last search, the agent drops them and the
    next search reads them back from the ledger, finding the same hits."""
    monkeypatch.setattr(agent_module, "_SEARCH_PENDING", 3)
    path = tmp_path / "l"
    with _open(path) as agent:
        agent.search("warm up")
        for i in range(3):
            _busy_turn(agent, i)
        assert agent._unsearched is None  # dropped: more than 3 records were appended
        live = agent.search("flamingo count", limit=25)
        assert agent._unsearched == []
        fresh = MemorySearch(
            (record for record in agent.ledger.read(0) if not is_recall(record)),
            blob_text=blob_text_of(agent.ledger),
        )
        assert live == fresh.search("flamingo count", limit=25)
        _busy_turn(agent, 3)
        (hit,) = agent.search("flamingo count 3", limit=1)
        assert hit.snippet == "flamingo count 3 recorded at the loading dock"
        live = agent.search("flamingo count", limit=25)
    assert live == _fresh_hits(path, "flamingo count")


# ---------------------------------------------------------------- holon_get: refs as a model writes them


@pytest.mark.parametrize(
    "form",
    [
        "{ref}).",  # "(… — restore with ref ledger:42)" and a full stop
        "{ref}]",  # "[cleared: … — restore with ref ledger:42]"
        "`{ref}`",  # Markdown
        "'{ref}'",
        "  {ref}\n",
        "holon get {ref}",  # the history's "restore any ref with `holon get <ref>`"
        "restore with ref {ref}",
        "{ref}, {ref}",  # the same ref twice is still one ref
    ],
)
def test_a_ref_copied_with_what_surrounds_it_in_the_prompt_restores(tmp_path: Path, form: str) -> None:
    """A ref copied with the bracket, backticks or full stop around it was a malformed-ref
    error; the single ref in the text is now restored, and its notes name it bare."""
    with _open(tmp_path / "l", AgentConfig(recall_page_chars=500)) as agent:
        with agent.turn(input="go") as turn:
            seq = turn.record_message("the staging database is read-only until Friday")
            output = "".join(f"vacuum log line {n}\n" for n in range(2_000))
            result = turn.tool("bash", {"cmd": "vacuum"}).run(lambda: output)
            assert result.blob is not None
            blob = f"blob:{result.blob.hash.upper()}"
        with agent.turn(input="recall") as turn:
            call = turn.recall("holon_get", {"ref": form.format(ref=f"ledger:{seq}")})
            assert call.result is not None and call.result.status == "ok", call.output
            assert call.output == "the staging database is read-only until Friday"
            call = turn.recall("holon_get", {"ref": form.format(ref=blob), "offset": 480})
            assert call.result is not None and call.result.status == "ok", call.output
            assert call.output.startswith(output[480:500])
            assert f"[blob:{result.blob.hash}, characters 480-" in call.output


def test_several_refs_in_one_call_are_named_so_the_model_calls_once_for_each(tmp_path: Path) -> None:
    """A list of refs ("restore with ref ledger:3, ledger:4") is answered with each ref to call."""
    with _open(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        call = turn.recall("holon_get", {"ref": "ledger:3, ledger:4"})
        assert call.result is not None and call.result.status == "error"
        assert call.output == (
            "'ledger:3, ledger:4' names 2 refs; holon_get restores one ref per call: "
            "call it once with each of ledger:3, ledger:4"
        )
        # Text with no ref at all still says what a ref looks like.
        call = turn.recall("holon_get", {"ref": "the last output"})
        assert "malformed ref 'the last output': expected ledger:<seq>" in call.output


def test_an_empty_text_is_said_to_be_empty(tmp_path: Path) -> None:
    """A tool result with no output restored as an empty tool result, which reads as a tool
    that did not answer (and a model calls it again)."""
    with _open(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.tool("bash", {"cmd": "true"}).run(lambda: "")
        seq = agent.seq
        call = turn.recall("holon_get", {"ref": f"ledger:{seq}"})
        assert call.result is not None and call.result.status == "ok"
        assert call.output == f"[ledger:{seq} is empty: the text behind it has no characters]"
        assert agent.get_bytes(f"ledger:{seq}") == b""  # the bytes are still the original's
        past = turn.recall("holon_get", {"ref": f"ledger:{seq}", "offset": 1})
        assert past.result is not None and past.result.status == "error"
        assert "offset 1 is past the end" in past.output


# ---------------------------------------------------------------- the model's mistakes, in its terms


@pytest.mark.parametrize(
    ("name", "args", "says"),
    [
        ("holon_get", {"ref": "ledger:1", "offset": float("nan")}, "`offset` must be an integer, got nan"),
        ("holon_get", {"ref": "ledger:1", "offset": float("inf")}, "`offset` must be an integer, got inf"),
        ("holon_search", {"query": "x", "limit": float("nan")}, "`limit` must be an integer, got nan"),
        ("holon_get", {1: "x", "ref": "ledger:1"}, "takes ref, offset; it got unknown argument(s) 1"),
        ("holon_search", {"query": "a", None: 2}, "takes query, limit; it got unknown argument(s) None"),
    ],
    ids=["nan-offset", "inf-offset", "nan-limit", "int-key", "none-key"],
)
def test_unrecordable_arguments_are_explained_in_the_tools_terms(
    tmp_path: Path, name: str, args: dict[Any, Any], says: str
) -> None:
    """NaN or an infinity (what json.loads makes of those bare words) and a key that is not a
    string were answered with the ledger's words to the daemon ("record it as a string or
    null", "Expected `str`, got `int` - at `key` in `$.args`"); the model is now told what the
    tool takes, and the call is recorded like any other."""
    with _open(tmp_path / "l") as agent:
        with agent.turn(input="go") as turn:
            call = turn.recall(name, args)
            assert call.result is not None and call.result.status == "error"
            assert call.output == f"{name}{':' if says.startswith('`') else ''} {says}"
        bodies = [record.body for record in agent.ledger.read(0)]
        (intent,) = [b for b in bodies if isinstance(b, r.ToolIntent) and b.tool == name]
        assert list(intent.args) == ["unrecordable_arguments"]
        results = [b for b in bodies if isinstance(b, r.ToolResult) and b.tool == name]
        assert [(b.status, b.output) for b in results] == [("error", call.output)]
        assert agent.ledger.verify().ok


def test_recall_args_names_keys_that_are_not_strings() -> None:
    """recall_args raised a TypeError (joining non-string keys) instead of its UsageError."""
    with pytest.raises(UsageError, match=r"unknown argument\(s\) 1, page"):
        recall_args("holon_get", {"ref": "ledger:1", 1: 2, "page": 3})


# ---------------------------------------------------------------- paging: sound


class _Blob:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def record(self, seq: int) -> r.Record:
        raise LookupError(seq)

    def blob(self, blob_hash: str) -> bytes:
        return self.data

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
        raise LookupError(episode_id)


# Multi-byte characters, line breaks (CRLF too), a combining mark and a ZWJ sequence.
_PIECES = st.sampled_from(
    ["a", "é", "世", "😀", "\n", "\r\n", " ", "\u0301", "x" * 40, "\U0001f468\u200d\U0001f469"]
)


@settings(max_examples=150, deadline=None)
@given(text=st.lists(_PIECES, max_size=300).map("".join), page=st.integers(1, 600))
def test_pages_cover_the_text_exactly_and_each_fits_the_page(text: str, page: int) -> None:
    """Sound: character offsets (never inside a UTF-8 sequence), no character lost or repeated
    at a page boundary, each page's text within ``page_chars``, the note naming the next offset."""
    data = text.encode()
    ref = f"blob:{blake3.blake3(data).hexdigest()}"
    source = _Blob(data)
    if not text:
        empty = f"[{ref} is empty: the text behind it has no characters]"
        assert get_text(ref, source, page_chars=page) == empty
        return
    offset, pages = 0, []
    while True:
        out = get_text(ref, source, offset=offset, page_chars=page)
        if offset == 0 and len(text) <= page:
            assert out == text
            pages.append(out)
            break
        body, note = out.rsplit("\n[", 1)
        start, _, rest = note.removeprefix(f"{ref}, characters ").partition("-")
        end = int(rest.split(" ", 1)[0].replace(",", ""))
        assert int(start.replace(",", "")) == offset
        chunk = text[offset:end]
        assert 1 <= len(chunk) <= page
        assert body in (chunk, chunk.removesuffix("\n"))
        pages.append(chunk)
        if end == len(text):
            assert note.endswith(": the end]")
            break
        assert note.endswith(f"call holon_get with offset {end} for the next part]")
        offset = end
    assert "".join(pages) == text


def test_a_10_mb_output_pages_through_the_agent(tmp_path: Path) -> None:
    """Sound: a 10 MB blob-stored output comes back whole through holon_get, page by page."""
    output = "".join(f"row {n:07d} ünïcode 世界 {'x' * (n % 50)}\n" for n in range(190_000))
    assert len(output.encode()) > 10_000_000
    config = AgentConfig(recall_page_chars=2_000_000)
    with _open(tmp_path / "l", config) as agent, agent.turn(input="go") as turn:
        turn.tool("bash", {"cmd": "dump"}).run(lambda: output)
        ref, offset, pages = f"ledger:{agent.seq}", 0, []
        while True:
            call = turn.recall("holon_get", {"ref": ref, "offset": offset})
            assert call.result is not None and call.result.status == "ok"
            body, note = call.output.rsplit("\n", 1)
            end = int(note.split("-", 1)[1].split(" ", 1)[0].replace(",", ""))
            assert body + "\n" == output[offset:end] and end - offset <= config.recall_page_chars
            pages.append(output[offset:end])
            if end == len(output):
                break
            offset = end
        assert "".join(pages) == output and len(pages) >= 5
        recorded = [b for b in (rec.body for rec in agent.ledger.read(0)) if isinstance(b, r.ToolResult)]
        assert recorded[-1].tool == "holon_get"
