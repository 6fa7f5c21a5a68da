"""Recall tools: the model restores what its prompt left out (holon_get) and finds it (holon_search).

The prompt names refs in its placeholders; these tests take the refs from real prompts,
call the tools the way a daemon routes the model's tool calls, and check that the model
gets the original text back, page by page, that mistakes come back as error results it
can act on, and that every call is in the ledger like any other tool call.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import blake3
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.runtime.core as core_module
from holon import records as r
from holon.context import Budget, Prompt, RenderConfig, prompt_rendered, restore_bytes
from holon.errors import InvalidRef, LedgerCorrupt, RefNotFound, UsageError
from holon.ledger import Ledger
from holon.projections import verify_derivations
from holon.replay import LedgerRefSource
from holon.runtime import RECALL_TOOL_NAMES, RECALL_TOOLS, Agent, AgentConfig
from holon.runtime.recall import NOTE_CHARS, RestoredText, blob_text_of, get_text, is_recall, recall_args
from holon.search import MemoryHit, MemorySearch
from tests.runtime_support import Tick, cold_replay, fold_ledger, same_record

POLICY = r.SystemPolicy(text="You are a test agent.", tools=RECALL_TOOLS)
# A small window, so a few large outputs are cleared from the history quickly.
CONFIG = AgentConfig(budget=Budget(context_window=6_500, output_reserve=1_000), recall_page_chars=1_000)
_REF = re.compile(r"restore with ref (ledger:\d+|blob:[0-9a-f]{64})")


def _history_refs(prompt: Prompt) -> list[str]:
    """The refs the prompt's history placeholders name (the tool description shows an example one)."""
    return _REF.findall("\n".join(s.text for s in prompt.sections if s.name == "history"))


def _open(path: Path, config: AgentConfig = CONFIG) -> Agent:
    return Agent.open(path, agent_id="t1", config=config, clock=Tick(), policy=POLICY)


def _log(n: int) -> str:
    """A distinctive, multi-page tool output (each line names its number)."""
    return "".join(f"migration log line {i:05d}: copied rows batch {i}\n" for i in range(n))


def _turns_with_large_outputs(agent: Agent, count: int) -> list[str]:
    outputs = []
    for i in range(count):
        with agent.turn(input=f"run migration batch {i}") as turn:
            turn.context()
            # Over the result cap (2,000 tokens): in a window the history does not fit whole,
            # each is shown as its preview and the ref that restores it.
            output = _log(240 + i)
            turn.tool("bash", {"cmd": f"migrate --batch {i}"}).run(lambda output=output: output)  # type: ignore[misc]
            outputs.append(output)
    return outputs


