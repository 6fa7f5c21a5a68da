"""Metrics over the prompts of one policy on one scenario: tokens, facts, caching, evictions.

Caching is priced by the two provider cache models of :mod:`holon.simulate.cache`
(:class:`PrefixCache`, automatic prefix caching in whole blocks; :class:`BreakpointCache`,
Anthropic's ``cache_control``), shared with ``holon simulate``; that module says how each
reads and writes, and tests/test_eval_metrics.py checks both against brute-force stores.

Cost, in uncached-token equivalents: reads at 0.1x, writes at 1.25x, the rest at 1x.
Lines are compared whole; the tokens of a partly matching line are not counted as cached.

Facts are found by their text in the prompt (:func:`carried` has the stale rule), answer
evidence likewise, at the calls that ask about it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from benchmarks.eval.policies import Policy
from benchmarks.eval.scenario import LIVE_KINDS, STALE_KINDS, Fact, Scenario
from holon.simulate import (
    READ_PRICE,
    WRITE_PRICE,
    BreakpointCache,
    CacheTotals,
    PrefixCache,
    PrefixHashes,
    block_floor,
    common_prefix,
    cumulative,
)

__all__ = [
    "READ_PRICE",
    "WRITE_PRICE",
    "BreakpointCache",
    "CacheTotals",
    "PolicyRun",
    "PrefixCache",
    "PrefixHashes",
    "block_floor",
    "carried",
    "common_prefix",
    "evaluate",
    "suffix_ceiling",
    "suffix_share",
]

#: The sections of a holon prompt before its history that change only at a move or an
#: epoch (the recitation layout's head): what a suffix-history layout keeps cached.
HEAD_SECTIONS: Final = frozenset({"system", "tools", "context_summary", "episodes", "mandate"})


#: The shares of the history's room a move may keep, for :func:`suffix_ceiling`.
KEEP_SHARES: Final = tuple(k / 10 for k in range(10))


def suffix_share(
    new: Sequence[int],
    heads: Sequence[int],
    available: int,
    keep: float,
    *,
    minimum: int = 1024,
    step: int = 128,
) -> float:
    """The cached share (prefix blocks) of a layout whose history is a suffix of the run.

    At call ``k`` it sends a head of ``heads[k]`` tokens, always read from the cache, then
    the history — each call's ``new[k]`` tokens, in order — and nothing after it, at most
    ``available`` tokens in all. When the next call's new tokens do not fit, the history
    moves: it keeps the newest calls' tokens up to ``keep`` of the room after the head
    (sent again, uncached) and starts after them.
    """
    cached = total = 0
    shown: list[int] = []  # the tokens of each call the history holds
    size = 0  # tokens of the previous call's prompt
    for k, (tokens, head) in enumerate(zip(new, heads, strict=True)):
        if k and size + tokens <= available:
            cached += block_floor(size, minimum, step)
            shown.append(tokens)
        else:
            room = int(keep * max(0, available - head))
            kept: list[int] = []
            for item in reversed(shown):
                if sum(kept) + item > room or head + sum(kept) + item + tokens > available:
                    break
                kept.append(item)
            shown = [*reversed(kept), tokens]
            cached += block_floor(head, minimum, step) if k else 0
        size = head + sum(shown)
        total += size
    return cached / total if total else 0.0


def suffix_ceiling(new: Sequence[int], heads: Sequence[int], available: int) -> float:
    """The best cached share of the suffix-history layouts of :func:`suffix_share`.

    Every policy here shows a suffix of the run after its head, so each call's new
    evidence is sent once uncached and a move sends what the history keeps again. The
    best such layout, with holon's own head taken as always cached and nothing after the
    history, over the shares of the room a move keeps (:data:`KEEP_SHARES`) — at the
    budgets measured, keeping nothing, which puts the next move furthest away. No policy
    with the same head, budget and evidence caches much more: what it would need is to
    keep old history in place while the newest is left out.
    """
    return max(suffix_share(new, heads, available, keep) for keep in KEEP_SHARES)


@dataclass
class PolicyRun:
    """Every figure of one policy on one scenario at one budget."""

    policy: str
    scenario: str
    window: int
    available: int
    family: str = "generated"
    tokens: list[int] = field(default_factory=list)
    prefix: CacheTotals = field(default_factory=CacheTotals)
    breakpoints: CacheTotals = field(default_factory=CacheTotals)
    required: dict[str, int] = field(default_factory=dict)  # fact kind -> (call, fact) pairs required
    retained: dict[str, int] = field(default_factory=dict)
    first_loss: dict[str, int] = field(default_factory=dict)  # fact kind -> first call that lost one
    stale_calls: int = 0  # calls that had a stale fact to avoid
    carried_calls: int = 0  # ... and carried at least one over
    carried: dict[str, int] = field(default_factory=dict)  # stale kind -> (call, fact) pairs carried
    avoid: dict[str, int] = field(default_factory=dict)  # stale kind -> (call, fact) pairs to avoid
    evidence_required: int = 0  # (call, evidence) pairs asked about
    evidence_found: int = 0  # ... whose evidence was in the prompt
    evictions: int = 0
    restores: dict[str, int] = field(default_factory=dict)
    over_budget: int = 0
    # For sectioned prompts: (section where the prefix shared with the previous call ends,
    # whether the call is its turn's first) -> [calls, prompt tokens after that point].
    breaks: dict[tuple[str, bool], list[int]] = field(default_factory=dict)
    # For sectioned prompts: the tokens of each call's head (:data:`HEAD_SECTIONS`), and the
    # best cached share a layout with that head could reach (:func:`suffix_ceiling`).
    heads: list[int] = field(default_factory=list)
    ceiling: float | None = None

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
    def evidence_share(self) -> float | None:
        """Share of (call, evidence) pairs asked about whose evidence was in the prompt."""
        return self.evidence_found / self.evidence_required if self.evidence_required else None

    @property
    def evictions_per_100(self) -> float:
        return 100 * self.evictions / self.calls if self.calls else 0.0


def carried(fact: Fact, text: str, facts: Sequence[Fact]) -> bool:
    """Whether a prompt ``text`` carries the stale ``fact`` over as if it were current.

    Its text is in the prompt — and, for a fact superseded by another (an instruction by
    its correction, a task result by the newer run's), the superseding text does not
    appear after its last occurrence: an instruction followed by its correction is read
    as corrected.
    """
    at = text.rfind(fact.text)
    if at < 0:
        return False
    if fact.superseded_by is None:
        return True
    return text.find(facts[fact.superseded_by].text, at + len(fact.text)) < 0


def evaluate(policy: Policy, scenario: Scenario, *, window: int, available: int) -> PolicyRun:
    """Run a policy over every call of a scenario and collect its figures."""
    run = PolicyRun(
        policy=policy.name, scenario=scenario.name, window=window, available=available, family=scenario.family
    )
    prefix = PrefixCache()
    breakpoints = BreakpointCache()
    hashes = PrefixHashes()
    facts = scenario.facts
    for k in LIVE_KINDS:
        run.required[k] = 0
        run.retained[k] = 0
    for k in STALE_KINDS:
        run.carried[k] = 0
        run.avoid[k] = 0
    outcomes: dict[str, int] = {"restored": 0, "mismatch": 0, "no ref": 0}
    # The turn of each call: that of the model output it is made before.
    turns = [scenario.records[p].turn if p < len(scenario.records) else None for p in scenario.calls]
    for call, prompt in enumerate(policy.prompts()):
        tokens = prompt.tokens
        run.tokens.append(tokens)
        run.over_budget += tokens > available
        cum = cumulative(prompt.costs)
        chain = hashes.of(prompt.lines)
        prefix.call(prompt, cum, chain)
        breakpoints.call(prompt, cum, chain)
        shared = hashes.shared  # lines in common with the previous call
        if prompt.sections:
            head_end = 0  # lines of the head: the sections before the first that is not
            for name, end in prompt.sections:
                if name not in HEAD_SECTIONS:
                    break
                head_end = end
            run.heads.append(cum[head_end])
        if prompt.sections and call > 0:
            where = next((name for name, end in prompt.sections if shared < end), "(identical)")
            first = call < len(turns) and turns[call] != turns[call - 1]
            tally = run.breaks.setdefault((where, first), [0, 0])
            tally[0] += 1
            tally[1] += cum[-1] - cum[shared]
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
                    fact = facts[fid]
                    run.avoid[fact.kind] += 1
                    if carried(fact, text, facts):
                        run.carried[fact.kind] += 1
                        hit = True
                run.carried_calls += hit
            if scenario.evidence:
                for fid in scenario.evidence[call]:
                    run.evidence_required += 1
                    run.evidence_found += facts[fid].text in text
        for key in prompt.evicted:
            run.evictions += 1
            outcomes[policy.restore(key)] += 1
    run.prefix = prefix.totals
    run.breakpoints = breakpoints.totals
    run.restores = dict(outcomes)
    return run
