"""The `holon` command's start-up: `--help` and `--version` load none of the library they do not show.

Each command imports the library it runs; the group's help lists `holon audit`, which lives
with the audit layer, by its summary without importing it (and DuckDB). The times are
measured by ``python -m benchmarks cli_start`` (docs/benchmarks.md); what is pinned here is
what gets imported, which does not depend on the machine.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from holon.cli import main

# What no start-up may load: DuckDB and the audit layer, every importer's parser, the
# ledger's frames, header and store (and the hash and zstd libraries under them), the
# folds, the renderer, the runtime and the edge modules over them.
HEAVY = (
    "duckdb",
    "blake3",
    "xxhash",
    "zstandard",
    "holon.audit",
    "holon.importers._builder",
    "holon.importers.jsonl",
    "holon.importers.claude_code",
    "holon.importers.openai_chat",
    "holon.importers.swe_agent",
    "holon.importers.openhands",
    "holon.ledger.frames",
    "holon.ledger.header",
    "holon.ledger.store",
    "holon.ledger.jsonl",
    "holon.projections",
    "holon.context.render",
    "holon.context.search",
    "holon.replay",
    "holon.runtime",
    "holon.search",
    "holon.prompt_check",
    # The frameworks holon plugs into, and holon's modules over them (holon/integrations/).
    "holon.integrations",
    "mcp",
    "mcp_types",
    "agents",
    "openai",
    "langgraph",
    "langchain_core",
)


def _modules_after(code: str) -> tuple[set[str], str]:
    """The modules loaded after running ``code`` in a fresh interpreter, and what it printed."""
    script = (
        "import contextlib, io, json, sys\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):\n"
        "    with contextlib.suppress(SystemExit):\n"
        f"        {code}\n"
        "print(json.dumps([sorted(sys.modules), out.getvalue()]))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    modules, printed = json.loads(done.stdout)
    return set(modules), printed


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_importing_the_cli_loads_none_of_the_heavy_modules() -> None:
    modules, _ = _modules_after("import holon.cli")
    assert "holon.cli" in modules
    assert _heavy(modules) == []


def test_importing_holon_and_its_integrations_package_loads_no_framework() -> None:
    # The integrations' names resolve on first use: `import holon.integrations` (and holon's
    # whole facade) import neither the MCP SDK, the Agents SDK nor LangGraph.
    every_name = "import holon, holon.integrations; [getattr(holon, n) for n in holon.__all__]"
    modules, _ = _modules_after(every_name)
    frameworks = ("mcp", "mcp_types", "agents", "openai", "langgraph", "langchain_core")
    assert sorted(m for m in modules if m.split(".")[0] in frameworks) == []


@pytest.mark.parametrize("args", [["--help"], ["--version"], []])
def test_help_and_version_load_none_of_the_heavy_modules(args: list[str]) -> None:
    # `holon` alone prints the help too (on stderr, exit code 2).
    modules, printed = _modules_after(f"from holon.cli import main; main({args}, prog_name='holon')")
    assert _heavy(modules) == []
    assert printed.startswith("holon, version ") if args == ["--version"] else "Commands:" in printed


def test_help_lists_every_command_with_its_summary() -> None:
    out = CliRunner().invoke(main, ["--help"], terminal_width=100).output
    listed = out.split("Commands:\n", 1)[1].splitlines()
    names = [line.split()[0] for line in listed if line.strip()]
    assert names == main.list_commands(click.Context(main))
    assert {"audit", "import", "append", "verify", "render", "init"} <= set(names)
    assert "  audit     Audit ledgers offline in DuckDB: SQL, canned reports, or a table summary." in listed


def test_a_lazy_commands_summary_is_the_one_its_own_help_gives() -> None:
    # `holon --help` shows the summary given to add_lazy_command; loaded, the command shows
    # its docstring's first sentence: the two must not drift apart, at any width.
    for name, (target, summary) in main._lazy.items():
        loaded = main.get_command(click.Context(main), name)
        assert loaded is not None and loaded.name == name, target
        stand_in = click.Command(name, help=summary)
        for limit in range(20, 140, 7):
            assert stand_in.get_short_help_str(limit) == loaded.get_short_help_str(limit), (name, limit)


def test_a_lazy_command_runs_and_shows_its_own_help() -> None:
    result = CliRunner().invoke(main, ["audit", "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: holon audit [OPTIONS] PATHS...")


def test_version_is_the_installed_packages() -> None:
    # --version prints holon._version's, which pyproject.toml reads as the package's version.
    out = CliRunner().invoke(main, ["--version"]).output
    assert out == f"holon, version {importlib.metadata.version('holon')}\n"


def test_help_compiles_no_estimator_pattern() -> None:
    # --help lists the estimators; the heuristic's piece pattern took ~10 ms to compile at
    # import, a tenth of the start-up, and is compiled when text is first counted instead.
    script = (
        "import contextlib, io\n"
        "import holon.context.estimator as e\n"
        "from holon.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['render', '--help'])\n"
        "print(e._piece.cache_info().currsize)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout == "0\n"


# --------------------------------------------------------------------------- names imported late


def _late_names(tree: ast.Module) -> set[str]:
    """Names a module imports only for type checkers (``if TYPE_CHECKING:``), never at run time."""
    checked: set[str] = set()
    runtime: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    checked.update((a.asname or a.name).split(".")[0] for a in inner.names)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            runtime.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            runtime.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            runtime.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return checked - runtime


def _annotations(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    """The ids of the nodes of every annotation in ``function`` (its own and its inner ones')."""
    found: set[int] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None and arg.annotation is not None:
                    found.update(id(n) for n in ast.walk(arg.annotation))
            if node.returns is not None:
                found.update(id(n) for n in ast.walk(node.returns))
        elif isinstance(node, ast.AnnAssign):
            found.update(id(n) for n in ast.walk(node.annotation))
    return found


def _imported_in(functions: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> set[str]:
    return {
        (a.asname or a.name).split(".")[0]
        for function in functions
        for node in ast.walk(function)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for a in node.names
    }


def _late_names_used_at_run_time(source: str) -> list[tuple[int, str, str]]:
    """(line, function, name) of each use, outside an annotation, of a name the module imports
    only for type checkers, in a function that does not import it itself (nor an enclosing one)."""
    tree = ast.parse(source)
    late = _late_names(tree)
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, enclosing: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> None:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, enclosing)
                continue
            chain = [*enclosing, child]
            skip, imported = _annotations(child), _imported_in(chain)
            found.extend(
                (n.lineno, child.name, n.id)
                for n in ast.walk(child)
                if isinstance(n, ast.Name) and n.id in late and n.id not in imported and id(n) not in skip
            )
            visit(child, chain)

    visit(tree, [])
    return sorted(set(found))


def test_no_command_uses_a_name_it_imports_only_for_type_checkers() -> None:
    # The commands import the library in their bodies, so `--help` loads none of it; a name
    # imported only under TYPE_CHECKING and used at run time passes mypy and ruff and fails
    # as a NameError (exit 70) the first time the command runs (`holon import` into a new
    # ledger did: `Ledger.create` in a helper that imported nothing). Every module of the
    # package the group lives in is read.
    package = Path(__file__).resolve().parent.parent / main.__module__.rpartition(".")[0].replace(".", "/")
    modules = sorted(package.glob("*.py"))
    assert package / "writing.py" in modules  # the package, not a directory that happens to be there
    found = {path.name: _late_names_used_at_run_time(path.read_text(encoding="utf-8")) for path in modules}
    assert found == {path.name: [] for path in modules}


def test_the_late_name_check_finds_a_late_name_used_at_run_time() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from holon.ledger import Ledger\n"
        "def fine(x: Ledger) -> Ledger:\n    from holon.ledger import Ledger\n    return Ledger.open(x)\n"
        "def annotated(x: Ledger) -> None:\n    y: Ledger = x\n"
        "def broken() -> None:\n    Ledger.create('p')\n"
    )
    assert _late_names_used_at_run_time(source) == [(10, "broken", "Ledger")]
