"""An in-memory stand-in for the runtime's append loop, for tests, fixtures and benchmarks.

:class:`LiveLedger` appends records the way the agent daemon does: it assigns gapless
seqs and caller-supplied timestamps, folds each record, runs the post-turn refresh
after every turn_ended and appends the derived records it returns right away, and can
append a prompt_rendered confirming the revision and epoch current at that point (after
the refresh the runtime runs before a prompt).
:func:`replay_live` does the same for an evidence stream read from a fixture (evidence
and runtime records only): it is how a fixture becomes the ledger a live agent had.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from holon import records as r
from holon.context import EvidenceBuffer
from holon.projections import (
    DEFAULT_CONFIG,
    ProjectionConfig,
    ProjectionState,
    apply,
    initial_state,
    post_turn_refresh,
    refresh_before_prompt,
)

__all__ = ["LiveLedger", "RecordsSource", "evidence_of", "replay_live"]

#: Where generated ledgers start their clock (2023-11-14T22:13:20Z), in milliseconds.
START_TS = 1_700_000_000_000


class LiveLedger:
    """Appends records like the runtime: seq, ts, fold, and the post-turn refresh."""

    def __init__(self, config: ProjectionConfig = DEFAULT_CONFIG, *, start_ts: int = START_TS) -> None:
        self.records: list[r.Record] = []
        self.state: ProjectionState = initial_state(config)
        # The evidence a prompt's history is read from, as the runtime keeps it (a record's
        # seq is its index in ``records``, which serve what the buffer dropped).
        self.evidence = EvidenceBuffer(older=lambda first, end: self.records[first:end])
        self.turn: int | None = None
        self.turns = 0
        self.ts = start_ts

    def append(self, body: r.Body, *, step_ms: int = 1000, in_turn: bool = True) -> r.Record:
        """Append one body in the current turn (or outside any turn)."""
        self.ts += step_ms
        return self._append(r.Record(body=body, ts=self.ts, turn=self.turn if in_turn else None))

    def _append(self, record: r.Record) -> r.Record:
        stored = r.Record(body=record.body, ts=record.ts, turn=record.turn, seq=len(self.records))
        self.records.append(stored)
        self.state = apply(self.state, stored)
        self.evidence.add(stored)
        return stored

    def start_turn(self, trigger: str = "user", text: str | None = None) -> r.Record:
        """Open turn ``turns + 1``."""
        self.turns += 1
        self.turn = self.turns
        return self.append(r.TurnStarted(trigger=trigger, input=text))

    def before_prompt(self) -> tuple[r.Record, ...]:
        """Run the refresh the runtime runs before rendering a prompt; append what it returns."""
        ts = self.records[-1].ts if self.records else self.ts
        return tuple(self._append(record) for record in refresh_before_prompt(self.state, ts=ts))

    def render(self, *, lag: int = 0) -> r.Record:
        """Append a prompt_rendered confirming the current revision and epoch.

        ``lag`` > 0 records an older revision instead (a prompt that does not confirm the
        pending delta, as one rendered from a stale state would be).
        """
        self.before_prompt()
        memory = self.state.memory
        revision = max(0, memory.revision - lag)
        digest = hashlib.blake2b(f"{self.turn}:{revision}".encode(), digest_size=16).hexdigest()
        return self.append(
            r.PromptRendered(
                working_memory_revision=revision,
                compression_epoch=memory.compression_epoch,
                cache_key=f"agent:{revision}:{memory.compression_epoch}",
                prompt_hash=digest,
                total_tokens=1000 + 10 * len(self.records) % 5000,
                budget=100_000,
                estimator="chars/4",
            ),
            step_ms=10,
        )

    def end_turn(self, outcome: str = "completed") -> tuple[r.Record, ...]:
        """Close the turn and append its derived records; returns them."""
        self.append(r.TurnEnded(outcome=outcome))  # type: ignore[arg-type]
        self.turn = None
        return self.refresh()

    def refresh(self) -> tuple[r.Record, ...]:
        """Run the post-turn refresh on the current state and append what it returns."""
        return tuple(self._append(record) for record in post_turn_refresh(self.state))


def evidence_of(records: Iterable[r.Record]) -> list[r.Record]:
    """The records a daemon appends (derived ones removed), renumbered gaplessly."""
    kept = [rec for rec in records if rec.kind not in r.DERIVED_KINDS]
    return [r.Record(body=rec.body, ts=rec.ts, turn=rec.turn, seq=i) for i, rec in enumerate(kept)]


def replay_live(evidence: Iterable[r.Record], config: ProjectionConfig = DEFAULT_CONFIG) -> LiveLedger:
    """Append an evidence stream as the live runtime would, inserting derived records."""
    live = LiveLedger(config)
    for record in evidence:
        if record.kind == r.PromptRendered.KIND:
            live.before_prompt()
        live._append(record)
        if record.kind == r.TurnEnded.KIND:
            live.refresh()
    return live


class RecordsSource:
    """A RefSource over some records by seq (no blobs, no episodes): where a test restores
    what a prompt clipped from the records a :class:`LiveLedger` (or the test) holds."""

    def __init__(self, records: Iterable[r.Record]) -> None:
        self._by_seq = {rec.seq: rec for rec in records}

    def record(self, seq: int) -> r.Record:
        return self._by_seq[seq]

    def blob(self, blob_hash: str) -> bytes:
        raise KeyError(blob_hash)

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
        raise KeyError(episode_id)
