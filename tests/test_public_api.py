"""The `holon` facade: a library user imports everything public from one place."""

from __future__ import annotations

import importlib

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