def test_a_ref_from_the_prompt_restores_the_whole_output_page_by_page(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        outputs = _turns_with_large_outputs(agent, 8)
        with agent.turn(input="what did batch 0 copy?") as turn:
            prompt = turn.context()
            refs = _history_refs(prompt)
            assert refs, "the small window should have cleared or moved some output"
            ref = refs[0]
            original = restore_bytes(ref, LedgerRefSource(agent.ledger)).decode()
            assert original in outputs and len(original) > CONFIG.recall_page_chars

            pages, offset, size = [], 0, CONFIG.recall_page_chars
            while True:
                call = turn.recall("holon_get", {"ref": ref, "offset": offset})
                # The page reaches the model: the next call's messages hold it (a round after
                # the prompt, or, once the rounds outgrew it, the turn's work in a new prompt).
                shown = "\n".join(str(m.get("content")) for m in turn.messages())
                assert call.output in shown
                assert call.result is not None and call.result.status == "ok"
                page, note = call.output.rsplit("\n", 1)
                page += "\n"
                end = offset + len(page)
                assert page == original[offset:end]
                # Pages end at a line break in their second half; only the last is short.
                assert size // 2 < len(page) <= size or end == len(original)
                assert note.startswith(f"[{ref}, characters {offset:,}-{end:,} of {len(original):,}")
                pages.append(page)
                if end == len(original):
                    assert note.endswith(": the end]")
                    break
                assert note.endswith(f"; call holon_get with offset {end} for the next part]")
                offset = end
            assert "".join(pages) == original
            assert len(pages) > 1


def test_a_text_that_fits_comes_back_byte_identical(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        with agent.turn(input="note it") as turn:
            seq = turn.record_message("the staging database is read-only until Friday")
        with agent.turn(input="recall") as turn:
            call = turn.recall("holon_get", {"ref": f"ledger:{seq}"})
            assert call.output == "the staging database is read-only until Friday"
            assert call.result is not None and call.result.status == "ok"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({"ref": "ledger:abc"}, "malformed ref 'ledger:abc'"),
        ({"ref": "ledger:999999"}, "ledger:999999 does not exist: the newest record is ledger:"),
        ({"ref": "episode:7"}, "episode:7 does not exist (no episode is archived yet)"),
        ({"ref": "blob:" + "0" * 64}, "0000"),
        ({"ref": "ledger:1", "offset": -5}, "offset -5 is negative"),
        ({"ref": "ledger:1", "offset": 10_000_000}, "is past the end of ledger:1"),
        ({"ref": 12}, "`ref` must be a string, got 12"),
        ({"ref": "ledger:1", "offset": True}, "`offset` must be an integer, got True"),
        ({"ref": "ledger:1", "page": 2}, "unknown argument(s) page"),
        ({}, "`ref` must be a string, got None"),
    ],
)
def test_a_bad_call_is_an_error_result_that_says_what_to_do(
    tmp_path: Path, args: dict[str, object], says: str
) -> None:
    with _open(tmp_path / "l") as agent:
        with agent.turn(input="go") as turn:
            turn.record_message("hello")
            call = turn.recall("holon_get", dict(args))
            assert call.result is not None and call.result.status == "error"
            assert says in call.output
        # Recorded like any tool call: the intent as the model sent it, then the error.
        bodies = [rec.body for rec in agent.ledger.read(0)]
        intent = next(b for b in bodies if isinstance(b, r.ToolIntent) and b.tool == "holon_get")
        assert intent.args == msgspec.json.decode(msgspec.json.encode(args))
        assert any(isinstance(b, r.ToolResult) and b.status == "error" and says in b.output for b in bodies)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({"ref": "ledger:1", "offset": 10**30}, "record does not encode"),
        ({"query": "caf\udce9"}, "text is not valid UTF-8"),
        (["ledger:1"], "arguments must be a dict"),
    ],
    ids=["int-over-64-bits", "lone-surrogate", "not-an-object"],
)
def test_arguments_that_cannot_be_stored_are_an_error_result_too(
    tmp_path: Path, args: object, says: str
) -> None:
    name = "holon_search" if isinstance(args, dict) and "query" in args else "holon_get"
    with _open(tmp_path / "l") as agent:
        with agent.turn(input="go") as turn:
            call = turn.recall(name, args)  # type: ignore[arg-type]
            assert call.result is not None and call.result.status == "error"
            assert says in call.output
        # The intent holds the arguments as text, and the ledger verifies.
        intents = [rec.body for rec in agent.ledger.read(0) if isinstance(rec.body, r.ToolIntent)]
        (intent,) = [body for body in intents if body.tool == name]
        assert list(intent.args) == ["unrecordable_arguments"]
        assert agent.ledger.verify().ok


