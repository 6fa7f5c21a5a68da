"""What a ledger holds, for ``holon stats``: records by kind, tokens per section, evictions, key churn."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import msgspec

import holon.records as r
from holon.context.causes import omission_cause
from holon.context.sections import SECTION_ORDER
from holon.projections import ProjectionConfig, fold, initial_state
from holon.replay.config import projection_of
from holon.replay.resume import Resume

__all__ = ["LedgerStats", "SectionStats", "ledger_stats"]


class SectionStats(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens one section took across recorded prompts (prompts that rendered it)."""

    section: str
    prompts: int
    min: int
    median: float
    max: int
    compacted: int
    omitted: int


class LedgerStats(msgspec.Struct, frozen=True, kw_only=True):
    """What a ledger holds, for ``holon stats``.

    ``cache_key_changes`` counts consecutive recorded prompts whose cache key differs
    (each one a cache rewrite at the provider); ``unknown_outcomes`` counts tool calls
    whose effect the ledger cannot tell: results recorded as ``unknown`` (the runtime
    records one for each intent a crash left open) and intents with no result at all.
    ``evictions_by_cause`` counts the omissions by cause (their reason without the id of the
    item and the counts it names, see :func:`holon.context.causes.omission_cause`), most first.
    """

    records: int
    by_kind: dict[str, int]
    turns: int
    outcomes: dict[str, int]
    tool_calls: int
    unknown_outcomes: int
    prompts: int
    prompt_tokens: SectionStats | None
    sections: tuple[SectionStats, ...]
    evictions: int
    evictions_by_reason: dict[str, int]
    evictions_by_cause: dict[str, int]
    cache_keys: int
    cache_key_changes: int
    revision: int
    compression_epoch: int
    episodes: int
    blobs: int
    first_ts: int | None
    last_ts: int | None


def _section_stats(name: str, values: Counter[int], compacted: int, omitted: int) -> SectionStats:
    """Min, median and max of ``values`` (a count per value: as many values as prompts, few distinct)."""
    count = values.total()
    if not count:
        return SectionStats(
            section=name, prompts=0, min=0, median=0.0, max=0, compacted=compacted, omitted=omitted
        )
    ordered = sorted(values.items())
    return SectionStats(
        section=name,
        prompts=count,
        min=ordered[0][0],
        median=float(_median(ordered, count)),
        max=ordered[-1][0],
        compacted=compacted,
        omitted=omitted,
    )


def _median(ordered: list[tuple[int, int]], count: int) -> float | int:
    """``statistics.median`` of the values ``ordered`` counts (value, times), ascending."""

    def nth(n: int) -> int:
        seen = 0
        for value, times in ordered:
            seen += times
            if n < seen:
                return value
        raise AssertionError(f"{n} is past the {count} values")

    middle = count // 2
    if count % 2:
        return nth(middle)
    return (nth(middle - 1) + nth(middle)) / 2


class _PromptTally:
    """What :func:`ledger_stats` counts of the recorded prompts, one ``PromptRendered`` at a time."""

    def __init__(self) -> None:
        self.totals: Counter[int] = Counter()
        self.section_tokens: dict[str, Counter[int]] = {}
        self.section_forms: dict[str, list[int]] = {}
        self.reasons: dict[str, int] = {}
        self.keys: set[str] = set()
        self.changes = self.evictions = 0
        self.last_key: str | None = None

    def add(self, body: r.PromptRendered) -> None:
        """Count one recorded prompt."""
        self.totals[body.total_tokens] += 1
        for s in body.sections:
            self.section_tokens.setdefault(s.section, Counter())[s.tokens] += 1
            forms = self.section_forms.setdefault(s.section, [0, 0])
            forms[0] += s.form in ("compact", "truncated")
            forms[1] += s.form == "omitted"
        self.evictions += len(body.omitted)
        for o in body.omitted:
            self.reasons[o.reason] = self.reasons.get(o.reason, 0) + 1
        self.keys.add(body.cache_key)
        self.changes += self.last_key is not None and body.cache_key != self.last_key
        self.last_key = body.cache_key

    def sections(self) -> tuple[SectionStats, ...]:
        """Each section's tokens, in the renderer's section order (unknown sections last, by name)."""
        order = {name: i for i, name in enumerate(SECTION_ORDER)}
        return tuple(
            _section_stats(name, self.section_tokens[name], *self.section_forms[name])
            for name in sorted(self.section_tokens, key=lambda n: (order.get(n, len(order)), n))
        )

    def causes(self) -> dict[str, int]:
        """The omissions counted by cause, most first."""
        # Reasons name their item (a decision, a file): counted by reason, a summary has a row per
        # item; by cause (holon.context.causes), one per kind of omission, as the audit counts.
        causes: Counter[str] = Counter()
        for reason, n in self.reasons.items():
            causes[omission_cause(reason)] += n
        return dict(sorted(causes.items(), key=lambda item: (-item[1], item[0])))


