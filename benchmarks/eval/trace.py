"""What every policy produces and every metric reads: one model call's exact prompt.

A :class:`CallPrompt` is the prompt text of one model call, kept as its lines with the
token cost of each line, the cache breakpoints the policy would mark, and the items the
policy has evicted (dropped, truncated or cleared) so far. Token costs come from one
:class:`TokenCounter` shared by all policies, so every figure is counted the same way.

:func:`call_positions` says where an agent makes its model calls in a record stream: a
call precedes each run of model output (an assistant message, a tool call, a plan or
decision the agent declares), after the input it answers. The generated scenarios and
the imported real transcripts go through the same rule. A sub-agent's own records (a
message, tool call or result carrying ``task_id``, holon.records schema 4) are its work,
not the run's agent's: no call of the run comes before them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias

import holon.records as r
from holon.context import DEFAULT_ESTIMATOR, get_estimator
from holon.context.rounds import is_model_output, round_text

__all__ = [
    "Block",
    "CallPrompt",
    "UNIT_START",
    "TokenCounter",
    "call_positions",
    "is_model_output",
    "transcript_text",
]

#: How a line that starts a record's text begins in holon's prompts and rounds (its citation).
UNIT_START: Final = "[ledger:"
# Records that neither answer nor ask: they never start or end a run of output.
_NEUTRAL_KINDS: Final = frozenset({r.ExecutionEnvironment.KIND, r.TurnEnded.KIND})


def call_positions(records: Sequence[r.Record]) -> tuple[int, ...]:
    """Indices ``p`` such that a model call is made with ``records[:p]`` in the ledger.

    A call happens right before a model output whose previous (non-neutral) record was
    not itself output of the same response — e.g. an assistant message followed by two
    tool calls is one call, and each tool result is answered by the next call.
    """
    positions: list[int] = []
    previous_output = False
    for i, record in enumerate(records):
        kind = record.kind
        if kind in _NEUTRAL_KINDS or _subagent_work(record.body):
            if kind == r.TurnEnded.KIND:
                previous_output = False
            continue
        output = is_model_output(record.body)
        if output and not previous_output:
            positions.append(i)
        previous_output = output
    return tuple(positions)


def _subagent_work(body: r.Body) -> bool:
    """A sub-agent's own record: one carrying ``task_id`` (a brief's names the task it reports on)."""
    return not isinstance(body, r.Brief) and getattr(body, "task_id", None) is not None


def transcript_text(body: r.Body) -> str | None:
    """How an evidence record reads in a plain conversation transcript (``None``: not shown).

    This is what the baseline policies put in their prompts: every record as the line(s)
    a chat-style agent would have had in its message list — the user's input, tool calls
    with their arguments, tool results with their full output, plans and decisions as the
    agent's tool calls declared them (``assistant → ``). The lines are those holon uses
    for the same record (``holon.context.rounds.round_text``), without its ``[ledger:N]``
    citations, so every policy pays the same tokens for the same evidence.
    """
    if isinstance(body, r.TurnStarted):
        return f"user ({body.trigger}): {body.input}" if body.input is not None else None
    text = round_text(r.Record(body=body, ts=0, seq=0), cite=False)
    if text is None or isinstance(body, r.Message) or not is_model_output(body):
        return text
    return f"assistant → {text}"


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
