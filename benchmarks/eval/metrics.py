"""Metrics over the prompts of one policy on one scenario: tokens, facts, caching, evictions.

Two provider cache models, both fed every call's exact prompt in order:

- :class:`PrefixCache` — automatic prefix caching (OpenAI-style): the longest common
  prefix with the previous call, counted in whole blocks — nothing under ``minimum``
  (1,024) tokens, then ``step`` (128) token increments. Each call stores its own prefix
  (rounded down to a block); the tokens it adds to the cache are the *writes*.
- :class:`BreakpointCache` — Anthropic's ``cache_control`` model: a call reads the longest
  prefix that ends at a breakpoint of an earlier call (any earlier call: calls are
  assumed to be within the cache lifetime) and writes the prefix up to its own last
  breakpoint; a prefix under ``minimum`` tokens is never cached.

Comparing with the previous call only (prefix model) loses nothing for these policies:
their prompts change from the front or the middle, so an older prompt never shares a
longer prefix (tests/test_eval_metrics.py checks this against every earlier call).

Cost, in uncached-token equivalents: reads at 0.1x, writes at 1.25x, the rest at 1x.
Lines are compared whole; the tokens of a partly matching line are not counted as cached.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from benchmarks.eval.policies import Policy
from benchmarks.eval.scenario import LIVE_KINDS, STALE_KINDS, Scenario
from benchmarks.eval.trace import CallPrompt

__all__ = [
    "READ_PRICE",
    "WRITE_PRICE",
    "BreakpointCache",
    "CacheTotals",
    "PolicyRun",
    "PrefixCache",
    "block_floor",
    "common_prefix",
    "evaluate",
]

READ_PRICE: Final = 0.1
WRITE_PRICE: Final = 1.25


def block_floor(tokens: int, minimum: int = 1024, step: int = 128) -> int:
    """The cacheable part of a prefix of ``tokens`` tokens: 0 under ``minimum``, else whole steps."""
    if tokens < minimum:
        return 0
    return minimum + (tokens - minimum) // step * step


def common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """Number of leading lines two prompts share."""
    n = min(len(a), len(b))
    lo, hi = 0, n  # the answer is in [lo, hi]
    if list(a[:n]) == list(b[:n]):
        return n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if list(a[:mid]) == list(b[:mid]):
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class CacheTotals:
    """Summed over calls: prompt tokens, tokens read from cache, tokens written to it."""

    total: int = 0
    cached: int = 0
    written: int = 0
    per_call: list[int] = field(default_factory=list)  # cached tokens of each call

    def add(self, total: int, cached: int, written: int) -> None:
        self.total += total
        self.cached += cached
        self.written += written
        self.per_call.append(cached)

    @property
    def share(self) -> float:
        return self.cached / self.total if self.total else 0.0

    @property
    def cost(self) -> float:
        """Input cost in uncached-token equivalents (reads 0.1x, writes 1.25x, rest 1x)."""
        rest = self.total - self.cached - self.written
        return READ_PRICE * self.cached + WRITE_PRICE * self.written + rest


def _cumulative(costs: Sequence[int]) -> list[int]:
    out = [0]
    total = 0
    for c in costs:
        total += c
        out.append(total)
    return out


class PrefixCache:
    """Automatic prefix caching in whole blocks against the previous call."""

    def __init__(self, minimum: int = 1024, step: int = 128) -> None:
        self.minimum = minimum
        self.step = step
        self.totals = CacheTotals()
        self._previous: list[str] = []
        self._stored = 0

    def call(self, prompt: CallPrompt) -> int:
        """Account one call; returns the tokens read from cache."""
        cum = _cumulative(prompt.costs)
        shared = common_prefix(self._previous, prompt.lines)
        cached = min(block_floor(cum[shared], self.minimum, self.step), self._stored)
        stored = block_floor(cum[-1], self.minimum, self.step)
        self.totals.add(cum[-1], cached, max(0, stored - cached))
        self._previous = prompt.lines
        self._stored = stored
        return cached


class BreakpointCache:
    """Anthropic-style caching at explicit breakpoints (prefix hashes of earlier calls)."""

    def __init__(self, minimum: int = 1024) -> None:
        self.minimum = minimum
        self.totals = CacheTotals()
        self._store: set[int] = set()  # chain hashes of prefixes written so far
        self._lines: list[str] = []
        self._chain: list[int] = []

    def call(self, prompt: CallPrompt) -> int:
        cum = _cumulative(prompt.costs)
        shared = common_prefix(self._lines, prompt.lines)
        # chain[k-1] identifies the prefix of k lines; reuse the shared part of the last chain.
        chain = self._chain[:shared]
        h = chain[-1] if chain else 0
        for line in prompt.lines[shared:]:
            h = hash((h, line))
            chain.append(h)
        marks = [k for k in prompt.breakpoints if cum[k] >= self.minimum]
        read = 0
        if marks:
            for k in range(marks[-1], 0, -1):
                if chain[k - 1] in self._store:
                    read = k
                    break
        cached = cum[read]
        written = 0
        if marks and marks[-1] > read:
            written = cum[marks[-1]] - cached
            self._store.update(chain[k - 1] for k in marks if k > read)
        self.totals.add(cum[-1], cached, written)
        self._lines = prompt.lines
        self._chain = chain
        return cached


@dataclass
class PolicyRun:
    """Every figure of one policy on one scenario at one budget."""

    policy: str
    scenario: str
    window: int
    available: int
    tokens: list[int] = field(default_factory=list)
    prefix: CacheTotals = field(default_factory=CacheTotals)
    breakpoints: CacheTotals = field(default_factory=CacheTotals)
    required: dict[str, int] = field(default_factory=dict)  # fact kind -> (call, fact) pairs required
    retained: dict[str, int] = field(default_factory=dict)
    first_loss: dict[str, int] = field(default_factory=dict)  # fact kind -> first call that lost one
    stale_calls: int = 0  # calls that had a stale fact to avoid
    carried_calls: int = 0  # ... and carried at least one over
    carried: dict[str, int] = field(default_factory=dict)  # stale kind -> (call, fact) pairs carried
    evictions: int = 0
    restores: dict[str, int] = field(default_factory=dict)
    over_budget: int = 0

    @property
    def calls(self) -> int:
        return len(self.tokens)

    @property
    def max_tokens(self) -> int:
        return max(self.tokens, default=0)

    @property
    def median_tokens(self) -> float:
        return statistics.median(self.tokens) if self.tokens else 0.0

    def retention(self, kind: str | None = None) -> float | None:
        """Share of required (call, fact) pairs whose fact was in the prompt (all kinds if None)."""
        kinds = [kind] if kind else list(self.required)
        need = sum(self.required.get(k, 0) for k in kinds)
        if need == 0:
            return None
        return sum(self.retained.get(k, 0) for k in kinds) / need

    @property
    def carry_over(self) -> float | None:
        """Share of calls with a stale fact to avoid whose prompt contained one."""
        return self.carried_calls / self.stale_calls if self.stale_calls else None

    @property
    def evictions_per_100(self) -> float:
        return 100 * self.evictions / self.calls if self.calls else 0.0


def evaluate(policy: Policy, scenario: Scenario, *, window: int, available: int) -> PolicyRun:
    """Run a policy over every call of a scenario and collect its figures."""
    run = PolicyRun(policy=policy.name, scenario=scenario.name, window=window, available=available)
    prefix = PrefixCache()
    breakpoints = BreakpointCache()
    facts = scenario.facts
    for k in (*LIVE_KINDS,):
        run.required[k] = 0
        run.retained[k] = 0
    for k in STALE_KINDS:
        run.carried[k] = 0
    outcomes: dict[str, int] = {"restored": 0, "mismatch": 0, "no ref": 0}
    for call, prompt in enumerate(policy.prompts()):
        tokens = prompt.tokens
        run.tokens.append(tokens)
        run.over_budget += tokens > available
        prefix.call(prompt)
        breakpoints.call(prompt)
        if facts:
            text = prompt.text
            for fid in scenario.live[call]:
                fact = facts[fid]
                run.required[fact.kind] += 1
                if fact.text in text:
                    run.retained[fact.kind] += 1
                else:
                    run.first_loss.setdefault(fact.kind, call)
            stale = scenario.stale[call]
            if stale:
                run.stale_calls += 1
                hit = False
                for fid in stale:
                    if facts[fid].text in text:
                        run.carried[facts[fid].kind] += 1
                        hit = True
                run.carried_calls += hit
        for key in prompt.evicted:
            run.evictions += 1
            outcomes[policy.restore(key)] += 1
    run.prefix = prefix.totals
    run.breakpoints = breakpoints.totals
    run.restores = dict(outcomes)
    return run
