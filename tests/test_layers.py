"""The layering rules of DESIGN.md hold: each package imports only what its layer may."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "holon"

# layer -> holon modules it may import (besides itself). Third-party allowances follow DESIGN.md.
ALLOWED_HOLON = {
    "records": {"errors"},
    "errors": set(),
    "ledger": {"records", "errors"},
    "projections": {"records", "errors"},
    # Episode selection ranks with the search package's episode index.
    "context": {"records", "errors", "projections", "search"},
    "importers": {"records", "errors"},
    # `simulate` for the comparison file of a ledger `holon simulate` wrote (simulated_calls).
    "audit": {"records", "errors", "ledger", "projections", "context", "importers", "progress", "simulate"},
    # The runtime composes every layer; `search` holds the pure indexes (records in, hits
    # out), memory search among them, which it offers the model through the holon_search tool.
    "runtime": {"records", "errors", "ledger", "projections", "context", "search"},
    # The first-class fake (holon/testing.py): a ledger written as the runtime writes it.
    "testing": {"records", "errors", "ledger", "projections", "context", "search"},
    # Edges: I/O-backed library modules the CLI and users share, and the CLI itself.
    "progress": set(),  # terminal-only progress bars of the two command lines (cli, audit)
    "_version": set(),  # the version string: `holon --version` prints it without importlib.metadata
    "replay": {"records", "errors", "ledger", "projections", "context"},
    # Below the renderer, which ranks with its episode index: one tokenizer and scorer, the
    # episode index and memory search (which folds work item records to know the active one).
    "search": {"records", "errors", "projections"},
    # Deprecated: re-exports the prompt check, now holon.replay's (one release).
    "prompt_check": {"replay"},
    # `holon simulate`: a ledger's evidence rendered under holon, written as a new ledger.
    "simulate": {"records", "errors", "ledger", "projections", "context", "replay"},
    # The run report draws what the audit tables hold (docs/report.md).
    "report": {"errors", "ledger", "audit"},
    # Frameworks' adapters: library users compose them as they would the runtime.
    "integrations": {"_version", "records", "errors", "ledger", "context", "runtime", "search"},
    "cli": {
        "_version",
        "records",
        "errors",
        "ledger",
        "projections",
        "context",
        "importers",
        "audit",
        "runtime",
        "replay",
        "search",
        "progress",
        "simulate",
        "report",
        "integrations",
    },
}
ALLOWED_THIRD_PARTY = {
    "records": {"msgspec"},
    "errors": set(),
    "ledger": {"msgspec", "zstandard", "blake3", "xxhash"},
    "projections": {"msgspec", "zstandard"},
    "context": {"msgspec", "blake3", "bpe_openai"},
    "importers": {"msgspec"},
    "audit": {"msgspec", "duckdb", "zstandard", "click"},
    "runtime": {"msgspec", "blake3"},
    "testing": {"msgspec", "blake3"},
    "replay": {"msgspec"},
    "search": {"msgspec"},
    "prompt_check": set(),
    "simulate": {"msgspec", "blake3"},
    "report": {"msgspec", "duckdb"},
    "progress": {"click"},
    "cli": {"msgspec", "click"},
    # Each module imports its own framework only (holon/integrations/__init__.py).
    "integrations": {"msgspec", "mcp", "mcp_types", "anyio", "agents", "langgraph", "langchain_core"},
}
# Pure layers must not reach for clocks, randomness, the environment or the file system.
# The vocabulary is one: DESIGN.md has it do no I/O.
IMPURE_MODULES = {"time", "datetime", "random", "uuid", "os", "secrets", "socket", "subprocess", "pathlib"}
PURE = {"records", "projections", "context", "search"}
# Inside a layer split into modules (or a package inside one, named dotted), the modules of its
# own package each may import: one job each, the vocabulary knowing nothing of the bytes it is
# written as. Every module of the package is listed, so a new one states its place here.
WITHIN = {
    "records": {
        "__init__": {"kinds", "malformed", "wire"},  # re-exports the public names of all three
        "kinds": set(),
        "malformed": set(),
        "wire": {"kinds", "malformed"},
    },
    "search": {
        "__init__": {"terms", "bm25", "episodes", "memory"},  # re-exports the public names of all four
        "terms": set(),  # the one tokenizer
        "bm25": set(),  # the one scorer
        "episodes": {"terms", "bm25"},
        "memory": {"terms", "bm25", "episodes"},  # an episode is a document, its text as selection's
    },
    # One module per job; the fold helpers below the jobs (turns, config, reading, resume)
    # import only those beneath them.
    "replay": {
        "__init__": {
            "config",
            "evidence",
            "imported",
            "memory",
            "passes",
            "prompts",
            "reading",
            "refs",
            "resume",
            "stats",
            "turns",
            "verify",
        },
        "turns": set(),
        "config": set(),
        "reading": {"config", "turns"},
        "resume": {"config", "reading"},
        "refs": set(),
        "imported": set(),
        "passes": {"config", "reading", "turns"},
        "memory": {"config", "reading", "resume", "turns"},
        "prompts": {"config", "reading", "resume", "turns"},
        "stats": {"config", "resume"},
        "evidence": {"config", "reading", "resume"},
        "verify": {"config"},
    },
    # The runtime: Agent (agent) and Turn (turn) share the write core (core) and neither
    # reaches into the other; opening, the tool WAL (calls) and the id refusals are parts.
    "runtime": {
        "__init__": {"agent", "calls", "checkpoints", "core", "loop", "recall", "tools", "turn"},
        "agent": {"calls", "checkpoints", "core", "opening", "recall", "turn"},
        "turn": {"agent", "calls", "core", "recall", "refusals"},  # agent: for type hints only
        "calls": {"core"},
        "opening": {"checkpoints", "core"},
        "core": {"checkpoints"},
        "refusals": set(),
        "loop": {"calls", "recall", "tools", "turn"},
        "tools": {"recall"},
        "recall": set(),
        "checkpoints": set(),
    },
    # The command line: how it prints and fails, the group, how commands read a ledger,
    # then the commands by job; __init__ registers them on the group.
    "cli": {
        "__init__": {
            "checking",
            "exporting",
            "failures",
            "group",
            "reading",
            "rendering",
            "replaying",
            "writing",
        },
        "__main__": set(),  # `python -m holon.cli` runs the package's `main`
        "printing": set(),
        "failures": {"printing"},
        "group": {"failures", "printing"},
        "ledgers": set(),
        "writing": {"group", "ledgers", "printing"},
        "exporting": {"group", "ledgers", "printing"},
        "replaying": {"failures", "group", "ledgers", "printing"},
        "rendering": {"failures", "group", "ledgers", "printing"},
        "reading": {"group", "ledgers", "printing"},
        "checking": {"failures", "group", "ledgers", "printing", "replaying"},
    },
    # The section builders by stability tier, over the sections' table and the bounds and
    # work lines the tiers share; no tier imports another.
    "context.sections": {
        "__init__": {"layout", "stable", "agent", "turn_work", "turn_input", "work"},
        "layout": set(),
        "bounds": {"layout"},
        "work": {"layout", "bounds"},
        "stable": {"layout"},
        "agent": {"layout", "bounds", "work"},
        "turn_work": {"layout", "bounds", "work"},
        "turn_input": {"layout", "bounds"},
    },
}
# The ledger's store is a facade over parts with one job each; they share only the writer's
# tip (holon/ledger/tip.py), handed to each by the facade. part -> the parts it may import.
# Every other ledger module may import the facade, `store`, and no part.
STORE_PARTS = {
    "store": {"writer", "reader", "tip"},
    "writer": {"tip"},
    "reader": {"tip", "index", "seek"},
    "index": set(),
    "seek": set(),
    "tip": set(),
}
STDLIB = set(__import__("sys").stdlib_module_names)


def _layer_files(layer: str) -> list[Path]:
    single = ROOT / f"{layer}.py"
    if single.exists():
        return [single]
    return sorted((ROOT / layer).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(ALLOWED_HOLON))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    files = _layer_files(layer)
    if not files:
        pytest.skip(f"layer {layer} not built yet")
    for path in files:
        for name in sorted(_imports(path)):
            top = name.split(".")[0]
            if top == "holon":
                parts = name.split(".")
                if len(parts) == 1:
                    pytest.fail(f"{path}: imports the `holon` facade; import the layer module instead")
                target = parts[1]
                assert target == layer or target in ALLOWED_HOLON[layer], (
                    f"{path.relative_to(ROOT.parent)} imports {name}: layer `{layer}` may only use "
                    f"{sorted(ALLOWED_HOLON[layer]) or 'nothing'} from holon"
                )
            elif top in STDLIB or top == "__future__":
                if layer in PURE:
                    assert top not in IMPURE_MODULES, (
                        f"{path.relative_to(ROOT.parent)} imports {name}: `{layer}` must stay pure "
                        "(no clock, randomness, environment or file system)"
                    )
            else:
                assert top in ALLOWED_THIRD_PARTY[layer], (
                    f"{path.relative_to(ROOT.parent)} imports third-party {name}, not allowed in `{layer}`"
                )


def test_the_cli_uses_only_the_public_api() -> None:
    # The CLI is a user of the library like any other: it imports a layer's package (its
    # __init__ exports), never a module inside it. Its own modules it names (WITHIN).
    for path in _layer_files("cli"):
        imported = _imports(path)
        deep = sorted(
            name
            for name in imported
            if name.startswith("holon.") and name.count(".") > 1 and not name.startswith("holon.cli.")
        )
        assert not deep, (
            f"{path.relative_to(ROOT.parent)} imports non-public modules {deep}; import from the layer "
            "package instead"
        )


@pytest.mark.parametrize("package", sorted(WITHIN))
def test_a_split_layers_modules_import_only_their_part(package: str) -> None:
    allowed = WITHIN[package]
    folder = ROOT.joinpath(*package.split("."))
    modules = {path.stem for path in folder.glob("*.py")}
    assert modules == set(allowed), (
        f"{folder.relative_to(ROOT.parent)}/ modules and WITHIN[{package!r}] differ"
    )
    for module, may in sorted(allowed.items()):
        path = folder / f"{module}.py"
        prefix = f"holon.{package}."
        imported = _imports(path)
        # The package's __init__ composes its modules, and its __main__ runs what it exports.
        assert module in ("__init__", "__main__") or f"holon.{package}" not in imported, (
            f"{path.relative_to(ROOT.parent)} imports its own package: name the module it needs"
        )
        used = {name[len(prefix) :].split(".")[0] for name in imported if name.startswith(prefix)}
        assert used <= may, (
            f"{path.relative_to(ROOT.parent)} imports {sorted(used - may)} of holon.{package}; "
            f"of its package it may import {', '.join(sorted(may)) or 'nothing'}"
        )


def test_the_ledger_stores_parts_meet_only_in_the_facade() -> None:
    prefix = "holon.ledger."
    for path in sorted((ROOT / "ledger").glob("*.py")):
        may = STORE_PARTS.get(path.stem, {"store"})
        used = {name[len(prefix) :].split(".")[0] for name in _imports(path) if name.startswith(prefix)}
        parts = used & set(STORE_PARTS)
        assert parts <= may, (
            f"{path.relative_to(ROOT.parent)} imports {sorted(parts - may)} of the store's parts; "
            f"it may import {', '.join(sorted(may)) or 'none of them'}"
        )


# A module does one job and a function one step (issue #33): past these sizes each has been
# a grab-bag that the next reader had to take apart first. Counted as the code is read: a
# module's lines, a function's from its `def` to its last line, docstring included.
MAX_MODULE_LINES = 900
MAX_FUNCTION_LINES = 80


def _sizes() -> tuple[list[str], list[str]]:
    modules, functions = [], []
    for path in sorted(ROOT.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT.parent).as_posix()
        lines = source.count("\n")
        if lines > MAX_MODULE_LINES:
            modules.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    functions.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return modules, functions


def test_no_module_or_function_outgrows_one_job() -> None:
    modules, functions = _sizes()
    assert not modules, f"modules over {MAX_MODULE_LINES} lines: split them by job: {modules}"
    assert not functions, f"functions over {MAX_FUNCTION_LINES} lines: split them into steps: {functions}"
