"""ProjectionState: runtime state and working memory folded together, with their config.

This is the state a live agent holds and a checkpoint stores. :func:`apply` is the one
fold step for every record kind (evidence, runtime and derived), so folding record by
record, resuming from a checkpoint, or folding a whole ledger at once give the same
state.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

import holon.records as r
from holon.errors import ProjectionConfigMismatch, UsageError
from holon.projections.config import DEFAULT_CONFIG, PROJECTION_VERSION, ProjectionConfig, config_differences
from holon.projections.entries import RuntimeState
from holon.projections.memory import WorkingMemoryState, apply_memory
from holon.projections.state import apply_runtime

__all__ = ["ProjectionState", "apply", "fold", "initial_state"]


class ProjectionState(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Everything the projections know after folding records up to ``seq``.

    ``config`` and ``projection_version`` are stored with the state because derived
    records depend on them: a checkpoint or a comparison under a different config or
    version is a mismatch, never silently mixed.
    """

    config: ProjectionConfig = DEFAULT_CONFIG
    projection_version: int = PROJECTION_VERSION
    runtime: RuntimeState = RuntimeState()
    memory: WorkingMemoryState = WorkingMemoryState()

    @property
    def seq(self) -> int:
        """The seq of the last record folded in (``-1`` before any)."""
        return self.runtime.seq


def initial_state(config: ProjectionConfig = DEFAULT_CONFIG) -> ProjectionState:
    """The state before any record, under ``config``."""
    return ProjectionState(config=config)


def apply(state: ProjectionState, record: r.Record) -> ProjectionState:
    """Fold one record (any kind) into the state; pure, ``state`` is left untouched."""
    config = state.config
    runtime = apply_runtime(state.runtime, record, config)
    memory = apply_memory(state.memory, runtime, record, config)
    return ProjectionState(
        config=config, projection_version=state.projection_version, runtime=runtime, memory=memory
    )


def fold(
    records: Iterable[r.Record],
    state: ProjectionState | None = None,
    *,
    config: ProjectionConfig | None = None,
) -> ProjectionState:
    """Fold records in order, from ``state`` (or the initial state under ``config``).

    The records must continue the state: seqs ``state.seq + 1``, ``state.seq + 2``, …
    (from 0 without a state), as a ledger holds them. Raises
    :class:`~holon.errors.UsageError` at the first record that does not, naming its seq
    and the one expected: a record folded twice (the whole ledger given with a
    checkpoint's state) or after a gap gives a state no ledger ever had, and nothing
    downstream could tell. (Whether the state came from the *same* ledger the seqs
    cannot tell: a checkpoint's ``head_hash`` does, see :func:`restore_checkpoint`.)
    Raises :class:`~holon.errors.ProjectionConfigMismatch` (a ``ValueError``) when both
    ``state`` and a different ``config`` are given: continuing a fold under another
    config would mix two projections.
    """
    if state is None:
        state = initial_state(config if config is not None else DEFAULT_CONFIG)
    elif config is not None and config != state.config:
        raise config_mismatch("fold", state.config, config)
    for record in records:
        if record.seq != state.runtime.seq + 1:
            raise UsageError(discontinuity("fold", state.runtime.seq, record.seq))
        state = apply(state, record)
    return state


def config_mismatch(caller: str, have: ProjectionConfig, given: ProjectionConfig) -> ProjectionConfigMismatch:
    """The error of continuing a state folded under ``have`` with ``given`` (not exported)."""
    names, detail = config_differences(have, given)
    return ProjectionConfigMismatch(caller, names, detail)


def discontinuity(caller: str, folded: int, seq: int) -> str:
    """Why a record with ``seq`` cannot be folded into a state folded to seq ``folded``.

    Shared by :func:`fold` and :func:`~holon.projections.verify_derivations`, which
    raise it as a UsageError. Not exported: callers only see the error.
    """
    expected = folded + 1
    where = f"the state is folded to seq {folded}"
    if seq < 0:
        what = "was never appended to a ledger (seq -1): fold stored records"
    elif seq < expected:
        what = f"was already folded ({where}): pass the records from seq {expected} on"
    else:
        skipped = f"seq {expected}" if seq == expected + 1 else f"seqs {expected}..{seq - 1}"
        what = f"skips {skipped}: pass every record from seq {expected} on, in order"
    return f"{caller}: record seq {seq} does not continue the state; expected seq {expected}; it {what}"
