"""The four context policies compared: three common baselines and holon's ``build_context``.

Each policy turns a :class:`~benchmarks.eval.scenario.Scenario` and a
:class:`~holon.context.Budget` into the exact prompt of every model call
(:class:`~benchmarks.eval.trace.CallPrompt`), and says whether an item it evicted can be
restored (:meth:`restore`).

Baselines see the evidence as a chat transcript (:func:`~benchmarks.eval.trace.transcript_text`):
the latest system policy and tool definitions first (never dropped), then one item per
record, oldest first.

- ``full-history`` — everything, truncated oldest-first (whole items) when it exceeds the
  window, as a provider's automatic truncation does. If the newest item alone is larger
  than the window, only its tail is kept.
- ``rolling-window`` — the newest ``available`` tokens of the transcript, cut at a line
  boundary inside the oldest item kept (a token-budget buffer memory).
- ``tool-clearing`` — Anthropic's ``clear_tool_uses`` context edit: once the prompt passes
  ``trigger`` tokens, the oldest tool results (except the newest ``keep`` tool uses) are
  replaced by a placeholder, oldest first, until at least ``clear_at_least`` tokens were
  reclaimed — and only when that much can be reclaimed: otherwise nothing is cleared (the
  API does not apply the edit, as it would break the prompt cache for little); cleared
  results stay cleared. If the prompt still exceeds the window it is
  truncated oldest-first like ``full-history`` (the API would otherwise reject it).
- ``holon`` — what ``holon.Agent`` sends (``Turn.context()`` / ``Turn.messages()``),
  :class:`holon.simulate.HolonSimulation` (``holon simulate`` runs the same on a ledger):
  every evidence record is appended to a ledger and folded, the post-turn refresh
  appends its derived records; a turn's first model call gets the prompt
  ``build_context`` renders from the fold so far (its ``PromptRendered`` record is
  appended), and the turn's later calls get that prompt with the turn's *rounds* since
  it appended (:func:`holon.context.rounds.round_text`, full tool outputs) — until the
  rounds no longer fit the budget (:func:`holon.context.rounds.rounds_fit`), when the
  prompt is rendered again, or until the turn made something working memory states
  untrue (:func:`holon.projections.refresh_before_prompt` refreshes it first). Large
  tool outputs go to the blob store as the ledger would put them (over 4,096 bytes). A
  daemon moves the prompt's last cache breakpoint to the last block of every request
  (:func:`holon.context.adapters.cache_last_block`), so each call's end is one.

``full-history`` is :class:`holon.simulate.FullHistory`, the stand-in ``holon simulate``
shows for what a transcript's own tool sent; the other baselines build on its
:class:`~holon.simulate.Transcript`.

Nothing a baseline evicts leaves a reference, so its evictions are not restorable. holon's
evictions are the refs of its assembly plan and every ``restore with ref`` placeholder in
the text, one per evidence record however many refs name it (a large tool result's blob
and its ledger record); each is restored through a :class:`~holon.context.RefSource` over
the ledger records and checked byte for byte against the original evidence.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, Protocol

import msgspec

import holon.records as r
from benchmarks.eval.scenario import Scenario
from benchmarks.eval.trace import Block, CallPrompt, TokenCounter
from holon.context import Budget, RenderConfig
from holon.ledger.store import DEFAULT_BLOB_THRESHOLD
from holon.simulate import FullHistory, HolonSimulation, RestoreOutcome, Transcript, TranscriptItem

__all__ = [
    "POLICIES",
    "FullHistory",
    "HolonPolicy",
    "HolonRfcLayout",
    "Policy",
    "RestoreOutcome",
    "RollingWindow",
    "ToolClearing",
    "new_content",
]

AGENT: Final = "eval-agent"
PLACEHOLDER: Final = "[tool result cleared]"


class Policy(Protocol):
    """A context policy bound to one scenario and budget."""

    name: str

    def prompts(self) -> Iterator[CallPrompt]:
        """The prompt of every model call of the scenario, in order."""
        ...

    def restore(self, key: str) -> RestoreOutcome:
        """Whether an evicted item (a key from ``CallPrompt.evicted``) restores to its original bytes."""
        ...


def new_content(scenario: Scenario, budget: Budget, counter: TokenCounter) -> list[int]:
    """Tokens each model call is the first to see: the transcript items since the previous call.

    What any policy that shows a call's new evidence verbatim must send uncached at least
    once (see :func:`benchmarks.eval.metrics.suffix_ceiling`).
    """
    transcript = Transcript(scenario, budget, counter)
    out = []
    for position in scenario.calls:
        before = len(transcript.items)
        transcript._advance(position)
        out.append(sum(item.tokens for item in transcript.items[before:]))
    return out


# --------------------------------------------------------------------------- baselines


class RollingWindow(Transcript):
    """(b) The newest ``available`` tokens of the transcript, cut inside the oldest item kept."""

    name = "rolling-window"

    def prompts(self) -> Iterator[CallPrompt]:
        full_start = 0
        for position in self.run.calls:
            self._advance(position)
            room = self.available - self.head_tokens
            start = len(self.items)
            used = 0
            while start > full_start and used + self.items[start - 1].tokens <= room:
                start -= 1
                used += self.items[start].tokens
            blocks: list[Block] = []
            dropped = [item.index for item in self.items[full_start:start]]
            if start > 0 and room - used > 1:
                partial = self.items[start - 1]
                tail = self._tail(partial, room - used - 1)
                if tail is not None:
                    blocks.append(tail)
                if (tail is None or len(tail[0]) < len(partial.lines)) and partial.index not in dropped:
                    dropped.append(partial.index)
            blocks.extend(item.block() for item in self.items[start:])
            full_start = start
            yield self._prompt(blocks, self._evict(dropped))


class ToolClearing(Transcript):
    """(c) Anthropic-style ``clear_tool_uses``: clear old tool results past a trigger."""

    name = "tool-clearing"

    def __init__(
        self,
        scenario: Scenario,
        budget: Budget,
        counter: TokenCounter,
        *,
        trigger_share: float = 0.5,
        keep: int = 3,
        clear_at_least_share: float = 0.1,
        exclude_tools: tuple[str, ...] = (),
    ) -> None:
        super().__init__(scenario, budget, counter)
        self.trigger = int(self.available * trigger_share)
        self.keep = keep
        self.clear_at_least = int(self.available * clear_at_least_share)
        self.exclude = frozenset(exclude_tools)
        self._cleared_items: dict[int, TranscriptItem] = {}

    def _cleared(self, item: TranscriptItem) -> TranscriptItem:
        """The item as shown once cleared: its header line and the placeholder."""
        found = self._cleared_items.get(item.index)
        if found is None:
            text = f"{item.lines[0]}\n{PLACEHOLDER}"
            found = self._cleared_items[item.index] = self._item(
                item.index, text, r.Message(role="system", text="")
            )
        return found

    def _cost(self, item: TranscriptItem, cleared: set[int]) -> int:
        return self._cleared(item).tokens if item.index in cleared else item.tokens

    def prompts(self) -> Iterator[CallPrompt]:
        cleared: set[int] = set()
        start = 0
        for position in self.run.calls:
            self._advance(position)
            items = self.items
            total = self.head_tokens + sum(self._cost(item, cleared) for item in items[start:])
            newly: list[int] = []
            if total > self.trigger:
                results = [i for i in items[start:] if i.tool_result]
                candidates = results[: -self.keep] if self.keep else results
                reclaimed = 0
                for item in candidates:
                    if item.index in cleared or item.tool in self.exclude:
                        continue
                    newly.append(item.index)
                    reclaimed += item.tokens - self._cost(item, {item.index})
                    if self.clear_at_least and reclaimed >= self.clear_at_least:
                        break
                if reclaimed >= self.clear_at_least:
                    cleared.update(newly)
                    total -= reclaimed
                else:
                    # "If the API can't clear at least the specified amount, the strategy
                    # will not be applied": not worth breaking the prompt cache for.
                    newly = []
            dropped: list[int] = []
            while total > self.available and start < len(items) - 1:
                total -= self._cost(items[start], cleared)
                if items[start].index not in cleared:
                    dropped.append(items[start].index)
                start += 1
            blocks = [
                (self._cleared(item) if item.index in cleared else item).block() for item in items[start:]
            ]
            if total > self.available and items:
                last = items[-1]
                tail = self._tail(last, self.available - self.head_tokens)
                blocks = [tail] if tail else []
                dropped.append(last.index)
            yield self._prompt(blocks, self._evict(newly + dropped))


# --------------------------------------------------------------------------- holon


class HolonPolicy(HolonSimulation):
    """(d) holon: ``build_context`` over the fold of the ledger, as the runtime renders it
    (:class:`holon.simulate.HolonSimulation`, under the eval's cache key and agent id)."""

    name = "holon"

    def __init__(
        self,
        scenario: Scenario,
        budget: Budget,
        counter: TokenCounter,
        config: RenderConfig | None = None,
        *,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
    ) -> None:
        config = config or RenderConfig(prompt_cache_key="eval", estimator=counter.estimator.name)
        super().__init__(scenario, budget, counter, config, agent_id=AGENT, blob_threshold=blob_threshold)
        self.scenario = scenario


class HolonRfcLayout(HolonPolicy):
    """(d2) holon in the RFC's layout: working memory ends the cacheable prefix.

    Beside the default layout in every run, so the figures that chose it are the ones the
    eval reports (docs/context-rendering.md, *Layouts*).
    """

    name = "holon-rfc"

    def __init__(
        self,
        scenario: Scenario,
        budget: Budget,
        counter: TokenCounter,
        config: RenderConfig | None = None,
        *,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
    ) -> None:
        base = config or RenderConfig(prompt_cache_key="eval", estimator=counter.estimator.name)
        layout = msgspec.structs.replace(base, layout="rfc")
        super().__init__(scenario, budget, counter, layout, blob_threshold=blob_threshold)


POLICIES: Final = (FullHistory, RollingWindow, ToolClearing, HolonPolicy, HolonRfcLayout)
