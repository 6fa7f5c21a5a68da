"""One model call's exact prompt, as the cache models read it, and the token counter that costs it.

A :class:`CallPrompt` is the prompt text of one model call, kept as its lines with the
token cost of each line, the cache breakpoints the policy would mark, and the items the
policy has evicted (dropped, truncated or cleared) so far. Token costs come from one
:class:`TokenCounter` shared by every policy of a run, so every figure is counted the
same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from holon.context import DEFAULT_ESTIMATOR, get_estimator

__all__ = ["UNIT_START", "Block", "CallPrompt", "TokenCounter"]

#: How a line that starts a record's text begins in holon's prompts and rounds (its citation).
UNIT_START: Final = "[ledger:"


Block: TypeAlias = tuple[Sequence[str], int] | tuple[Sequence[str], int, Sequence[int]]
"""Lines of one prompt block and its tokens (optionally with per-line costs precomputed)."""


class TokenCounter:
    """Tokens with one estimator (``holon.context.get_estimator``), memoized by text.

    A prompt is assembled from *blocks* — a transcript item, or one of holon's sections —
    each counted whole, plus one token per line break joining two blocks: the estimators
    never merge tokens across a newline, and this is how holon's renderer counts its
    sections, so every policy is measured the same way. Within a block, the position of
    a line (needed by the cache models) is apportioned from per-line counts.
    """

    def __init__(self, estimator: str = DEFAULT_ESTIMATOR) -> None:
        self.estimator = get_estimator(estimator)
        self._memo: dict[str, int] = {}

    def count(self, text: str) -> int:
        n = self._memo.get(text)
        if n is None:
            n = self._memo[text] = self.estimator.count(text)
        return n

    def block_costs(self, lines: Sequence[str], tokens: int) -> list[int]:
        """Per-line costs of a block of ``tokens`` tokens; they sum to exactly ``tokens``.

        Each line gets its own count plus one for its line break; the last line absorbs
        the difference to the whole-block count (so cumulative positions are exact at
        block boundaries and approximate inside a block). When the block counts fewer
        tokens than its lines, the surplus comes off the last lines, none going below
        zero: positions never go back, which the cache models rely on.
        """
        return _absorb([self.count(line) + 1 for line in lines], tokens)

    def unit_costs(self, lines: Sequence[str], tokens: int) -> list[int]:
        """Per-line costs of one of holon's sections, unit by unit; they sum to ``tokens``.

        A line that starts with ``[ledger:`` starts a unit (a message, a tool call, a
        result with its output — one record), and each unit is apportioned as the round
        of that record is (:meth:`block_costs` of its text, plus its line break); only
        the section's last line absorbs the difference to the section's count. So a
        record reads at the same positions whether it was appended as a round or shown
        in a section rendered again, as the same text does for a provider's tokenizer.
        """
        out: list[int] = []
        start = 0
        for end in range(1, len(lines) + 1):
            if end == len(lines) or lines[end].startswith(UNIT_START):
                unit = lines[start:end]
                out.extend(self.block_costs(unit, self.count("\n".join(unit)) + 1))
                start = end
        return _absorb(out, tokens)

    def assemble(self, blocks: Sequence[Block]) -> tuple[list[str], list[int]]:
        """Lines and per-line costs of blocks joined by one line break each.

        A block is ``(lines, tokens)``, or ``(lines, tokens, costs)`` with its per-line
        costs (including the joining line break) already computed.
        """
        lines: list[str] = []
        costs: list[int] = []
        last = len(blocks) - 1
        for i, block in enumerate(blocks):
            lines.extend(block[0])
            if len(block) == 3 and i < last:
                costs.extend(block[2])
            else:
                costs.extend(self.block_costs(block[0], block[1] + (1 if i < last else 0)))
        return lines, costs


def _absorb(costs: list[int], tokens: int) -> list[int]:
    """``costs`` with the last line made to absorb the difference to ``tokens``.

    A surplus comes off the last lines, none going below zero: positions never go back,
    which the cache models rely on.
    """
    if costs:
        costs[-1] += tokens - sum(costs)
        i = len(costs) - 1
        while costs[i] < 0 and i > 0:
            costs[i - 1] += costs[i]
            costs[i] = 0
            i -= 1
    return costs


@dataclass(slots=True)
class CallPrompt:
    """One model call's prompt: exact lines, per-line token cost, breakpoints, evictions.

    - ``lines``: the prompt text is ``"\\n".join(lines)``.
    - ``costs``: tokens of each line including its trailing line break (see
      :meth:`TokenCounter.assemble`); ``tokens`` is their sum.
    - ``breakpoints``: line counts ``k`` where the policy marks a cache breakpoint (the
      prefix of ``k`` lines), in increasing order.
    - ``evicted``: keys of the items this policy has dropped, truncated or cleared in
      this prompt for the first time in the run (each item is counted once).
    - ``sections``: for a sectioned prompt (holon), each section's name and the line
      count at its end — used to report where the cacheable prefix breaks.
    - ``blocks``: line counts ``k`` where one content block of the provider request ends
      (a transcript item; one of holon's system blocks, its TurnScoped text up to a
      breakpoint, a round), in increasing order. Anthropic looks a cached prefix up at
      block boundaries only, so a breakpoint cache is read there. Empty: every line ends
      a block.
    """

    lines: list[str]
    costs: list[int]
    breakpoints: tuple[int, ...]
    evicted: tuple[str, ...] = ()
    sections: tuple[tuple[str, int], ...] = ()
    blocks: tuple[int, ...] = ()
    _text: str | None = field(default=None, repr=False)

    @property
    def tokens(self) -> int:
        return sum(self.costs)

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "\n".join(self.lines)
        return self._text
