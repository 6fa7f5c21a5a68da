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
- ``holon`` — what ``holon.Agent`` sends (``Turn.context()`` / ``Turn.messages()``):
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

Nothing a baseline evicts leaves a reference, so its evictions are not restorable. holon's
evictions are the refs of its assembly plan and every ``restore with ref`` placeholder in
the text, one per evidence record however many refs name it (a large tool result's blob
and its ledger record); each is restored through a :class:`~holon.context.RefSource` over
the ledger records and checked byte for byte against the original evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Final, Literal, Protocol

import blake3
import msgspec

import holon.records as r
from benchmarks.eval.scenario import Scenario
from benchmarks.eval.trace import Block, CallPrompt, TokenCounter, transcript_text
from holon.context import (
    Budget,
    EpisodeIndex,
    EvidenceBuffer,
    RenderConfig,
    build_context,
    prompt_rendered,
    restore,
    restore_bytes,
)
from holon.context.rounds import round_text, rounds_fit
from holon.context.sections import section_stability
from holon.errors import HolonError, RefNotFound
from holon.ledger.blobs import BLOB_PREVIEW_CHARS
from holon.ledger.store import DEFAULT_BLOB_THRESHOLD
from holon.projections import (
    ProjectionState,
    apply,
    initial_state,
    post_turn_refresh,
    refresh_before_prompt,
)

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

RestoreOutcome = Literal["restored", "mismatch", "no ref"]

AGENT: Final = "eval-agent"
PLACEHOLDER: Final = "[tool result cleared]"
_REF_IN_TEXT: Final = re.compile(r"restore with ref ((?:ledger|blob|episode):[0-9a-f]+)")


class Policy(Protocol):
    """A context policy bound to one scenario and budget."""

    name: str

    def prompts(self) -> Iterator[CallPrompt]:
        """The prompt of every model call of the scenario, in order."""
        ...

    def restore(self, key: str) -> RestoreOutcome:
        """Whether an evicted item (a key from ``CallPrompt.evicted``) restores to its original bytes."""
        ...


# --------------------------------------------------------------------------- baselines


@dataclass(slots=True)
class _Item:
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


