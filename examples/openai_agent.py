"""openai_agent.py — a holon agent on the OpenAI SDK, with a shell and a file reader.

    pip install 'holon[openai]'
    export OPENAI_API_KEY=sk-...
    python examples/openai_agent.py state/agent-7 --workspace ~/src/project "What does this repo do?"
    echo "Run the tests; what fails?" | python examples/openai_agent.py state/agent-7 --api responses

Each request (an argument, else each line of stdin) is one turn: ``holon.run_turn`` calls
the model as many rounds as it needs, runs its tool calls through the ledger's
write-ahead log, answers ``holon_get`` / ``holon_search`` from the ledger and records the
usage OpenAI reports. ``--api chat`` (the default) uses Chat Completions, ``--api
responses`` the Responses API, stateless (holon's prompt is the state). Run it again on
the same ledger and the agent remembers:
``holon render state/agent-7`` shows what it sees, ``holon audit state/agent-7 --report
usage`` what the calls cost.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from holon import Agent, AgentConfig, Budget
from holon.context import RenderConfig
from holon.runtime import OpenAIChat, OpenAIResponses, Tools, run_turn

MODEL = "gpt-5.5"
POLICY = (
    "You are a careful engineer working in the workspace. Use the shell to look before you "
    "answer, keep answers short, and say what you ran."
)
CONFIG = AgentConfig(
    budget=Budget(context_window=200_000, output_reserve=8_000),
    render=RenderConfig(prompt_cache_key="example-agent"),
    fsync="batch",
)


def workspace_tools(workspace: Path) -> Tools:
    """The agent's tools, working in ``workspace``."""
    tools = Tools()

    @tools.tool()
    def shell(command: str) -> tuple[str, int]:
        """Run a shell command in the workspace; returns its output and exit code."""
        argv = ["/bin/sh", "-c", command]
        proc = subprocess.run(argv, cwd=workspace, capture_output=True, text=True, timeout=300, check=False)
        return proc.stdout + proc.stderr, proc.returncode

    @tools.tool()
    def read_file(path: str) -> str:
        """Read a text file of the workspace."""
        return (workspace / path).read_text(encoding="utf-8", errors="replace")

    return tools


def requests(given: list[str]) -> list[str] | Any:
    """The operator's requests: the arguments, else the lines of stdin."""
    return given or (line.strip() for line in sys.stdin if line.strip())


def main(argv: list[str] | None = None, *, client: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="openai_agent.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("ledger", type=Path, help="the agent's ledger directory (created if missing)")
    parser.add_argument("request", nargs="*", help="requests, one turn each (default: lines of stdin)")
    parser.add_argument("--workspace", type=Path, default=Path.cwd(), help="where the tools run")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--api", choices=("chat", "responses"), default="chat", help="which OpenAI API")
    args = parser.parse_intermixed_args(argv)
    if client is None:
        if not os.environ.get("OPENAI_API_KEY"):
            parser.error("set OPENAI_API_KEY (https://platform.openai.com/api-keys)")
        import openai  # noqa: PLC0415 - the SDK only when it is used

        client = openai.OpenAI()
    tools = workspace_tools(args.workspace)
    dialect = OpenAIChat if args.api == "chat" else OpenAIResponses
    model = dialect(client, model=args.model, max_tokens=CONFIG.budget.output_reserve)
    policy = tools.policy(POLICY)
    with Agent.open(args.ledger, agent_id="example-agent", config=CONFIG, policy=policy) as agent:
        for text in requests(args.request):
            with agent.turn(input=text, trigger="operator", role="operator") as turn:
                run = run_turn(turn, model, tools)
            print(run.text if not run.capped else f"(stopped after {run.rounds} rounds) {run.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
