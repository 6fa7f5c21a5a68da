"""Replay verification: re-derive every derived record and compare with the ledger.

Like a durable-execution engine's nondeterminism check: folding the ledger, at each
turn_ended record the post-turn refresh is run again on the state folded so far, and
the records it returns must be exactly the derived records that follow the turn_ended
record (same kind, same body, same ``ts`` and ``turn``). Inside a turn, derived records
may only come from the refresh before a prompt (:func:`refresh_before_prompt`, with the
``ts`` of the record before them); and before every prompt_rendered record that refresh
must have nothing left to derive, or its delta is missing. A derived record anywhere
else is unexpected. The first divergence is reported with its seq and a field-level diff.

A ledger that ends right after a turn_ended whose derived records were never appended
(the writer died in between) is not divergent: the report says ``pending_refresh``
and the runtime appends them on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

import msgspec

import holon.records as r
from holon.errors import UsageError
from holon.projections.config import DEFAULT_CONFIG, PROJECTION_VERSION, ProjectionConfig, describe_projection
from holon.projections.projection import (
    ProjectionState,
    apply,
    config_mismatch,
    discontinuity,
    initial_state,
)
from holon.projections.refresh import owed_refresh, post_turn_refresh, refresh_before_prompt

__all__ = [
    "Divergence",
    "FieldDiff",
    "VerificationReport",
    "diff_records",
    "unstated_config_derives",
    "verify_derivations",
]


class FieldDiff(msgspec.Struct, frozen=True, kw_only=True):
    """One field where the ledger's record differs from the re-derived one (plain data values)."""

    field: str
    expected: Any
    found: Any


class Divergence(msgspec.Struct, frozen=True, kw_only=True):
    """The first place the ledger's derived records differ from what this code derives.

    ``kind`` is ``mismatch`` (a derived record with different content), ``missing`` (an
    expected derived record is absent: another record stands at ``seq``) or
    ``unexpected`` (a derived record no refresh produced). ``after_seq`` is the
    turn_ended record whose refresh is concerned, if any.
    """

    seq: int
    kind: Literal["mismatch", "missing", "unexpected"]
    after_seq: int | None
    expected_kind: str | None
    found_kind: str
    diffs: tuple[FieldDiff, ...] = ()

    def describe(self) -> str:
        """A readable one-paragraph account of the divergence."""
        head = {
            "mismatch": f"derived {self.found_kind} at seq {self.seq} differs from the re-derived record",
            "missing": f"expected a derived {self.expected_kind} at seq {self.seq}, found {self.found_kind}",
            "unexpected": f"derived {self.found_kind} at seq {self.seq} was not produced by any refresh",
        }[self.kind]
        if self.after_seq is not None:
            head += f" (refresh after turn_ended seq {self.after_seq})"
        parts = [
            f"{d.field}: expected {_shown(d, d.expected)}, found {_shown(d, d.found)}" for d in self.diffs
        ]
        return "; ".join([head, *parts])


def _shown(diff: FieldDiff, value: Any) -> str:
    """A diff's value for a reader: a stated projection config by its non-default fields."""
    if diff.field == "body.projection":
        # ``None`` is the default config, and a config's 16 fields would bury the one that differs.
        try:
            config = DEFAULT_CONFIG if value is None else msgspec.convert(value, ProjectionConfig)
        except (msgspec.ValidationError, ValueError):
            return repr(value)
        return describe_projection(config)
    return repr(value)