def test_a_name_that_is_not_a_recall_tool_is_the_daemons_mistake(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        before = agent.seq
        with pytest.raises(UsageError, match="'bash' is not a recall tool"):
            turn.recall("bash", {"cmd": "ls"})
        assert agent.seq == before  # nothing recorded


def test_search_finds_evidence_and_each_hit_restores(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        _turns_with_large_outputs(agent, 3)
        with agent.turn(input="decide") as turn:
            turn.record_decision("D1", "keep the legacy orders table until the audit ends")
        with agent.turn(input="what about the orders table?") as turn:
            call = turn.recall("holon_search", {"query": "legacy orders table", "limit": 3})
            assert call.result is not None and call.result.status == "ok"
            lines = call.output.splitlines()
            assert re.fullmatch(r"[123] hits? for 'legacy orders table', best first:", lines[0])
            ref = lines[1].split(" — ")[0].split(". ", 1)[1]
            restored = turn.recall("holon_get", {"ref": ref}).output
            assert "keep the legacy orders table until the audit ends" in restored
            # The search's own call is not indexed: searching again does not find the query.
            again = turn.recall("holon_search", {"query": "legacy orders table", "limit": 25}).output
            assert "holon_search" not in again and "holon_get" not in again


def test_search_sees_records_appended_after_the_first_search(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        with agent.turn(input="first") as turn:
            turn.record_message("nothing interesting")
        assert agent.search("flamingo") == []
        with agent.turn(input="second") as turn:
            seq = turn.record_message("a flamingo stood on the loading dock")
        hits = agent.search("flamingo")
        assert [h.ref for h in hits] == [f"ledger:{seq}"]
        with agent.turn(input="third") as turn:
            call = turn.recall("holon_search", {"query": "zebra"})
            assert call.output == "nothing this agent recorded matches 'zebra'"


def test_recall_calls_replay_to_the_same_memory_and_prompts(tmp_path: Path) -> None:
    with _open(tmp_path / "l") as agent:
        _turns_with_large_outputs(agent, 4)
        with agent.turn(input="look back") as turn:
            prompt = turn.context()
            for ref in _history_refs(prompt)[:2]:
                turn.recall("holon_get", {"ref": ref})
            turn.recall("holon_search", {"query": "batch 2"})
        with agent.turn(input="go on") as turn:
            after = turn.context()  # its history holds the recall calls
        live = agent.projection
    assert "holon_get" in after.text and "holon_search" in after.text
    state, records = fold_ledger(tmp_path / "l", CONFIG)
    assert msgspec.msgpack.encode(state) == msgspec.msgpack.encode(live)
    assert verify_derivations(records, config=CONFIG.projection).ok
    replayed = list(cold_replay(tmp_path / "l", CONFIG))
    assert len(replayed) == 6
    for record, prompt, _state in replayed:
        assert isinstance(record.body, r.PromptRendered)
        assert same_record(prompt_rendered(prompt), record.body), f"seq {record.seq}: prompt differs"


def test_get_text_describes_binary_data_instead_of_dumping_it() -> None:
    class Source:
        def record(self, seq: int) -> r.Record:
            raise LookupError(seq)

        def blob(self, blob_hash: str) -> bytes:
            return b"\x89PNG\r\n\x1a\n\xff\xfe"

        def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
            raise LookupError(episode_id)

    data = b"\x89PNG\r\n\x1a\n\xff\xfe"
    ref = "blob:" + blake3.blake3(data).hexdigest()
    assert get_text(ref, Source()) == f"[{ref} is 10 bytes of binary data, not text; it is not shown]"


def test_recall_arguments_are_checked_and_defaulted() -> None:
    assert recall_args("holon_get", {"ref": "ledger:3"}) == {"ref": "ledger:3", "offset": 0}
    assert recall_args("holon_search", {"query": "x"}) == {"query": "x", "limit": 8}
    with pytest.raises(UsageError, match=r"`limit` must be 1\.\.25, got 0"):
        recall_args("holon_search", {"query": "x", "limit": 0})
    assert {"holon_get", "holon_search"} == RECALL_TOOL_NAMES
    with pytest.raises(ValueError, match="recall_page_chars must be >= 1"):
        AgentConfig(recall_page_chars=0)


# --------------------------------------------------------------------------- every evicted output restores

_OUTPUTS = {
    "blob": "line of a long build log\n" * 2_000,
    "control characters": "a\x00b\x1b[31mred\x1b[0m\r\nc\rd\x7f\x0c\u2028\u2029\ufeff end" * 40,
    "crlf over the cap": "row,1,2\r\n" * 400,
    "duplicate blob 1": "dup " * 3_000,
    "duplicate blob 2": "dup " * 3_000,
    "duplicate inline 1": "z" * 2_000,
    "duplicate inline 2": "z" * 2_000,
    "astral blob": "\U0001f600\U0001d11e" * 1_500,
    "trailing blank lines": "x   \n\n\n   ",
}
_PAGE_NOTE = re.compile(r"\[\S+, characters ([\d,]+)-([\d,]+) of [\d,]+(?:: the end|; call holon_get .*)\]$")


def test_every_evicted_tool_output_restores_exactly_through_the_agent(tmp_path: Path) -> None:
    # Outputs over the blob threshold, over the result cap, cleared for age, with control
    # characters, and the same content evicted twice: every ref the prompt leaves behind
    # restores the original bytes (get_bytes), and holon_get's pages rebuild the same text.
    clock = itertools.count(1_000)
    config = AgentConfig(
        budget=Budget(context_window=6_000, output_reserve=500),
        render=RenderConfig(tool_result_max_tokens=300, keep_tool_results=1, clear_at_least=10),
        blob_threshold=4_096,
        recall_page_chars=1_000,
    )
    agent = Agent.open(tmp_path / "agent", agent_id="a", config=config, clock=lambda: next(clock))
    try:
        for name, output in _OUTPUTS.items():
            with agent.turn(input=f"run {name}") as turn:
                turn.context()
                with turn.tool("bash", {"command": name}) as call:
                    call.finish(output)
        with agent.turn(input="and now?") as turn:
            prompt = turn.context()
        evicted = [o.ref for o in prompt.plan.omitted if "tool result" in o.reason]
        assert {ref.split(":")[0] for ref in evicted} == {"ledger", "blob"}
        originals = {output.encode() for output in _OUTPUTS.values()}
        for ref in evicted:
            data = agent.get_bytes(ref)
            assert data in originals, ref
            pages, offset = [], 0
            while True:
                text = agent.get_text(ref, offset=offset)
                note = _PAGE_NOTE.search(text)
                if note is None:
                    pages.append(text)
                    break
                start, end = (int(n.replace(",", "")) for n in note.groups())
                pages.append(text[: end - start])
                if end >= len(data.decode()):
                    break
                offset = end
            assert "".join(pages).encode() == data, ref
    finally:
        agent.close()


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


# --------------------------------------------------------------------------- what a search reads back
# A search after the first reads nothing back from the ledger; refs copied with what
# surrounds them, lists of refs, empty texts and arguments no record can hold are
# answered in the tools' terms; pages cover a text exactly.


def _open_with_defaults(path: Path, config: AgentConfig | None = None) -> Agent:
    return Agent.open(path, agent_id="t1", config=config or AgentConfig(), clock=Tick(), policy=POLICY)


def _fresh_hits(path: Path, query: str) -> list[MemoryHit]:
    """What a search index built now from the whole ledger answers (recall calls left out)."""
    with Ledger.open(path, readonly=True) as ledger:
        # Blob-stored outputs by their text, as the agent's index reads them.
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
    with _open_with_defaults(path) as agent:
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
    with _open_with_defaults(path) as agent:
        assert agent.search("flamingo feeding log", limit=25) == live


def test_more_records_than_the_agent_keeps_are_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sound: past _SEARCH_PENDING records since the last search, the agent drops them and the
    next search reads them back from the ledger, finding the same hits."""
    monkeypatch.setattr(core_module, "SEARCH_PENDING", 3)
    path = tmp_path / "l"
    with _open_with_defaults(path) as agent:
        agent.search("warm up")
        for i in range(3):
            _busy_turn(agent, i)
        assert agent._core.unsearched is None  # dropped: more than 3 records were appended
        live = agent.search("flamingo count", limit=25)
        assert agent._core.unsearched == []
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
    with _open_with_defaults(tmp_path / "l", AgentConfig(recall_page_chars=500)) as agent:
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
    with _open_with_defaults(tmp_path / "l") as agent, agent.turn(input="go") as turn:
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
    with _open_with_defaults(tmp_path / "l") as agent, agent.turn(input="go") as turn:
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
    with _open_with_defaults(tmp_path / "l") as agent:
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
    with _open_with_defaults(tmp_path / "l", config) as agent, agent.turn(input="go") as turn:
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


# --------------------------------------------------------------------------- a long-lived agent's recall
# A blob paged through is restored once and only while it verifies; a page is
# page_chars of text plus a bounded note; ref schemes in any case; a missing ref is
# explained without the ledger's path.


def _end(output: str) -> int:
    """The end offset a paged holon_get result's note names."""
    return int(output.rsplit("\n", 1)[1].split("-", 1)[1].split(" ", 1)[0].replace(",", ""))


# ---------------------------------------------------------------- holon_get: paging a large blob


def test_paging_through_a_blob_restores_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each page read, hashed and decoded the whole blob again (~31 ms a page at 13.7 MB, ~53 s
    for its 1,700 pages); the agent now keeps the text it restored for the next page of the same
    ref, and drops it when the turn ends."""
    output = "".join(f"audit row {n:06d} ünï 世界\n" for n in range(20_000))
    reads: list[str] = []
    with _open_with_defaults(tmp_path / "l", AgentConfig(recall_page_chars=50_000)) as agent:
        real = agent.ledger.get_blob

        def counted(blob_hash: str) -> bytes:
            reads.append(blob_hash)
            return real(blob_hash)

        monkeypatch.setattr(agent.ledger, "get_blob", counted)
        with agent.turn(input="go") as turn:
            result = turn.tool("bash", {"cmd": "audit"}).run(lambda: output)
            assert result.blob is not None
            reads.clear()  # (finishing the call read its output back)
            ref, offset, pages = f"ledger:{agent.seq}", 0, []
            while True:
                call = turn.recall("holon_get", {"ref": ref, "offset": offset})
                assert call.result is not None and call.result.status == "ok", call.output
                end = _end(call.output)
                pages.append(output[offset:end])
                assert call.output.startswith(output[offset:end].removesuffix("\n"))
                if end == len(output):
                    break
                offset = end
            assert "".join(pages) == output and len(pages) >= 8
            # Once, not once per page (each page's own result, stored as a blob, is read back
            # by call.output: those are other hashes).
            assert reads.count(result.blob.hash) == 1
            # The same blob by its own ref is another ref: restored (and verified) again.
            call = turn.recall("holon_get", {"ref": f"blob:{result.blob.hash}", "offset": 50_000})
            assert call.output.startswith(output[50_000:50_100])
            assert reads.count(result.blob.hash) == 2
        with agent.turn(input="again") as turn:
            # The turn ended: the text is not kept past it.
            call = turn.recall("holon_get", {"ref": f"blob:{result.blob.hash}", "offset": 50_000})
            assert call.output.startswith(output[50_000:50_100])
            assert reads.count(result.blob.hash) == 3


def test_a_damaged_blob_is_never_served_from_what_was_kept(tmp_path: Path) -> None:
    """Sound: only a text that passed its hash check is kept, so a blob damaged on disk is an
    error on the first page and stays one (nothing unverified is ever kept or returned)."""
    output = "".join(f"line {n}\n" for n in range(30_000))
    config = AgentConfig(recall_page_chars=1_000)
    with _open_with_defaults(tmp_path / "l", config) as agent, agent.turn(input="go") as turn:
        result = turn.tool("bash", {"cmd": "x"}).run(lambda: output)
        assert result.blob is not None
        (blob_file,) = [p for p in (tmp_path / "l").rglob(f"{result.blob.hash}*") if p.is_file()]
        blob_file.chmod(0o644)
        blob_file.write_bytes(blob_file.read_bytes()[:-10] + b"0123456789")
        ref = f"blob:{result.blob.hash}"
        for offset in (0, 1_000):
            with pytest.raises(LedgerCorrupt):
                turn.recall("holon_get", {"ref": ref, "offset": offset})


def test_restored_text_keeps_one_bounded_text() -> None:
    """Sound: one text, by ref; one larger than the bound is not kept (paged the slow way)."""
    kept = RestoredText(max_bytes=1_000)
    kept.keep("ledger:1", "a" * 100)
    assert kept.get("ledger:1") == "a" * 100 and kept.get("ledger:2") is None
    kept.keep("ledger:2", "b" * 100)
    assert kept.get("ledger:1") is None and kept.get("ledger:2") == "b" * 100
    kept.keep("ledger:3", "c" * 5_000)
    assert kept.get("ledger:3") is None and kept.get("ledger:2") is None


# ---------------------------------------------------------------- holon_get: the note beyond the page


def test_a_page_is_page_chars_of_text_plus_a_note_within_note_chars(tmp_path: Path) -> None:
    """AgentConfig called recall_page_chars "the most characters one holon_get call returns",
    while a paged result is that much text plus ~90-150 characters of note. The docs now say
    what the code does (the page is page_chars of text, the note is extra and bounded by
    NOTE_CHARS), since shrinking the text to fit the note would make page boundaries depend on
    the note and leave nothing to page with when page_chars is below it."""
    assert "NOTE_CHARS" in (AgentConfig.__doc__ or "")
    output = "".join(f"{n:09d}" for n in range(600_000))  # one long line, no break to cut at
    for page_chars in (1, 7, 8_000):
        config = AgentConfig(recall_page_chars=page_chars)
        with (
            _open_with_defaults(tmp_path / f"l{page_chars}", config) as agent,
            agent.turn(input="go") as turn,
        ):
            result = turn.tool("bash", {"cmd": "x"}).run(lambda: output)
            assert result.blob is not None
            ref = f"blob:{result.blob.hash}"
            for offset in (0, 5_399_990, len(output) - page_chars):
                call = turn.recall("holon_get", {"ref": ref, "offset": offset})
                text, note = call.output.rsplit("\n", 1)
                assert text == output[offset : offset + page_chars]
                assert len(call.output) - page_chars <= NOTE_CHARS
                assert len(note) + 1 <= NOTE_CHARS


# ---------------------------------------------------------------- holon_get: refs in any case


@pytest.mark.parametrize("scheme", ["LEDGER", "Ledger", "BLOB", "Blob", "EPISODE"])
def test_a_ref_scheme_in_upper_case_restores(tmp_path: Path, scheme: str) -> None:
    """`LEDGER:3` was a malformed ref while upper-case hex was accepted; the scheme is now read
    in any case too (three fixed words before a colon: no other ref can be meant)."""
    with _open_with_defaults(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        seq = turn.record_message("the staging database is read-only until Friday")
        result = turn.tool("bash", {"cmd": "x"}).run(lambda: "y" * 100_000)
        assert result.blob is not None
        value = {"LEDGER": seq, "BLOB": result.blob.hash.upper()}.get(scheme.upper(), 0)
        call = turn.recall("holon_get", {"ref": f"restore with ref `{scheme}:{value}`."})
        if scheme == "EPISODE":
            # Parsed as a ref: the model is told no episode is archived, not that it is malformed.
            assert call.output == "episode:0 does not exist (no episode is archived yet)"
            return
        assert call.result is not None and call.result.status == "ok", call.output
        if scheme.upper() == "LEDGER":
            assert call.output == "the staging database is read-only until Friday"
        else:
            assert call.output.startswith("y" * 1_000)
            assert f"[blob:{result.blob.hash}, characters 0-" in call.output


def test_a_malformed_upper_case_ref_is_quoted_as_written(tmp_path: Path) -> None:
    """Sound: the malformed-ref message quotes what the model wrote, not the lower-cased form."""
    with _open_with_defaults(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        call = turn.recall("holon_get", {"ref": "LEDGER:x1"})
        assert call.output.startswith("malformed ref 'LEDGER:x1': expected ledger:<seq>")


# ---------------------------------------------------------------- holon_get: what does not exist


def test_a_missing_ref_is_explained_without_the_ledger_path(tmp_path: Path) -> None:
    """A seq past the end or a blob not in the store answered the model with the ledger's
    directory and advice for the daemon ("import the blob files that came with an exported
    ledger"); the model is now told the ref does not exist and, for a seq, the newest one."""
    path = tmp_path / "ledger-dir"
    with _open_with_defaults(path) as agent, agent.turn(input="go") as turn:
        past = turn.recall("holon_get", {"ref": "ledger:999"})
        newest = agent.seq - 1  # the newest record when it was answered: its own intent
        blob = turn.recall("holon_get", {"ref": "blob:" + "ab" * 32})
        for call in (past, blob):
            assert call.result is not None and call.result.status == "error"
            assert str(path) not in call.output and "blobs" not in call.output
            assert "import" not in call.output
        assert past.output == (
            f"ledger:999 does not exist: the newest record is ledger:{newest}; "
            "check the seq against the note that named it"
        )
        assert blob.output == (
            f"blob:{'ab' * 32} does not exist: this agent recorded no blob with that hash; "
            "check the hash against the note that named it"
        )


def test_the_daemons_get_bytes_gets_the_same_wording(tmp_path: Path) -> None:
    """Agent.get_bytes reads through the same source: a missing ref is still RefNotFound, now
    worded as the model gets it (the daemon knows its ledger's path)."""
    with _open_with_defaults(tmp_path / "l") as agent, pytest.raises(RefNotFound, match="does not exist"):
        agent.get_bytes("ledger:999")


# --------------------------------------------------------------------------- a cleared output, whole


def test_get_bytes_restores_a_cleared_output_whole(tmp_path: Path) -> None:
    # The guide: `agent.get_text(ref)` returns a page, and the whole original bytes are
    # one call away, with no RefSource to build by hand.
    output = "".join(f"row {i}: copied\n" for i in range(2_000))  # over the blob threshold
    with Agent.open(tmp_path / "a", agent_id="a") as agent:
        with agent.turn(input="copy") as turn:
            result = turn.tool("copy", {}).run(lambda: output)
        assert result.blob is not None and result.output == ""
        seq = next(rec.seq for rec in agent.ledger.read(0) if isinstance(rec.body, r.ToolResult))
        assert agent.get_bytes(f"ledger:{seq}") == output.encode()
        assert agent.get_bytes(f"blob:{result.blob.hash}") == output.encode()
        assert agent.get_text(f"ledger:{seq}") != output, "get_text pages; get_bytes does not"
        with pytest.raises(RefNotFound):
            agent.get_bytes(f"ledger:{agent.seq + 10}")
        with pytest.raises(InvalidRef):
            agent.get_bytes("nonsense")


def test_holon_get_shows_a_log_with_a_few_bytes_that_are_not_utf8_as_text(tmp_path: Path) -> None:
    # The same log: memory search finds "zorgblat" in it, but the model's holon_get said
    # "bytes of binary data, not text; it is not shown", so the hit could not be read.
    log = ("compiling caf\xe9.c\n" * 400 + "error: zorgblat undefined\n").encode("latin-1")
    data = {"log": log, "random": bytes(range(128, 256)) * 4, "nul": b"text\0with a NUL \xff"}
    with Ledger.create(tmp_path / "ledger", agent_id="builder") as ledger:
        refs = {name: "blob:" + ledger.put_blob(blob, preview="-").hash for name, blob in data.items()}
    with (
        Agent.open(tmp_path / "ledger", clock=Tick(start=1_700_000_000_000)) as agent,
        agent.turn(input="build it", trigger="user") as turn,
    ):
        got = {name: turn.recall("holon_get", {"ref": ref}).output for name, ref in refs.items()}
    text = got["log"]
    assert text.startswith("compiling caf\ufffd.c\ncompiling caf\ufffd.c\n")
    assert "error: zorgblat undefined\n" in text
    assert text.endswith(f"[{refs['log']} is not all UTF-8: 400 byte sequences show as U+FFFD]")
    # Mostly undecodable bytes, or any NUL, stay binary data.
    for name in ("random", "nul"):
        size = len(data[name])
        assert got[name] == f"[{refs[name]} is {size:,} bytes of binary data, not text; it is not shown]"
