"""Provider prompt-cache models: which tokens of each call a provider would read from its cache.

Two provider cache models, both fed every call's exact prompt in order, and both
matching against *every* earlier call (calls are assumed to fall within the cache
lifetime), as providers do:

- :class:`PrefixCache` — automatic prefix caching (OpenAI-style): the longest prefix the
  call shares with what an earlier call stored, counted in whole blocks — nothing under
  ``minimum`` (1,024) tokens, then ``step`` (128) token increments. Each call stores its
  own prefix (rounded down to a block); the tokens it adds to the cache are the *writes*.
- :class:`BreakpointCache` — Anthropic's ``cache_control`` model: a call reads the longest
  prefix that ends at a breakpoint of an earlier call and at a content-block boundary of
  its own (Anthropic matches whole blocks: a prefix that ends inside one of the call's
  blocks is not found), and writes the prefix up to its own last breakpoint; a prefix
  under ``minimum`` tokens is never cached.

A prefix is looked up by its identity (:class:`PrefixHashes`), so a call that returns to
an older prompt's prefix after a different one in between is served as a provider would
serve it. tests/test_eval_metrics.py checks both models against brute-force stores; the evaluation
(benchmarks/eval) and ``holon simulate`` both account their calls with them.

Cost, in uncached-token equivalents: reads at 0.1x, writes at 1.25x, the rest at 1x.
Lines are compared whole; the tokens of a partly matching line are not counted as cached.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Final

from holon.simulate.prompts import CallPrompt

__all__ = [
    "READ_PRICE",
    "WRITE_PRICE",
    "BreakpointCache",
    "CacheTotals",
    "PrefixCache",
    "PrefixHashes",
    "block_floor",
    "common_prefix",
    "cumulative",
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


def cumulative(costs: Sequence[int]) -> list[int]:
    """Token positions of a prompt's line boundaries: ``[0, costs[0], costs[0] + costs[1], ...]``."""
    return [0, *accumulate(costs)]


class PrefixHashes:
    """Prefix identities of a run's prompts: ``of(lines)[k]`` stands for ``lines[:k]``.

    Each distinct line gets an int id in order of first sight, and the identity of a
    prefix is the chain ``hash((identity of lines[:k-1], id of lines[k-1]))``. Ints and
    tuples of ints hash alike in every process (``PYTHONHASHSEED`` only salts strings),
    so the figures are deterministic. The chain is reused along the lines a prompt
    shares with the previous one (:attr:`shared` after each call), so a call costs what
    it adds.
    """

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._lines: Sequence[str] = []
        self._chain: list[int] = [0]
        self.shared = 0

    def of(self, lines: Sequence[str]) -> list[int]:
        shared = self.shared = common_prefix(self._lines, lines)
        chain = self._chain[: shared + 1]
        ids = self._ids
        identity = chain[-1]
        for line in lines[shared:]:
            id_ = ids.get(line)
            if id_ is None:
                id_ = ids[line] = len(ids)
            identity = hash((identity, id_))
            chain.append(identity)
        self._lines, self._chain = lines, chain
        return chain


class PrefixCache:
    """Automatic prefix caching in whole blocks against every earlier call.

    The store holds one key per cached block boundary ``b`` of each call: ``b`` with the
    identity of the shortest line prefix that holds ``b`` tokens. A call reads up to ``b``
    exactly when an earlier call stored that key: it stored ``b``, and the lines the two
    share hold ``b`` tokens in both calls' counts (the count of a shared last line can
    differ, when it ends a block in one call only). A hit at ``b`` implies hits at every
    smaller boundary (the earlier call stored those too), so the scan stops at the first
    miss. Line costs are never negative, so positions only grow and can be bisected.
    """

    def __init__(self, minimum: int = 1024, step: int = 128) -> None:
        self.minimum = minimum
        self.step = step
        self.totals = CacheTotals()
        self._hashes = PrefixHashes()
        self._store: set[int] = set()

    def call(
        self, prompt: CallPrompt, cum: Sequence[int] | None = None, chain: Sequence[int] | None = None
    ) -> int:
        """Account one call; returns the tokens read from cache.

        ``cum`` (cumulative line costs) and ``chain`` (the prompt's prefix identities from
        one :class:`PrefixHashes` per run) may be passed in when already computed.
        """
        cum = cumulative(prompt.costs) if cum is None else cum
        chain = self._hashes.of(prompt.lines) if chain is None else chain
        store = self._store
        total = cum[-1]
        boundary = self.minimum
        cached = 0
        while boundary <= total and hash((boundary, chain[bisect_left(cum, boundary)])) in store:
            cached = boundary
            boundary += self.step
        stored = block_floor(total, self.minimum, self.step)
        while boundary <= stored:
            store.add(hash((boundary, chain[bisect_left(cum, boundary)])))
            boundary += self.step
        self.totals.add(total, cached, max(0, stored - cached))
        return cached


class BreakpointCache:
    """Anthropic-style caching at explicit breakpoints.

    Cache entries are the identities of prefixes written at earlier calls' breakpoints;
    a call reads the longest entry that is a prefix of it, ends at one of its block
    boundaries (:attr:`CallPrompt.blocks`) and at or before its own last breakpoint.
    """

    def __init__(self, minimum: int = 1024) -> None:
        self.minimum = minimum
        self.totals = CacheTotals()
        self._hashes = PrefixHashes()
        self._entries: set[int] = set()

    def call(
        self, prompt: CallPrompt, cum: Sequence[int] | None = None, chain: Sequence[int] | None = None
    ) -> int:
        cum = cumulative(prompt.costs) if cum is None else cum
        chain = self._hashes.of(prompt.lines) if chain is None else chain
        entries = self._entries
        marks = [k for k in prompt.breakpoints if cum[k] >= self.minimum]
        read = 0
        if marks:
            last = marks[-1]
            ends = reversed(prompt.blocks) if prompt.blocks else range(last, 0, -1)
            read = next((k for k in ends if k <= last and chain[k] in entries), 0)
        cached = cum[read]
        written = 0
        if marks and marks[-1] > read:
            written = cum[marks[-1]] - cached
            entries.update(chain[k] for k in marks if k > read)
        self.totals.add(cum[-1], cached, written)
        return cached
