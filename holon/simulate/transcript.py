"""What a chat-style agent tool sends: its transcript, whole, truncated oldest-first.

A :class:`Transcript` sees a run's evidence as a chat transcript
(:func:`~holon.simulate.transcript_text`): the latest system policy and tool definitions
first (never dropped), then one item per record, oldest first.
:class:`FullHistory` sends everything, truncated oldest-first (whole items) when it
exceeds the window, as a provider's automatic truncation does; if the newest item alone
is larger than the window, only its tail is kept. It is the stand-in for what the tool a
transcript came from sent (``holon simulate``) and the evaluation's ``full-history``
baseline.

Nothing a transcript evicts leaves a reference, so its evictions are not restorable.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

import msgspec

import holon.records as r
from holon.context import Budget
from holon.simulate.calls import transcript_text
from holon.simulate.model_calls import ModelCalls
from holon.simulate.prompts import Block, CallPrompt, TokenCounter

__all__ = ["FullHistory", "RestoreOutcome", "Transcript", "TranscriptItem"]

#: Whether an evicted item (a key from ``CallPrompt.evicted``) restores to its original bytes.
RestoreOutcome = Literal["restored", "mismatch", "no ref"]


@dataclass(slots=True)
class TranscriptItem:
    """One transcript item: the record it shows, its lines, its tokens plus its line break.

    ``costs`` apportions ``tokens`` over the lines (see ``TokenCounter.block_costs``).
    """

    index: int
    lines: list[str]
    tokens: int
    costs: list[int]
    tool_result: bool
    tool: str = ""

    def block(self) -> Block:
        return self.lines, self.tokens - 1, self.costs


class Transcript:
    """The chat transcript of a run, grown call by call (shared by the transcript policies).

    A subclass yields each call's prompt from :attr:`items`; the evaluation's baselines
    (benchmarks/eval/policies.py) are the others.
    """

    name = "transcript"

    def __init__(self, run: ModelCalls, budget: Budget, counter: TokenCounter) -> None:
        self.run = run
        self.available = budget.available
        self.counter = counter
        self.head: list[str] = []
        self.head_tokens = 0
        self.items: list[TranscriptItem] = []
        self._read = 0
        self._evicted: set[int] = set()

    def _advance(self, position: int) -> None:
        records = self.run.records
        while self._read < position:
            i = self._read
            body = records[i].body
            self._read += 1
            if isinstance(body, r.SystemPolicy):
                head = [body.text]
                if body.tools:
                    head.append("## Tools")
                    head.extend(
                        msgspec.json.encode(
                            {"name": t.name, "description": t.description, "parameters": t.parameters},
                            order="sorted",
                        ).decode()
                        for t in body.tools
                    )
                self.head = head
                self.head_tokens = self.counter.count("\n".join(head)) + 1
                continue
            text = transcript_text(body)
            if text is None:
                continue
            self.items.append(self._item(i, text, body))

    def _item(self, index: int, text: str, body: r.Body) -> TranscriptItem:
        lines = text.split("\n")
        tokens = self.counter.count(text) + 1
        tool = body.tool if isinstance(body, r.ToolResult) else ""
        costs = self.counter.block_costs(lines, tokens)
        return TranscriptItem(index, lines, tokens, costs, isinstance(body, r.ToolResult), tool)

    def _evict(self, indices: list[int]) -> tuple[str, ...]:
        """Keys of the items evicted now for the first time."""
        new = [i for i in indices if i not in self._evicted]
        self._evicted.update(new)
        return tuple(f"record:{i}" for i in new)

    def _prompt(self, blocks: list[Block], evicted: tuple[str, ...]) -> CallPrompt:
        if self.head:
            blocks = [(self.head, self.head_tokens - 1), *blocks]
        lines, costs = self.counter.assemble(blocks)
        marks = tuple(sorted({len(self.head), len(lines)} - {0}))
        # Each item is a content block of its own (a message, a tool use, a tool result).
        ends = tuple(accumulate(len(block[0]) for block in blocks))
        return CallPrompt(lines=lines, costs=costs, breakpoints=marks, evicted=evicted, blocks=ends)

    def _tail(self, item: TranscriptItem, room: int) -> Block | None:
        """The newest part of an item that fits in ``room`` tokens (``None`` if nothing does).

        Its tokens are the item's apportioned line costs (``TranscriptItem.costs``), so a cut item
        is counted consistently with the whole one.
        """
        n = len(item.lines)
        used = 0
        start = n
        while start > 0 and used + item.costs[start - 1] <= room:
            start -= 1
            used += item.costs[start]
        if start < n:
            return item.lines[start:], used - 1, item.costs[start:]
        # Not even the last line fits: keep the end of it.
        line = item.lines[-1]
        keep = min(len(line), max(0, room) * 2)
        while keep > 0 and self.counter.count(line[-keep:]) > room - 1:
            keep = keep * 3 // 4
        if keep <= 0:
            return None
        return [line[-keep:]], self.counter.count(line[-keep:])

    def restore(self, key: str) -> RestoreOutcome:
        # A chat transcript keeps no reference to what it dropped.
        return "no ref"


class FullHistory(Transcript):
    """The whole transcript, truncated oldest-first when it exceeds the window."""

    name = "full-history"

    def prompts(self) -> Iterator[CallPrompt]:
        start = 0
        window = 0  # tokens of items[start:]
        for position in self.run.calls:
            before = len(self.items)
            self._advance(position)
            window += sum(item.tokens for item in self.items[before:])
            dropped: list[int] = []
            while self.head_tokens + window > self.available and start < len(self.items) - 1:
                window -= self.items[start].tokens
                dropped.append(self.items[start].index)
                start += 1
            blocks = [item.block() for item in self.items[start:]]
            if self.head_tokens + window > self.available and self.items:
                last = self.items[-1]
                tail = self._tail(last, self.available - self.head_tokens)
                blocks = [tail] if tail else []
                dropped.append(last.index)
            yield self._prompt(blocks, self._evict(dropped))