class VerificationReport(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of :func:`verify_derivations`.

    ``ok`` is true when no divergence was found. ``records`` counts records read,
    ``refreshes`` the turn_ended records re-refreshed, ``derived_checked`` the derived
    records compared equal; ``pending_refresh`` is true when the ledger ends before the
    derived records of its last turn_ended.
    """

    ok: bool
    records: int
    refreshes: int
    derived_checked: int
    pending_refresh: bool
    divergence: Divergence | None
    projection_version: int = PROJECTION_VERSION


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value)


def diff_records(expected: r.Record, found: r.Record) -> tuple[FieldDiff, ...]:
    """Field-level differences between two records, ignoring ``seq`` (kind, ts, turn, body.*)."""
    if expected.kind != found.kind:
        return (FieldDiff(field="kind", expected=expected.kind, found=found.kind),)
    diffs: list[FieldDiff] = []
    if expected.ts != found.ts:
        diffs.append(FieldDiff(field="ts", expected=expected.ts, found=found.ts))
    if expected.turn != found.turn:
        diffs.append(FieldDiff(field="turn", expected=expected.turn, found=found.turn))
    for name in expected.body.__struct_fields__:
        want, got = getattr(expected.body, name), getattr(found.body, name)
        if want != got:
            diffs.append(FieldDiff(field=f"body.{name}", expected=_plain(want), found=_plain(got)))
    return tuple(diffs)


def _owed_after(state: ProjectionState) -> tuple[tuple[r.Record, ...], int | None]:
    """The derived records still owed right after ``state``, and the turn_ended they follow."""
    owed = owed_refresh(state)
    closed = state.memory.closed_interval
    return owed, (closed.to_seq if owed and closed is not None else None)


def verify_derivations(
    records: Iterable[r.Record],
    *,
    config: ProjectionConfig | None = None,
    state: ProjectionState | None = None,
    last_ts: int | None = None,
) -> VerificationReport:
    """Check that every derived record in ``records`` equals what this code derives.

    Starts from ``state`` (e.g. a restored checkpoint; ``records`` then continue after
    its seq) or from the initial state under ``config``: from any state folded from a
    prefix of the ledger, given ``last_ts``, the ts of the record at ``state.seq``, the
    report is the one for the whole ledger. (A state does not keep that ts, and a delta
    the refresh before a prompt appends right after it carries it: without ``last_ts``,
    that one delta's ts is taken as found.) Stops at the first divergence.

    Raises :class:`~holon.errors.ProjectionConfigMismatch` when both ``state`` and
    another ``config`` are given, and :class:`~holon.errors.UsageError` when the first
    record's seq does not follow ``state.seq`` (is not 0 without a state), or a later
    record's seq does not follow the one before it: records folded twice (the whole
    ledger given with a checkpoint's state) or after a gap would be checked against a
    state the ledger never had, and "ok" or the seq of a divergence would mean nothing.
    """
    if state is None:
        state = initial_state(config if config is not None else ProjectionConfig())
    elif config is not None and config != state.config:
        raise config_mismatch("verify_derivations", state.config, config)
    # The ts of the last record folded: a pre-prompt refresh's records carry it. A given
    # state does not keep it, so unless the caller passed it, it is unknown until a record
    # has been folded here.
    walk = _Walk(state, 0 if state.seq < 0 else last_ts)
    divergence: Divergence | None = None
    for record in records:
        divergence = walk.step(record)
        if divergence is not None:
            break
    return VerificationReport(
        ok=divergence is None,
        records=walk.counted,
        refreshes=walk.refreshes,
        derived_checked=walk.checked,
        pending_refresh=divergence is None and walk.position < len(walk.expected),
        divergence=divergence,
    )


class _Walk:
    """Where :func:`verify_derivations` is: the state folded so far, the derived records owed
    after it (``expected``, from ``position`` on, after the turn_ended at ``after_seq`` or
    before a prompt) and what it counted."""

    def __init__(self, state: ProjectionState, last_ts: int | None) -> None:
        self.state = state
        self.last_ts = last_ts
        self.expected, self.after_seq = _owed_after(state)
        self.position = 0
        self.counted = self.refreshes = self.checked = 0

    def step(self, record: r.Record) -> Divergence | None:
        """Check the next record against what is owed before it, then fold it; the
        divergence it makes, if any (the record is then not folded)."""
        self._follows(record)
        self.counted += 1
        if self.position >= len(self.expected) and record.kind in r.DERIVED_KINDS:
            # Not owed by a turn_ended: it must be the refresh before a prompt. (When the
            # ts of the record before it is unknown, its own ts is taken: it cannot be checked.)
            ts = self.last_ts if self.last_ts is not None else record.ts
            self.expected, self.after_seq, self.position = refresh_before_prompt(self.state, ts=ts), None, 0
        divergence = self._check(record)
        if divergence is not None:
            return divergence
        self.state = apply(self.state, record)
        self.last_ts = record.ts
        if record.kind == r.TurnEnded.KIND:
            self.expected, self.after_seq, self.position = post_turn_refresh(self.state), record.seq, 0
            self.refreshes += 1
        return None

    def _follows(self, record: r.Record) -> None:
        """Raise :class:`~holon.errors.UsageError` unless ``record`` is the one after the state."""
        state = self.state
        if record.seq == state.seq + 1:
            return
        if self.counted == 0:
            raise UsageError(
                f"verify_derivations: the first record is seq {record.seq}, but the state is "
                f"folded to seq {state.seq}; pass the records from seq {state.seq + 1} on"
            )
        # A gap or a repeat further on would be reported as a divergence at a seq where
        # the ledger differs from nothing (or, when no derived record notices, as ok).
        raise UsageError(discontinuity("verify_derivations", state.seq, record.seq))

    def _check(self, record: r.Record) -> Divergence | None:
        """The divergence ``record`` makes where it stands, else ``None`` (a derived record
        owed here and equal to it is counted as checked)."""
        if self.position < len(self.expected):
            want = self.expected[self.position]
            if record.kind not in r.DERIVED_KINDS:
                return Divergence(
                    seq=record.seq,
                    kind="missing",
                    after_seq=self.after_seq,
                    expected_kind=want.kind,
                    found_kind=record.kind,
                )
            diffs = diff_records(want, record)
            if diffs:
                return Divergence(
                    seq=record.seq,
                    kind="mismatch",
                    after_seq=self.after_seq,
                    expected_kind=want.kind,
                    found_kind=record.kind,
                    diffs=diffs,
                )
            self.position += 1
            self.checked += 1
            return None
        if record.kind in r.DERIVED_KINDS:
            return Divergence(
                seq=record.seq,
                kind="unexpected",
                after_seq=self.after_seq,
                expected_kind=None,
                found_kind=record.kind,
                diffs=(FieldDiff(field="kind", expected=None, found=record.kind),),
            )
        if record.kind == r.PromptRendered.KIND:
            owed = refresh_before_prompt(
                self.state, ts=self.last_ts if self.last_ts is not None else record.ts
            )
            if owed:
                return Divergence(
                    seq=record.seq,
                    kind="missing",
                    after_seq=None,
                    expected_kind=owed[0].kind,
                    found_kind=record.kind,
                )
        return None


def unstated_config_derives(
    state: ProjectionState, config: ProjectionConfig, read: Callable[[], Iterable[r.Record]]
) -> str | None:
    """What the ledger lacks that its turns derive under ``config``, when it states no config.

    ``state`` is the ledger folded (``read()`` gives its records from seq 0). A ledger whose
    refreshes derived nothing yet (no working-memory change, fewer turns than its writer's
    ``turn_cap``) states no config, so any config is let in; but under another one its past
    turns may owe what it lacks (an episode after turn 2 under ``turn_cap=2``), and once
    records stating that config are appended it fails verification from seq 0 for good.
    Returns the first such record as a phrase (``the refresh after the turn_ended at seq 3
    derives a context_episode it lacks (seq 4)``), else None. Only a ledger with a closed
    turn and no derived record is re-derived (one more pass, over fewer turns than a
    ``turn_cap``); one whose derived records state nothing (before projection version 9)
    is left to verification.
    """
    memory = state.memory
    if memory.closed_interval is None or memory.latest_delta is not None or memory.archive.count:
        return None
    divergence = verify_derivations(read(), config=config).divergence
    if divergence is None:
        return None
    after = f" after the turn_ended at seq {divergence.after_seq}" if divergence.after_seq is not None else ""
    return f"the refresh{after} derives a {divergence.expected_kind} it lacks (seq {divergence.seq})"
