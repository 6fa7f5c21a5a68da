"""``holon mcp LEDGER``: an MCP client gets holon's recall tools over stdio, and the ledger is only read.

The server is spawned as a subprocess and driven by the MCP SDK's own client, as Claude
Code or the Agents SDK would drive it: list the tools, call each, get a clear tool error
for a ref that names nothing, and find what the agent appends while the server runs.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest
from click.testing import CliRunner

from holon import records as r
from holon.cli import main
from holon.errors import UsageError
from holon.integrations import LedgerRecall
from holon.ledger import Ledger
from holon.replay import LedgerRefSource
from holon.runtime import RECALL_TOOLS, Agent
from holon.runtime.recall import get_text
from tests.runtime_support import Tick

POLICY = r.SystemPolicy(text="You are a test agent.", tools=RECALL_TOOLS)


def _migration_log() -> str:
    # Over the blob threshold and several recall pages long: restored from the blob store, paged.
    return "".join(f"migration log line {i:05d}: copied rows\n" for i in range(2_000))


def _files(path: Path) -> dict[str, str]:
    """Every file under the ledger directory with the digest of its bytes."""
    return {
        str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.rglob("*"))
        if f.is_file()
    }


def _text(result: Any) -> str:
    assert len(result.content) == 1
    return str(result.content[0].text)


def test_an_mcp_client_lists_and_calls_the_recall_tools_and_the_ledger_is_not_written(tmp_path: Path) -> None:
    ledger = tmp_path / "agent"
    agent = Agent.open(ledger, agent_id="t1", clock=Tick(), policy=POLICY)
    with agent.turn(input="migrate the orders table") as turn:
        turn.context()
        result = turn.tool("bash", {"cmd": "migrate orders"}).run(_migration_log)
        turn.record_message("the orders table is migrated; the flamingo index stays")
    output_ref = f"ledger:{agent.seq - 3}"  # the tool result, before the message and the turn's end
    assert isinstance(agent.ledger.get(agent.seq - 3).body, r.ToolResult) and result.blob is not None
    expected_page = agent.get_text(output_ref)
    agent.close()  # held again below, as a writer beside the server
    before = _files(ledger)

    async def session() -> None:
        params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "holon", "mcp", str(ledger)])
        async with mcp.Client(params, read_timeout_seconds=60) as client:
            listed = await client.list_tools()
            tools = {tool.name: tool for tool in listed.tools}
            assert sorted(tools) == ["holon_get", "holon_search"]
            for definition in RECALL_TOOLS:
                # The runtime's own definitions: the client's model is told what holon's is told.
                assert tools[definition.name].description == definition.description
                assert tools[definition.name].input_schema == definition.parameters
                assert tools[definition.name].annotations.read_only_hint is True

            found = await client.call_tool("holon_search", {"query": "flamingo index"})
            assert not found.is_error
            assert "1 hit for 'flamingo index'" in _text(found)
            assert f"ledger:{int(output_ref.split(':')[1]) + 1}" in _text(found)

            page = await client.call_tool("holon_get", {"ref": output_ref})
            assert not page.is_error
            assert _text(page) == expected_page  # the runtime's own holon_get answer, page and note
            assert "call holon_get with offset" in _text(page)
            offset = int(_text(page).rsplit("offset ", 1)[1].split()[0])
            second = await client.call_tool("holon_get", {"ref": output_ref, "offset": offset})
            assert _text(second).startswith(_migration_log()[offset : offset + 40])

            missing = await client.call_tool("holon_get", {"ref": "ledger:999"})
            assert missing.is_error
            assert _text(missing).startswith("ledger:999 does not exist: the newest record is ledger:")
            malformed = await client.call_tool("holon_get", {"ref": "the big log"})
            assert malformed.is_error and "ref" in _text(malformed)
            bad_args = await client.call_tool("holon_search", {"query": "x", "limit": 0})
            assert bad_args.is_error and "`limit` must be 1..25" in _text(bad_args)

            # Reading changed no byte of the ledger: no lock file, no recovery, no checkpoint.
            assert _files(ledger) == before

            # Appended while the server runs: the next call finds it and restores it.
            with (
                Agent.open(ledger, clock=Tick(10_000_000)) as writer,
                writer.turn(input="rotate the pelican credentials") as turn,
            ):
                turn.context()
                new_seq = turn.record_message("pelican credentials rotated at 09:00")
            later = await client.call_tool("holon_search", {"query": "pelican"})
            assert f"ledger:{new_seq}" in _text(later)
            restored = await client.call_tool("holon_get", {"ref": f"ledger:{new_seq}"})
            assert _text(restored) == "pelican credentials rotated at 09:00"

    anyio.run(session)


def test_the_servers_answers_are_the_runtimes_recall_answers(tmp_path: Path) -> None:
    # In-process (no subprocess): LedgerRecall over a read-only ledger gives get_text's pages.

    with Agent.open(tmp_path / "a", agent_id="t1", clock=Tick(), policy=POLICY) as agent:
        with agent.turn(input="read the log") as turn:
            turn.context()
            turn.tool("bash", {"cmd": "cat log"}).run(_migration_log)
        seq = agent.seq - 2
    reader = Ledger.open(tmp_path / "a", readonly=True)
    try:
        recall = LedgerRecall(reader, page_chars=500)
        assert recall.call("holon_get", {"ref": f"`holon get ledger:{seq}`."}) == get_text(
            f"ledger:{seq}", LedgerRefSource(reader), page_chars=500
        )
        with pytest.raises(UsageError, match="is not a recall tool"):
            recall.call("bash", {"cmd": "rm -rf /"})
    finally:
        reader.close()


def test_a_writable_ledger_is_refused(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "w", agent_id="t1") as ledger, pytest.raises(UsageError, match="read-only"):
        LedgerRecall(ledger)


def test_a_path_that_is_not_a_ledger_is_the_usual_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["mcp", str(tmp_path / "nothing")])
    assert result.exit_code != 0
    assert result.output.startswith("holon: error: ")
    assert not (tmp_path / "nothing").exists()


def test_without_the_mcp_extra_the_command_says_what_to_install(tmp_path: Path) -> None:
    Ledger.create(tmp_path / "a", agent_id="t1").close()
    code = "import sys; sys.modules['mcp'] = None\nfrom holon.cli import main\nmain(sys.argv[1:])"
    done = subprocess.run(
        [sys.executable, "-c", code, "mcp", str(tmp_path / "a")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("holon: error: ")
    assert "pip install 'holon[mcp]'" in done.stderr


def test_json_describes_the_server_without_serving(tmp_path: Path) -> None:
    Ledger.create(tmp_path / "a", agent_id="t1").close()
    result = CliRunner().invoke(main, ["mcp", str(tmp_path / "a"), "--json"])
    assert result.exit_code == 0, result.output
    described = json.loads(result.output)
    assert [tool["name"] for tool in described["tools"]] == [tool.name for tool in RECALL_TOOLS]
    assert described["tools"][0]["inputSchema"] == RECALL_TOOLS[0].parameters
    assert (described["agent_id"], described["head_seq"]) == ("t1", -1)
