"""The `holon` facade: a library user imports everything public from one place."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import holon

# Each layer's headline API that a library user reaches for through the facade.
FACADE_FROM_LAYER = {
    "holon.ledger": ("Ledger", "export_jsonl", "import_jsonl", "VerifyReport"),
    "holon.projections": ("fold", "apply", "post_turn_refresh", "verify_derivations", "WorkingMemoryState"),
    "holon.context": (
        "build_context",
        "Budget",
        "RenderConfig",
        "restore",
        "to_anthropic_messages",
        "to_openai_chat",
        "parse_tool_arguments",
        "openai_assistant_message",
    ),
    "holon.errors": ("HolonError", "InvalidRecord", "UsageError", "InvalidToolArguments"),
    "holon.importers": ("import_transcript", "read_transcript", "FORMATS"),
    "holon.runtime": ("Agent", "AgentConfig", "ToolCall", "UnknownOutcome", "RECALL_TOOLS"),
    "holon.search": ("MemoryHit",),
    "holon.simulate": ("simulate_ledger", "read_simulation", "Simulation", "simulation_budget"),
}


def test_every_exported_name_resolves() -> None:
    missing = [name for name in holon.__all__ if not hasattr(holon, name)]
    assert not missing, f"holon.__all__ lists names the facade does not define: {missing}"
    assert len(set(holon.__all__)) == len(holon.__all__), "duplicate names in holon.__all__"


@pytest.mark.parametrize("module", sorted(FACADE_FROM_LAYER))
def test_facade_re_exports_the_layer_object(module: str) -> None:
    layer = importlib.import_module(module)
    for name in FACADE_FROM_LAYER[module]:
        assert name in holon.__all__, f"holon does not re-export {module}.{name}"
        assert getattr(holon, name) is getattr(layer, name), f"holon.{name} is not {module}.{name}"


# Packages whose names load on first use (PEP 562): the facade, and the layers whose light
# names (constants, registries) the command line reads while it declares its options.
LAZY_PACKAGES = ("holon", "holon.ledger", "holon.context", "holon.importers")


def _checking_imports(module: str) -> dict[str, set[str]]:
    """The ``from X import ...`` names under ``if TYPE_CHECKING:`` in a package's __init__, by X."""
    path = importlib.import_module(module).__file__
    assert path is not None
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    found: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    found.setdefault(statement.module, set()).update(a.name for a in statement.names)
    return found


@pytest.mark.parametrize("module", LAZY_PACKAGES)
def test_a_lazy_package_loads_what_type_checkers_read(module: str) -> None:
    # Three lists name the same things: the TYPE_CHECKING imports (what mypy and IDEs see),
    # the table __getattr__ resolves at run time, and __all__. A name in one and not the
    # others would type-check and fail at run time, or the reverse.
    package = importlib.import_module(module)
    homes = {home: set(names) for home, names in package._HOMES.items()}
    checking = _checking_imports(module)
    exported = set(package.__all__)
    lazy = {name for names in homes.values() for name in names}
    assert {home: names & exported for home, names in checking.items() if names & exported} == homes
    assert lazy <= exported, f"{module} loads names it does not export: {sorted(lazy - exported)}"
    for home, names in homes.items():
        layer = importlib.import_module(home)
        for name in names:
            assert getattr(package, name) is getattr(layer, name), f"{module}.{name} is not {home}.{name}"
    assert not [name for name in package.__all__ if not hasattr(package, name)]
    assert exported <= set(dir(package))
    with pytest.raises(AttributeError, match=f"module '{module}' has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


def _loaded_after(code: str) -> list[str]:
    script = f"import sys\n{code}\nprint(' '.join(sorted(m for m in sys.modules if m.startswith('holon'))))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_import_holon_loads_no_layer() -> None:
    assert _loaded_after("import holon") == ["holon", "holon._version"]
    # A name loads its layer only: the ledger does not bring the renderer or the runtime.
    loaded = _loaded_after("from holon import Ledger")
    assert "holon.ledger.store" in loaded
    assert not [m for m in loaded if m.startswith(("holon.context", "holon.runtime", "holon.importers"))]


def test_a_layers_light_names_do_not_load_the_layer() -> None:
    loaded = _loaded_after("from holon.ledger import SETTING_RANGES\nfrom holon.importers import IMPORTERS")
    assert "holon.ledger.sizes" in loaded and "holon.importers" in loaded
    assert not {"holon.ledger.store", "holon.ledger.header", "holon.ledger.frames"} & set(loaded)
    assert not [m for m in loaded if m.startswith("holon.importers.")], "no importer's module before its use"
    loaded = _loaded_after("from holon.importers import IMPORTERS; IMPORTERS['swe-agent'].parse")
    assert "holon.importers.swe_agent" in loaded and "holon.importers.claude_code" not in loaded


# --------------------------------------------------------------------------- what import holon loads

ROOT = Path(__file__).resolve().parent.parent


def test_import_holon_does_not_load_duckdb() -> None:
    # architecture.md: holon.audit is kept out of the facade so that `import holon` does
    # not load DuckDB; `from holon.audit import connect` does.
    code = "import sys, holon; print('duckdb' in sys.modules, hasattr(holon, 'audit'))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["False", "False"]