def ledger_stats(
    records: Iterable[r.Record], *, projection: ProjectionConfig | None = None, resume: Resume | None = None
) -> LedgerStats:
    """Count what a ledger holds and summarize its recorded prompts.

    Folded under ``projection``, or (by default) the projection config the ledger's prompts
    record. One pass over ``records`` when ``projection`` is given, keeping counts rather
    than records. With ``resume``, the fold starts from its verified state (a checkpoint of
    the same ledger): records up to it are counted, not folded, and the result is the same.
    """
    records, projection = projection_of(records, projection)
    by_kind: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    prompts = _PromptTally()
    blobs = count = unknown = calls = 0
    # Intents whose call id no result has answered yet (a result answers every intent with
    # its id, before or after it), rather than every intent: most are answered.
    unanswered: dict[str, int] = {}
    answered: set[str] = set()
    first_ts: int | None = None
    last_ts: int | None = None
    start = resume(projection) if resume is not None else None
    state = start[0] if start is not None else initial_state(projection)
    resumed_at = state.seq if start is not None else None
    for record in records:
        if resumed_at is None or record.seq > resumed_at:
            state = fold((record,), state)  # fold, not apply: records that skip or repeat seqs are refused
        count += 1
        first_ts = record.ts if first_ts is None else first_ts
        last_ts = record.ts
        by_kind[record.kind] = by_kind.get(record.kind, 0) + 1
        body = record.body
        if isinstance(body, r.TurnEnded):
            outcomes[body.outcome] = outcomes.get(body.outcome, 0) + 1
        elif isinstance(body, r.ToolIntent):
            calls += 1
            if body.call_id not in answered:
                unanswered[body.call_id] = unanswered.get(body.call_id, 0) + 1
        elif isinstance(body, r.ToolResult | r.TaskResult):
            if isinstance(body, r.ToolResult):
                answered.add(body.call_id)
                unanswered.pop(body.call_id, None)
                unknown += body.status == "unknown"
            blobs += body.blob is not None
        elif isinstance(body, r.PromptRendered):
            prompts.add(body)
    unknown += sum(unanswered.values())
    totals = prompts.totals
    return LedgerStats(
        records=count,
        by_kind=dict(sorted(by_kind.items())),
        turns=by_kind.get(r.TurnStarted.KIND, 0),
        outcomes=dict(sorted(outcomes.items())),
        tool_calls=calls,
        unknown_outcomes=unknown,
        prompts=totals.total(),
        prompt_tokens=_section_stats("total", totals, 0, 0) if totals else None,
        sections=prompts.sections(),
        evictions=prompts.evictions,
        evictions_by_reason=dict(sorted(prompts.reasons.items())),
        evictions_by_cause=prompts.causes(),
        cache_keys=len(prompts.keys),
        cache_key_changes=prompts.changes,
        revision=state.memory.revision,
        compression_epoch=state.memory.compression_epoch,
        episodes=state.memory.archived_episodes,
        blobs=blobs,
        first_ts=first_ts,
        last_ts=last_ts,
    )
