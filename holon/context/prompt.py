"""What the renderer produces: the prompt, its cache identity and its assembly plan.

A :class:`Prompt` is a list of sections in the RFC order, each tagged with its
stability class. :class:`CacheIdentity` names the cacheable prefix (Stable +
AgentScoped): it combines the agent, the caller's prompt cache key, the working-memory
revision and the compression epoch with a hash of the prefix text itself, so the key
changes whenever that text changes and never otherwise. :class:`AssemblyPlan` records
what was admitted in which form and what was left out with which ref;
:func:`prompt_rendered` turns it into the durable ``PromptRendered`` record.
"""

from __future__ import annotations

from typing import Any, Final

import blake3
import msgspec

import holon.records as r
from holon.context.budget import FormKind, Stability, ToolExchange

__all__ = [
    "SEPARATOR",
    "AssemblyPlan",
    "CacheIdentity",
    "Prompt",
    "PromptSection",
    "prompt_rendered",
]

#: Text between two sections; budgeted as one token per join.
SEPARATOR: Final = "\n\n"


def _hash(text: str) -> str:
    return blake3.blake3(text.encode()).hexdigest()


class PromptSection(msgspec.Struct, frozen=True, kw_only=True):
    """One rendered section: name, stability class, text, tokens, form, cache breakpoint flag.

    ``cuts`` are offsets of line breaks in ``text`` where a provider adapter may start a
    new content block; the history has one before each turn's first unit, so the
    previous prompt's history ends at a block boundary of the next one (Anthropic reads
    a cached prefix only at block boundaries). They change no text.
    """

    name: str
    stability: Stability
    text: str
    tokens: int
    form: FormKind = "full"
    breakpoint: bool = False
    cuts: tuple[int, ...] = ()
    calls: tuple[ToolExchange, ...] = ()


class CacheIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """Identity of the cacheable prefix: agent, cache key, revision, epoch and block hashes.

    ``block_hashes`` maps each stability class present (``stable``, ``agent``,
    ``turn``) to the blake3 hash of its text. ``layout`` is the render layout: what the
    prefix depends on follows from it (see :attr:`key`).
    """

    agent_id: str
    prompt_cache_key: str
    working_memory_revision: int
    compression_epoch: int
    block_hashes: dict[str, str]
    layout: str = "rfc"

    @property
    def prefix_hash(self) -> str:
        """Hash of the Stable + AgentScoped text (what a provider caches)."""
        return _hash(self.block_hashes.get("stable", "") + ":" + self.block_hashes.get("agent", ""))

    @property
    def key(self) -> str:
        """The stable key string: equal keys ⇔ byte-identical cacheable prefixes.

        In the rfc layout the prefix ends with working memory, so it is keyed by the
        revision and the epoch it is rendered at. In the recitation layout working memory
        follows the history, and the prefix (policy, tools, episodes) keeps its episodes
        across revisions and epochs until the history moves: the key is the prefix's
        hash alone, so it changes exactly when the prefix does.
        """
        if self.layout == "recitation":
            return f"holon:{self.agent_id}:{self.prompt_cache_key}:{self.prefix_hash[:24]}"
        return (
            f"holon:{self.agent_id}:{self.prompt_cache_key}:r{self.working_memory_revision}"
            f":e{self.compression_epoch}:{self.prefix_hash[:24]}"
        )

    @property
    def routing_key(self) -> str:
        """A per-agent key for providers that route by key (OpenAI ``prompt_cache_key``).

        It deliberately leaves out revision and epoch: a provider routes requests with
        one key to the same cache, and the Stable prefix is shared across revisions.
        """
        return f"holon:{self.agent_id}:{self.prompt_cache_key}"


class AssemblyPlan(msgspec.Struct, frozen=True, kw_only=True):
    """How a prompt was assembled: tokens per section, forms, omissions and refs.

    ``degraded`` is true when the TurnScoped pinned minimum did not fit next to the
    prefix planned on its own share, and the whole prompt was planned jointly (the
    cacheable prefix may then differ from the previous turn's). ``history`` is where the
    recent history started and how far its results were cleared (kept by the next render).
    ``recalled`` names the records the recalled section brought back, oldest first
    (:mod:`holon.context.recall`).
    """

    budget: int
    available: int
    total_tokens: int
    sections: tuple[r.SectionTokens, ...]
    omitted: tuple[r.Omission, ...]
    episodes: tuple[int, ...] = ()
    degraded: bool = False
    history: r.HistoryAnchor | None = None
    recalled: tuple[str, ...] = ()

    @property
    def evicted_refs(self) -> tuple[str, ...]:
        """Refs of everything left out or shortened, in prompt order, without duplicates."""
        return tuple(dict.fromkeys(o.ref for o in self.omitted))

    @property
    def compacted(self) -> tuple[str, ...]:
        """Sections admitted in a shorter form than full."""
        return tuple(s.section for s in self.sections if s.form in ("compact", "truncated"))


class Prompt(msgspec.Struct, frozen=True, kw_only=True):
    """A rendered prompt: ordered sections, cache identity, plan and the config that made it.

    ``tools`` are the tool definitions the ``tools`` section stands for, for adapters
    that pass them structured.
    """

    sections: tuple[PromptSection, ...]
    identity: CacheIdentity
    plan: AssemblyPlan
    estimator: str
    render_config: dict[str, Any]
    tools: tuple[r.ToolDefinition, ...] = ()

    @property
    def text(self) -> str:
        """The whole prompt as one text, sections joined by a blank line."""
        return SEPARATOR.join(s.text for s in self.sections)

    @property
    def total_tokens(self) -> int:
        """Estimated tokens of the prompt (sections plus one per separator)."""
        return self.plan.total_tokens

    @property
    def cache_key(self) -> str:
        """Shortcut for ``identity.key``."""
        return self.identity.key

    @property
    def prompt_hash(self) -> str:
        """blake3 of the whole prompt text."""
        return _hash(self.text)

    def section(self, name: str) -> PromptSection | None:
        """The section called ``name``, if it was rendered."""
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def block_text(self, stability: Stability) -> str:
        """The joined text of every section of one stability class."""
        return SEPARATOR.join(s.text for s in self.sections if s.stability == stability)


def prompt_rendered(prompt: Prompt) -> r.PromptRendered:
    """The ``PromptRendered`` record for a prompt (the runtime appends it; it confirms the revision)."""
    return r.PromptRendered(
        working_memory_revision=prompt.identity.working_memory_revision,
        compression_epoch=prompt.identity.compression_epoch,
        cache_key=prompt.identity.key,
        prompt_hash=prompt.prompt_hash,
        total_tokens=prompt.plan.total_tokens,
        budget=prompt.plan.budget,
        estimator=prompt.estimator,
        sections=prompt.plan.sections,
        omitted=prompt.plan.omitted,
        render_config=prompt.render_config,
        episodes=prompt.plan.episodes,
        history=prompt.plan.history,
    )
