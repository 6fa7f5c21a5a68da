"""Rendering: the pure, budgeted renderer from projection state to a cache-friendly prompt.

No I/O, no clock, no randomness: the same ledger gives the same prompt bytes and cache
key in any process. See docs/context-rendering.md.

- :func:`build_context` (:class:`RenderConfig`, :class:`Budget`) → :class:`Prompt`
  with :class:`PromptSection`\\ s, :class:`CacheIdentity` and :class:`AssemblyPlan`;
  :func:`prompt_rendered` turns it into the ``PromptRendered`` record.
- :class:`ContextInputs` / :func:`inputs_from_state` — what the sections read;
  :class:`EvidenceView` (:class:`EvidenceBuffer`, :class:`RecordsView`) — the bounded view
  of the ledger the recent history is read from.
- :func:`plan_budget` with :class:`Candidate` / :class:`Form` — the budget planner.
- :class:`Estimator`, :func:`get_estimator` — token counting.
- :class:`EpisodeIndex` — incremental BM25 over archived episodes (export / restore as bytes;
  :class:`EpisodeIndexRejected` says why saved bytes were not used).
- :func:`parse_ref`, :func:`restore`, :func:`restore_bytes` — the restoration contract.
- :func:`to_anthropic_messages`, :func:`to_openai_chat`, :func:`to_openai_responses`;
  :func:`cache_last_block` for the rounds a daemon appends within a turn;
  :func:`parse_tool_arguments` (:class:`InvalidToolArguments`) and
  :func:`openai_assistant_message` for the model's tool calls.

Each name is imported from its module on first use (PEP 562): the command line lists
:func:`available_estimators` in its ``--help`` without loading the renderer.

What it may import: :mod:`holon.records`, :mod:`holon.errors`, :mod:`holon.projections` and
:mod:`holon.search` (episode selection ranks with its episode index), msgspec, blake3,
bpe_openai and the stdlib, but no clock, randomness, environment or file system: it is a
pure layer (tests/test_layers.py holds it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # what type checkers and IDEs read; at run time __getattr__ resolves these
    from holon.context.adapters import (
        InvalidToolArguments,
        cache_last_block,
        openai_assistant_message,
        parse_tool_arguments,
        to_anthropic_messages,
        to_openai_chat,
        to_openai_responses,
    )
    from holon.context.budget import DEFAULT_BUDGET, Budget, Candidate, Form, ToolExchange, plan_budget
    from holon.context.episodes import select_episodes
    from holon.context.estimator import (
        DEFAULT_ESTIMATOR,
        BpeEstimator,
        Estimator,
        HeuristicEstimator,
        available_estimators,
        get_estimator,
    )
    from holon.context.evidence import EvidenceBuffer, EvidenceView, PendingView, RecordsView
    from holon.context.inputs import ContextInputs, CurrentInput, inputs_from_state
    from holon.context.prompt import AssemblyPlan, CacheIdentity, Prompt, PromptSection, prompt_rendered
    from holon.context.refs import Ref, RefSource, parse_ref, restore, restore_bytes
    from holon.context.render import RENDER_VERSION, RenderConfig, build_context
    from holon.context.search import EpisodeHit, EpisodeIndex, EpisodeIndexRejected
    from holon.context.sections import SECTION_PRIORITY

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_ESTIMATOR",
    "RENDER_VERSION",
    "SECTION_PRIORITY",
    "AssemblyPlan",
    "BpeEstimator",
    "Budget",
    "CacheIdentity",
    "Candidate",
    "ContextInputs",
    "CurrentInput",
    "EpisodeHit",
    "EpisodeIndex",
    "EpisodeIndexRejected",
    "Estimator",
    "EvidenceBuffer",
    "EvidenceView",
    "PendingView",
    "Form",
    "HeuristicEstimator",
    "InvalidToolArguments",
    "Prompt",
    "PromptSection",
    "RecordsView",
    "Ref",
    "RefSource",
    "RenderConfig",
    "ToolExchange",
    "available_estimators",
    "build_context",
    "cache_last_block",
    "get_estimator",
    "inputs_from_state",
    "openai_assistant_message",
    "parse_ref",
    "parse_tool_arguments",
    "plan_budget",
    "prompt_rendered",
    "restore",
    "restore_bytes",
    "select_episodes",
    "to_anthropic_messages",
    "to_openai_chat",
    "to_openai_responses",
]

#: Module -> the names of ``__all__`` it defines, imported on first use.
_HOMES: Final[dict[str, tuple[str, ...]]] = {
    "holon.context.adapters": (
        "InvalidToolArguments",
        "cache_last_block",
        "openai_assistant_message",
        "parse_tool_arguments",
        "to_anthropic_messages",
        "to_openai_chat",
        "to_openai_responses",
    ),
    "holon.context.budget": (
        "DEFAULT_BUDGET",
        "Budget",
        "Candidate",
        "Form",
        "ToolExchange",
        "plan_budget",
    ),
    "holon.context.episodes": ("select_episodes",),
    "holon.context.estimator": (
        "DEFAULT_ESTIMATOR",
        "BpeEstimator",
        "Estimator",
        "HeuristicEstimator",
        "available_estimators",
        "get_estimator",
    ),
    "holon.context.evidence": (
        "EvidenceBuffer",
        "EvidenceView",
        "PendingView",
        "RecordsView",
    ),
    "holon.context.inputs": (
        "ContextInputs",
        "CurrentInput",
        "inputs_from_state",
    ),
    "holon.context.prompt": (
        "AssemblyPlan",
        "CacheIdentity",
        "Prompt",
        "PromptSection",
        "prompt_rendered",
    ),
    "holon.context.refs": (
        "Ref",
        "RefSource",
        "parse_ref",
        "restore",
        "restore_bytes",
    ),
    "holon.context.render": (
        "RENDER_VERSION",
        "RenderConfig",
        "build_context",
    ),
    "holon.context.search": (
        "EpisodeHit",
        "EpisodeIndex",
        "EpisodeIndexRejected",
    ),
    "holon.context.sections": ("SECTION_PRIORITY",),
}
_HOME_OF: Final = {name: module for module, names in _HOMES.items() for name in names}


if not TYPE_CHECKING:  # hidden from type checkers, which would accept any name through it

    def __getattr__(name: str) -> object:
        module = _HOME_OF.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups find it without calling __getattr__ again
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
