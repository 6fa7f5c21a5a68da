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

import blake3
import msgspec
import pytest

from holon import records as r
from holon.context import Budget, Prompt, RenderConfig, prompt_rendered, restore_bytes
from holon.errors import UsageError
from holon.projections import verify_derivations
from holon.replay import LedgerRefSource
from holon.runtime import RECALL_TOOL_NAMES, RECALL_TOOLS, Agent, AgentConfig
from holon.runtime.recall import get_text, recall_args
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
