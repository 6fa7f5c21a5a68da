"""Resuming a fold from a ledger's newest verified checkpoint instead of reading it from seq 0.

:data:`Resume` and :class:`Checkpoints` are what :func:`holon.runtime.checkpoints.checkpoint_resume`
gives; :func:`from_checkpoint` takes from one what a first pass over the whole ledger would
learn, and :func:`fold_all` folds the whole ledger from its checkpoint when there is one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import holon.records as r
from holon.context.render import recorded_projection
from holon.context.search import EpisodeIndex
from holon.errors import InvalidRecord
from holon.projections import DEFAULT_CONFIG, ProjectionConfig, ProjectionState, fold, stated_config
from holon.replay.config import ConfigScan, projection_config_of
from holon.replay.reading import Reader, first_pass, records_by_scan

__all__ = ["Checkpoints", "Resume", "ledger_projection"]


#: Resumes a fold of the whole ledger under a projection config: a verified state folded to
#: some seq and the records after it, or ``None`` to fold from seq 0 (a ledger's checkpoints:
#: :func:`holon.runtime.checkpoints.checkpoint_resume`).
Resume = Callable[[ProjectionConfig], "tuple[ProjectionState, Sequence[r.Record]] | None"]


@runtime_checkable
class Checkpoints(Protocol):
    """A :data:`Resume` that also names a ledger's newest verified checkpoint and reads its records.

    What :func:`holon.runtime.checkpoints.checkpoint_resume` gives. Given one, the reads of
    the whole ledger (:func:`memory_of` without a turn, :func:`next_prompt_of`) take what
    their first pass would learn from that checkpoint's state and the records after it,
    instead of reading every record (see :func:`from_checkpoint`).
    """

    def __call__(self, config: ProjectionConfig) -> tuple[ProjectionState, Sequence[r.Record]] | None:
        """The newest checkpoint that verifies under ``config`` and the records after it."""

    def newest(self) -> tuple[ProjectionState, Sequence[r.Record]] | None:
        """The newest checkpoint that verifies under its own config and the records after it."""

    def record(self, seq: int) -> r.Record:
        """The ledger's record at ``seq`` (at or before the head)."""

    def records(self, from_seq: int, to_seq: int) -> Iterable[r.Record]:
        """The ledger's records with ``from_seq <= seq < to_seq`` (none after the head)."""

    def episode_index(self, seq: int, episodes: Iterable[r.ContextEpisodeRecord]) -> EpisodeIndex | None:
        """The episode index saved with the checkpoint at ``seq``, over ``episodes``; ``None``: build it."""


class Resumed(NamedTuple):
    """What a first pass over a whole ledger learns, taken from its newest verified checkpoint."""

    state: ProjectionState  # the checkpoint's, folded under the ledger's projection config
    rest: Sequence[r.Record]  # the records after it, up to the head
    configured: r.Record | None  # the newest prompt_rendered with a render_config
    last: r.Record | None


def _stated_by(state: ProjectionState) -> list[ProjectionConfig]:
    """The configs ``state``'s last prompt (explicitly), newest delta and newest episode state.

    Raises InvalidRecord when the prompt's does not decode.
    """
    stated: list[ProjectionConfig | None] = []
    last_prompt = state.runtime.last_prompt
    if last_prompt is not None:
        stated.append(recorded_projection(last_prompt.prompt.render_config, where=f"seq {last_prompt.seq}"))
    memory = state.memory
    for derived in (memory.latest_delta, *memory.archive.latest(1)):
        if derived is not None:
            stated.append(stated_config(derived))
    return [s for s in stated if s is not None]


def from_checkpoint(
    resume: Resume | Checkpoints | None, projection: ProjectionConfig | None, *, settings: bool
) -> Resumed | None:
    """A first pass's findings from ``resume``'s newest checkpoint; ``None``: make the first pass.

    The checkpoint's state is trusted for the records up to it: the hash chain from it
    reproduces the head, and it was folded from them. So the ledger's projection config
    is the checkpoint's when its state's last prompt, newest delta and newest episode
    state that config or none, and when none of them states one it is the default
    (``projection``, when given, must be the checkpoint's); the records after it are
    scanned as :func:`projection_config_of` scans, and one stating another config leaves
    the decision, and the error, to the full pass. With
    ``settings``, the newest prompt with a ``render_config`` is the newest after the
    checkpoint, else the state's last prompt (read from the ledger); when that prompt
    has none, an older one may, and only the full pass can tell.
    """
    if not isinstance(resume, Checkpoints):
        return None
    found = resume.newest()
    if found is None:
        return None
    state, rest = found
    config = state.config
    last_prompt = state.runtime.last_prompt
    if projection is not None:
        if projection != config:
            return None
    else:
        try:
            stated = _stated_by(state)
        except InvalidRecord:
            return None  # the full pass raises it (or an earlier one)
        if any(s != config for s in stated) or (not stated and config != DEFAULT_CONFIG):
            return None
    scan = ConfigScan()
    seen = first_pass(lambda: rest, scan, None)  # the first pass, over the records after it only
    configured = seen.configured
    if projection is None and (scan.error is not None or (scan.first and scan.first[1] != config)):
        return None  # the full pass decides: another config first recorded after it, or the error
    if settings and configured is None and last_prompt is not None:
        if not last_prompt.prompt.render_config:
            return None
        configured = resume.record(last_prompt.seq)
    last = seen.last if rest else resume.record(state.seq) if state.seq >= 0 else None
    return Resumed(state=state, rest=rest, configured=configured, last=last)


def ledger_projection(read: Reader, resume: Resume | Checkpoints | None = None) -> ProjectionConfig:
    """:func:`projection_config_of` the records ``read()`` gives, from their newest checkpoint when it can.

    Given :class:`Checkpoints` whose newest checkpoint states the ledger's config (the
    rules of the whole-ledger reads, :func:`memory_of`), only the records after it are
    read; otherwise every record is, and a conflict is the same InvalidRecord.
    """
    resumed = from_checkpoint(resume, None, settings=False)
    return resumed.state.config if resumed is not None else projection_config_of(read())


def older_of(resume: Resume | Checkpoints | None, read: Reader) -> Callable[[int, int], Iterable[r.Record]]:
    """How a fold reads records it did not keep: by seq from the ledger (:class:`Checkpoints`),
    else by reading ``read()`` up to them."""
    if isinstance(resume, Checkpoints):
        return resume.records
    return records_by_scan(read)


def fold_all(read: Reader, projection: ProjectionConfig, resume: Resume | None) -> ProjectionState:
    start = resume(projection) if resume is not None else None
    if start is None:
        return fold(read(), config=projection)
    state, rest = start
    return fold(rest, state)