class _Transcript:
    """The chat transcript of a scenario, grown call by call (shared by the baselines)."""

    name = "transcript"

    def __init__(self, scenario: Scenario, budget: Budget, counter: TokenCounter) -> None:
        self.scenario = scenario
        self.available = budget.available
        self.counter = counter
        self.head: list[str] = []
        self.head_tokens = 0
        self.items: list[_Item] = []
        self._read = 0
        self._evicted: set[int] = set()

    def _advance(self, position: int) -> None:
        records = self.scenario.records
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

    def _item(self, index: int, text: str, body: r.Body) -> _Item:
        lines = text.split("\n")
        tokens = self.counter.count(text) + 1
        tool = body.tool if isinstance(body, r.ToolResult) else ""
        costs = self.counter.block_costs(lines, tokens)
        return _Item(index, lines, tokens, costs, isinstance(body, r.ToolResult), tool)

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

    def _tail(self, item: _Item, room: int) -> Block | None:
        """The newest part of an item that fits in ``room`` tokens (``None`` if nothing does).

        Its tokens are the item's apportioned line costs (``_Item.costs``), so a cut item
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


def new_content(scenario: Scenario, budget: Budget, counter: TokenCounter) -> list[int]:
    """Tokens each model call is the first to see: the transcript items since the previous call.

    What any policy that shows a call's new evidence verbatim must send uncached at least
    once (see :func:`benchmarks.eval.metrics.suffix_ceiling`).
    """
    transcript = _Transcript(scenario, budget, counter)
    out = []
    for position in scenario.calls:
        before = len(transcript.items)
        transcript._advance(position)
        out.append(sum(item.tokens for item in transcript.items[before:]))
    return out


class FullHistory(_Transcript):
    """(a) The whole transcript, truncated oldest-first when it exceeds the window."""

    name = "full-history"

    def prompts(self) -> Iterator[CallPrompt]:
        start = 0
        window = 0  # tokens of items[start:]
        for position in self.scenario.calls:
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


class RollingWindow(_Transcript):
    """(b) The newest ``available`` tokens of the transcript, cut inside the oldest item kept."""

    name = "rolling-window"

    def prompts(self) -> Iterator[CallPrompt]:
        full_start = 0
        for position in self.scenario.calls:
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


class ToolClearing(_Transcript):
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
        self._cleared_items: dict[int, _Item] = {}

    def _cleared(self, item: _Item) -> _Item:
        """The item as shown once cleared: its header line and the placeholder."""
        found = self._cleared_items.get(item.index)
        if found is None:
            text = f"{item.lines[0]}\n{PLACEHOLDER}"
            found = self._cleared_items[item.index] = self._item(
                item.index, text, r.Message(role="system", text="")
            )
        return found

    def _cost(self, item: _Item, cleared: set[int]) -> int:
        return self._cleared(item).tokens if item.index in cleared else item.tokens

    def prompts(self) -> Iterator[CallPrompt]:
        cleared: set[int] = set()
        start = 0
        for position in self.scenario.calls:
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


class _LedgerSource:
    """A RefSource over the in-memory ledger, its blob store and its episode index."""

    def __init__(self, records: list[r.Record], blobs: dict[str, bytes], index: EpisodeIndex) -> None:
        self.records = records
        self.blobs = blobs
        self.index = index

    def record(self, seq: int) -> r.Record:
        if not 0 <= seq < len(self.records):
            raise RefNotFound(f"ledger:{seq} is past the end of the ledger")
        return self.records[seq]

    def blob(self, blob_hash: str) -> bytes:
        try:
            return self.blobs[blob_hash]
        except KeyError:
            raise RefNotFound(f"blob:{blob_hash} is not in the blob store") from None

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
        found = self.index.get(episode_id)
        if found is None:
            raise RefNotFound(f"episode:{episode_id} is not archived")
        return found


class HolonPolicy:
    """(d) holon: ``build_context`` over the fold of the ledger, as the runtime renders it."""

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
        self.scenario = scenario
        self.budget = budget
        self.counter = counter
        self.config = config or RenderConfig(prompt_cache_key="eval", estimator=counter.estimator.name)
        self.blob_threshold = blob_threshold
        self.records: list[r.Record] = []
        self.blobs: dict[str, bytes] = {}
        self.index = EpisodeIndex()
        self.source = _LedgerSource(self.records, self.blobs, self.index)
        self.state: ProjectionState = initial_state()
        # The view of the ledger the history is read from, as the runtime keeps it (a
        # record's seq is its index in ``records``; blobs are read from ``blobs``).
        self.evidence = EvidenceBuffer(
            older=lambda first, end: self.records[first:end], blob=self.blobs.__getitem__
        )
        self.evidence_of: dict[int, int] = {}  # ledger seq -> scenario record index
        self.blob_origin: dict[str, int] = {}  # blob hash -> scenario record index
        self.prompt_tokens: list[int] = []  # build_context's own total per call
        self._seen: set[str] = set()  # every ref a prompt left
        self._evicted: set[str] = set()  # what they name (see _evidence), each counted once

    def _append(self, body: r.Body, ts: int, turn: int | None) -> int:
        seq = len(self.records)
        record = r.Record(body=body, ts=ts, turn=turn, seq=seq)
        self.records.append(record)
        self.state = apply(self.state, record)
        self.evidence.add(record)
        return seq

    def _place(self, body: r.Body) -> r.Body:
        """Move a large output to the blob store, as ``Ledger.append`` does."""
        if not isinstance(body, r.ToolResult | r.TaskResult) or body.blob is not None:
            return body
        data = body.output.encode()
        if len(data) <= self.blob_threshold:
            return body
        digest = blake3.blake3(data).hexdigest()
        self.blobs[digest] = data
        blob = r.BlobRef(
            hash=digest,
            size=len(data),
            preview=body.output[:BLOB_PREVIEW_CHARS],
            tail=body.output[-BLOB_PREVIEW_CHARS:],
        )
        return msgspec.structs.replace(body, output="", blob=blob)

    def _feed(self, record: r.Record, index: int) -> None:
        body = self._place(record.body)
        seq = self._append(body, record.ts, record.turn)
        self.evidence_of[seq] = index
        if isinstance(body, r.ToolResult | r.TaskResult) and body.blob is not None:
            self.blob_origin.setdefault(body.blob.hash, index)
        if record.kind == r.TurnEnded.KIND:
            for derived in post_turn_refresh(self.state):
                self._append(derived.body, derived.ts, derived.turn)
            # Keep the incremental episode index in step with the archive, as the runtime does.
            archive = self.state.memory.archive
            self.index.extend(archive.get(i) for i in range(len(self.index), archive.count))

    def _render(self) -> tuple[CallPrompt, int]:
        """Render the prompt now (appending its record): the call prompt and its tokens."""
        prompt = build_context(
            self.state, self.budget, self.config, agent_id=AGENT, index=self.index, history=self.evidence
        )
        self.prompt_tokens.append(prompt.total_tokens)
        self._append(
            prompt_rendered(prompt),
            self.records[-1].ts,
            self.state.runtime.turn.index if self.state.runtime.turn else None,
        )
        # One block per section, counted as the renderer counted it (apportioned record
        # by record inside, as rounds are); the blank line of each separator belongs to
        # the section before it (one token per separator).
        lines: list[str] = []
        costs: list[int] = []
        marks: list[int] = []
        ends: list[tuple[str, int]] = []
        # The request's content blocks (holon.context.adapters.to_anthropic_messages): one
        # system block per Stable and AgentScoped section, and the TurnScoped text cut
        # after each breakpoint and at each section's cuts (the history: before each
        # turn's first unit).
        boundaries: list[int] = []
        last_section = len(prompt.sections) - 1
        for i, section in enumerate(prompt.sections):
            block = section.text.split("\n")
            # A cut is the offset of a line break: the lines before it end a block.
            boundaries.extend(len(lines) + section.text.count("\n", 0, cut) + 1 for cut in section.cuts)
            lines.extend(block)
            if section.breakpoint:
                marks.append(len(lines))
            if section.stability != "turn" or section.breakpoint or i == last_section:
                boundaries.append(len(lines))
            ends.append((section.name, len(lines)))
            tokens = section.tokens
            if i < last_section:
                block.append("")
                lines.append("")
                tokens += 1
            costs.extend(self.counter.unit_costs(block, tokens))
        refs = dict.fromkeys(prompt.plan.evicted_refs)
        refs.update(dict.fromkeys(_REF_IN_TEXT.findall(prompt.text)))
        evicted: list[str] = []
        for ref in refs:
            if ref in self._seen:
                continue
            self._seen.add(ref)
            item = self._evidence(ref)
            if item not in self._evicted:
                self._evicted.add(item)
                evicted.append(ref)
            elif self.restore(ref) != "restored":
                evicted.append(ref)  # its record was counted; a ref that fails is still reported
        call = CallPrompt(
            lines=lines,
            costs=costs,
            breakpoints=tuple(marks),
            evicted=tuple(evicted),
            sections=tuple(ends),
            blocks=tuple(boundaries),
        )
        return call, prompt.total_tokens

    def _evidence(self, ref: str) -> str:
        """What a ref evicts: the scenario record it shows (a tool result's blob and its
        ledger record are one record, as a baseline's transcript item is), else the ref."""
        scheme, _, value = ref.partition(":")
        origin = None
        if scheme == "ledger" and value.isdigit():
            origin = self.evidence_of.get(int(value))
        elif scheme == "blob":
            origin = self.blob_origin.get(value)
        return f"record:{origin}" if origin is not None else ref

    def _round(self, seq: int) -> tuple[list[str], list[int], int] | None:
        """Lines, per-line costs and tokens of the round of record ``seq`` (``None``: no round)."""
        record = self.records[seq]
        body = record.body
        output = None
        if isinstance(body, r.ToolResult | r.TaskResult) and body.blob is not None:
            output = self.blobs[body.blob.hash].decode()
        text = round_text(record, output=output)
        if text is None:
            return None
        lines = text.split("\n")
        tokens = self.counter.count(text) + 1
        return lines, self.counter.block_costs(lines, tokens), tokens

    def prompts(self) -> Iterator[CallPrompt]:
        records = self.scenario.records
        read = 0
        base: CallPrompt | None = None
        base_tokens = 0
        base_turn: int | None = None
        lines: list[str] = []
        costs: list[int] = []
        round_ends: list[int] = []  # each round is a message of its own
        round_tokens = 0
        rounded = 0  # ledger records up to here are in the prompt or its rounds
        for position in self.scenario.calls:
            while read < position:
                self._feed(records[read], read)
                read += 1
            turn = self.state.runtime.turn.index if self.state.runtime.turn else None
            # The refresh the runtime runs before a prompt: working memory stated something
            # this turn made untrue, so it is refreshed and the prompt rendered again.
            owed = refresh_before_prompt(self.state, ts=self.records[-1].ts)
            for derived in owed:
                self._append(derived.body, derived.ts, derived.turn)
            for seq in range(rounded, len(self.records)):
                got = self._round(seq)
                if got is not None:
                    lines += got[0]
                    costs += got[1]
                    round_tokens += got[2]
                    round_ends.append(len(lines))
            rounded = len(self.records)
            if (
                base is None
                or owed
                or turn is None
                or turn != base_turn
                or not rounds_fit(base_tokens, round_tokens, self.budget.available)
            ):
                base, base_tokens = self._render()
                base_turn = turn
                lines, costs, round_tokens = list(base.lines), list(base.costs), 0
                round_ends = []
                rounded = len(self.records)
                yield CallPrompt(
                    lines=list(lines),
                    costs=list(costs),
                    breakpoints=base.breakpoints,
                    evicted=base.evicted,
                    sections=base.sections,
                    blocks=base.blocks,
                )
                continue
            # cache_last_block: the last breakpoint in the messages (the prompt's end, when
            # it is TurnScoped) moves to the newest round; Anthropic allows four.
            kept = base.breakpoints
            if kept and section_stability(base.sections[-1][0], self.config.layout) == "turn":
                kept = kept[:-1]
            yield CallPrompt(
                lines=list(lines),
                costs=list(costs),
                breakpoints=(*kept, len(lines)),
                sections=(*base.sections, ("rounds", len(lines))),
                blocks=(*base.blocks, *round_ends),
            )

    def restore(self, key: str) -> RestoreOutcome:
        """Restore a ref and compare it with the original evidence, byte for byte."""
        try:
            found = restore(key, self.source)
            data = restore_bytes(key, self.source)
        except HolonError:
            return "mismatch"
        if isinstance(found, r.ContextEpisodeRecord):
            return "restored" if found == self.index.get(found.episode_id) else "mismatch"
        expected = self._original(key, found)
        return "restored" if expected is None or data == expected else "mismatch"

    def _original(self, key: str, found: r.Record | bytes) -> bytes | None:
        """The bytes a ref promises, taken from the scenario's evidence (not from the ledger)."""
        if isinstance(found, bytes):
            origin = self.blob_origin.get(key.removeprefix("blob:"))
            if origin is None:
                return b"\x00no evidence record holds this blob"
            original = self.scenario.records[origin].body
            assert isinstance(original, r.ToolResult | r.TaskResult)
            return original.output.encode()
        index = self.evidence_of.get(found.seq)
        if index is None:
            return None  # a runtime or derived record: restore_bytes is its canonical JSON line
        original = self.scenario.records[index].body
        if isinstance(original, r.ToolResult):
            return original.output.encode()
        if isinstance(original, r.Message | r.Brief):
            return original.text.encode()
        if isinstance(original, r.TurnStarted) and original.input is not None:
            return original.input.encode()
        if found.body != original and found.body != self._place(original):
            return b"\x00different record"
        return None


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
