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
from holon.projections.config import DEFAULT_CONFIG, PROJECTION_VERSION, ProjectionConfig
from holon.projections.memory import WorkingMemoryState, apply_memory
from holon.projections.state import RuntimeState, apply_runtime

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

    Raises ``ValueError`` when both ``state`` and a different ``config`` are given:
    continuing a fold under another config would mix two projections.
    """
    if state is None:
        state = initial_state(config if config is not None else DEFAULT_CONFIG)
    elif config is not None and config != state.config:
        raise ValueError("fold: config differs from the config the state was folded with")
    for record in records:
        state = apply(state, record)
    return state
