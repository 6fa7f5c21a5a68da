"""docs/cli.md is generated from --help; every command has help text, an entry and --json."""

from __future__ import annotations

import click
import pytest

from holon.cli import main as holon_cli
from tests.cli_docs import CLI_DOC, generate

_CTX = click.Context(holon_cli, info_name="holon")
_COMMANDS = holon_cli.list_commands(_CTX)


def test_the_documented_commands_exist() -> None:
    expected = {
        "init",
        "append",
        "import",
        "export",
        "replay",
        "render",
        "explain",
        "memory",
        "episodes",
        "get",
        "search",
        "verify",
        "stats",
    }
    assert expected <= set(_COMMANDS)


@pytest.mark.parametrize("name", _COMMANDS)
def test_command_has_help_text(name: str) -> None:
    command = holon_cli.get_command(_CTX, name)
    assert command is not None
    assert command.help and len(command.help.strip()) > 40, f"`holon {name}` has no real help text"
    assert command.get_short_help_str(), f"`holon {name}` has no short help"
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help, f"`holon {name} {param.opts[0]}` has no help text"


@pytest.mark.parametrize("name", _COMMANDS)
def test_command_has_a_json_option(name: str) -> None:
    command = holon_cli.get_command(_CTX, name)
    assert command is not None
    assert any("--json" in p.opts for p in command.params if isinstance(p, click.Option)), (
        f"`holon {name}` has no --json"
    )


@pytest.mark.parametrize("name", _COMMANDS)
def test_command_has_a_docs_entry(name: str) -> None:
    text = CLI_DOC.read_text()
    assert f"### `holon {name}`" in text, f"docs/cli.md has no entry for `holon {name}`"


def test_cli_doc_is_generated_from_help_and_current() -> None:
    assert CLI_DOC.read_text() == generate(), "docs/cli.md is stale: run `python -m tests.cli_docs`"
