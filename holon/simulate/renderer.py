"""What holon would have sent: its prompt for every model call of a run, as the runtime renders it.

:class:`HolonSimulation` is what ``holon.Agent`` sends (``Turn.context()`` /
``Turn.messages()``) over a run's evidence: every evidence record is appended to an
in-memory ledger and folded, the post-turn refresh appends its derived records; a turn's
first model call gets the prompt ``build_context`` renders from the fold so far (its
``PromptRendered`` record is appended), and the turn's later calls get that prompt with
the turn's *rounds* since it appended (:func:`holon.context.rounds.round_text`, full tool
outputs) — until the rounds no longer fit the budget (:func:`holon.context.rounds.rounds_fit`),
when the prompt is rendered again, or until the turn made something working memory states
untrue (:func:`holon.projections.refresh_before_prompt` refreshes it first). Large tool
outputs go to the blob store as the ledger would put them (over its blob threshold). A
daemon moves the prompt's last cache breakpoint to the last block of every request
(:func:`holon.context.adapters.cache_last_block`), so each call's end is one.

The records it appends (:attr:`HolonSimulation.records`) are the ledger the runtime would
have written: ``holon simulate`` writes them to a new ledger, and the evaluation's
``holon`` policy (benchmarks/eval) measures its prompts.

Its evictions are the refs of its assembly plan and every ``restore with ref``
placeholder in the text, one per evidence record however many refs name it (a large tool
result's blob and its ledger record); each is restored through a :class:`LedgerSource`
over the records and checked byte for byte against the original evidence (:meth:`restore`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Final

import blake3
import msgspec

import holon.records as r
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
from holon.errors import HolonError, RefNotFound, UsageError
from holon.ledger.blobs import BLOB_PREVIEW_CHARS
from holon.ledger.store import DEFAULT_BLOB_THRESHOLD
from holon.projections import (
    DEFAULT_CONFIG,
    ProjectionConfig,
    ProjectionState,
    apply,
    derived_after,
    derived_before,
    initial_state,
)
from holon.simulate.model_calls import ModelCalls
from holon.simulate.prompts import CallPrompt, TokenCounter
from holon.simulate.transcript import RestoreOutcome

__all__ = ["DEFAULT_AGENT", "HolonSimulation", "LedgerSource"]

#: The agent id prompts are rendered for when none is given (a ledger's own, in ``holon simulate``).
DEFAULT_AGENT: Final = "holon-simulate"
_REF_IN_TEXT: Final = re.compile(r"restore with ref ((?:ledger|blob|episode):[0-9a-f]+)")


class LedgerSource:
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


class HolonSimulation:
    """holon's prompts for a run: ``build_context`` over the fold of the ledger, as the runtime renders it."""

    name = "holon"

    def __init__(
        self,
        run: ModelCalls,
        budget: Budget,
        counter: TokenCounter,
        config: RenderConfig | None = None,
        *,
        agent_id: str = DEFAULT_AGENT,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
        blob: Callable[[str], bytes] | None = None,
        projection: ProjectionConfig = DEFAULT_CONFIG,
    ) -> None:
        """``blob`` reads the bytes of an output the run's records already hold as a blob ref
        (a ledger's); ``projection`` is the config the ledger is derived under."""
        self.run = run
        self.budget = budget
        self.counter = counter
        self.config = config or RenderConfig(estimator=counter.estimator.name)
        self.agent_id = agent_id
        self._source_blob = blob
        self.blob_threshold = blob_threshold
        self.records: list[r.Record] = []
        self.blobs: dict[str, bytes] = {}
        self.index = EpisodeIndex()
        self.source = LedgerSource(self.records, self.blobs, self.index)
        self.state: ProjectionState = initial_state(projection)
        # The view of the ledger the history is read from, as the runtime keeps it (a
        # record's seq is its index in ``records``; blobs are read from ``blobs``).
        self.evidence = EvidenceBuffer(
            older=lambda first, end: self.records[first:end], blob=self.blobs.__getitem__
        )
        self.evidence_of: dict[int, int] = {}  # ledger seq -> index of the run's record
        self.blob_origin: dict[str, int] = {}  # blob hash -> index of the run's record
        self.prompt_tokens: list[int] = []  # build_context's own total per rendered prompt
        # Per call yielded: the seq of the prompt_rendered record its prompt starts with.
        self.served_by: list[int] = []
        self._seen: set[str] = set()  # every ref a prompt left
        self._evicted: set[str] = set()  # what they name (see _evidence), each counted once
        self._prompt_seq = -1
        self._read = 0  # the run's records fed so far

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
        given = record.body
        if isinstance(given, r.ToolResult | r.TaskResult) and given.blob is not None:
            self._hold_blob(given.blob.hash)
        body = self._place(given)
        seq = self._append(body, record.ts, record.turn)
        self.evidence_of[seq] = index
        if isinstance(body, r.ToolResult | r.TaskResult) and body.blob is not None:
            self.blob_origin.setdefault(body.blob.hash, index)
        if record.kind == r.TurnEnded.KIND:
            for derived in derived_after(self.state, self.records[seq]):
                self._append(derived.body, derived.ts, derived.turn)
            # Keep the incremental episode index in step with the archive, as the runtime does.
            archive = self.state.memory.archive
            self.index.extend(archive.get(i) for i in range(len(self.index), archive.count))

    def _hold_blob(self, blob_hash: str) -> None:
        """Copy an output the run's records already hold as a blob ref into the blob store."""
        if blob_hash in self.blobs:
            return
        if self._source_blob is None:
            raise UsageError(
                f"the run's records hold an output as blob:{blob_hash}, and no blob reader was given: "
                "pass blob= (the ledger's get_blob) to simulate a ledger's records"
            )
        self.blobs[blob_hash] = self._source_blob(blob_hash)

    def _render(self) -> tuple[CallPrompt, int]:
        """Render the prompt now (appending its record): the call prompt and its tokens."""
        prompt = build_context(
            self.state,
            self.budget,
            self.config,
            agent_id=self.agent_id,
            index=self.index,
            history=self.evidence,
        )
        self.prompt_tokens.append(prompt.total_tokens)
        self._prompt_seq = self._append(
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
        """What a ref evicts: the run's record it shows (a tool result's blob and its
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
        """The prompt of every model call of the run, in order (each rendered one appends its record)."""
        records = self.run.records
        base: CallPrompt | None = None
        base_tokens = 0
        base_turn: int | None = None
        lines: list[str] = []
        costs: list[int] = []
        round_ends: list[int] = []  # each round is a message of its own
        round_tokens = 0
        rounded = 0  # ledger records up to here are in the prompt or its rounds
        for position in self.run.calls:
            while self._read < position:
                self._feed(records[self._read], self._read)
                self._read += 1
            turn = self.state.runtime.turn.index if self.state.runtime.turn else None
            # The refresh the runtime runs before a prompt: working memory stated something
            # this turn made untrue, so it is refreshed and the prompt rendered again.
            owed = derived_before(self.state, r.PromptRendered.KIND, tail_ts=self.records[-1].ts)
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
                self.served_by.append(self._prompt_seq)
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
            self.served_by.append(self._prompt_seq)
            yield CallPrompt(
                lines=list(lines),
                costs=list(costs),
                breakpoints=(*kept, len(lines)),
                sections=(*base.sections, ("rounds", len(lines))),
                blocks=(*base.blocks, *round_ends),
            )

    def finish(self) -> None:
        """Append the run's records after its last model call (the last answer, its turn's end):
        after :meth:`prompts`, :attr:`records` is then the whole ledger the runtime would have written."""
        records = self.run.records
        while self._read < len(records):
            self._feed(records[self._read], self._read)
            self._read += 1

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
        """The bytes a ref promises, taken from the run's evidence (not from the ledger)."""
        if isinstance(found, bytes):
            origin = self.blob_origin.get(key.removeprefix("blob:"))
            if origin is None:
                return b"\x00no evidence record holds this blob"
            original = self.run.records[origin].body
            assert isinstance(original, r.ToolResult | r.TaskResult)
            return self._output(original)
        index = self.evidence_of.get(found.seq)
        if index is None:
            return None  # a runtime or derived record: restore_bytes is its canonical JSON line
        original = self.run.records[index].body
        if isinstance(original, r.ToolResult):
            return self._output(original)
        if isinstance(original, r.Message | r.Brief):
            return original.text.encode()
        if isinstance(original, r.TurnStarted) and original.input is not None:
            return original.input.encode()
        if found.body != original and found.body != self._place(original):
            return b"\x00different record"
        return None

    def _output(self, body: r.ToolResult | r.TaskResult) -> bytes:
        """The full output of one of the run's results, inline or in the blob it names."""
        return self.blobs[body.blob.hash] if body.blob is not None else body.output.encode()
