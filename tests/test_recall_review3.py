"""Third review of the recall tools and the agent's search index, as a long-lived agent hits them.

Each test pins a bug found in review (it fails on the code before its fix) or an edge
the review checked and found sound (said so in its docstring).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holon import records as r
from holon.errors import LedgerCorrupt, RefNotFound
from holon.runtime import RECALL_TOOLS, Agent, AgentConfig
from holon.runtime.recall import NOTE_CHARS, RestoredText
from tests.runtime_support import Tick

POLICY = r.SystemPolicy(text="You are a test agent.", tools=RECALL_TOOLS)


def _open(path: Path, config: AgentConfig | None = None) -> Agent:
    return Agent.open(path, agent_id="t1", config=config or AgentConfig(), clock=Tick(), policy=POLICY)


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
    with _open(tmp_path / "l", AgentConfig(recall_page_chars=50_000)) as agent:
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
    with _open(tmp_path / "l", config) as agent, agent.turn(input="go") as turn:
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
        with _open(tmp_path / f"l{page_chars}", config) as agent, agent.turn(input="go") as turn:
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
    with _open(tmp_path / "l") as agent, agent.turn(input="go") as turn:
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
    with _open(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        call = turn.recall("holon_get", {"ref": "LEDGER:x1"})
        assert call.output.startswith("malformed ref 'LEDGER:x1': expected ledger:<seq>")


# ---------------------------------------------------------------- holon_get: what does not exist


def test_a_missing_ref_is_explained_without_the_ledger_path(tmp_path: Path) -> None:
    """A seq past the end or a blob not in the store answered the model with the ledger's
    directory and advice for the daemon ("import the blob files that came with an exported
    ledger"); the model is now told the ref does not exist and, for a seq, the newest one."""
    path = tmp_path / "ledger-dir"
    with _open(path) as agent, agent.turn(input="go") as turn:
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
    with _open(tmp_path / "l") as agent, pytest.raises(RefNotFound, match="does not exist"):
        agent.get_bytes("ledger:999")
