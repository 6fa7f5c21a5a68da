"""Replaying a ledger: memory turn by turn, past prompts, plans, statistics and restoration.

This is the library behind ``holon replay``, ``render``, ``explain``, ``memory``,
``episodes``, ``stats``, ``prompts``, ``get``, ``verify``, ``append`` and ``import``;
everything here is usable without the CLI. It is an edge package: it reads ledgers (I/O)
and composes the pure layers — :mod:`holon.projections` folds, :mod:`holon.context`
renders. It may import :mod:`holon.records`, :mod:`holon.errors`, :mod:`holon.ledger`,
:mod:`holon.projections`, :mod:`holon.context` and msgspec (``tests/test_layers.py``,
which also pins which of its modules each may import). Import its names from here, not
from the modules:

- ``refs`` — :class:`LedgerRefSource`, the :class:`~holon.context.RefSource` of a ledger, so
  ``restore(ref, LedgerRefSource(ledger))`` gives back what a placeholder promises.
- ``turns`` — :func:`turn_spans`: where each turn's records start and end (derived records
  included); :func:`find_turn`.
- ``passes`` — :func:`replay_turns`: per turn, revision, delta, episodes finalized, epoch,
  prompts (:func:`replay_of`: the same, reading a ledger in passes rather than holding it).
- ``prompts`` — :func:`prompt_at` / :func:`next_prompt`: the prompt of a past turn,
  re-rendered from the ledger up to its ``PromptRendered`` record with the recorded budget
  and config (so its hash can be checked), or the prompt for the next model call;
  :func:`check_prompts`: every recorded prompt rendered again, and where the cacheable
  prefix broke (``holon prompts``).
- ``memory`` — :func:`memory_at`: working memory, pending delta and active episode builder
  after a turn.
- ``config`` — :func:`projection_config_of`: the projection config a ledger's prompts record
  (what its derived records were derived under); every fold here uses it unless told otherwise.
- ``reading`` and ``resume`` — the :data:`Reader` the ``*_of`` functions read a ledger in
  passes with, and the :class:`Checkpoints` they may resume a fold from.
- ``stats`` — :func:`ledger_stats`: records by kind, tokens per section, evictions,
  cache-key churn.
- ``evidence`` — :func:`append_evidence`: append evidence the way the runtime does: after
  every ``turn_ended`` the post-turn refresh's derived records follow, so the result verifies.
- ``imported`` — :func:`imported_prefix`: how much of an import a ledger already ends with
  (an import cut short by a full disk, or one already complete), so that it can be continued.
- ``verify`` — :func:`verify_ledger`: storage verification, then replay verification of the
  derived records (``holon verify``).

Functions take records (any iterable, in seq order) rather than a ledger where they
can, so a caller decides how to read them (all at once, with a progress bar, ...). They
fold from seq 0: records that start later, skip a seq or repeat one are a UsageError
(see :func:`holon.projections.fold`), not a state no ledger ever had.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Final

from holon.context.budget import DEFAULT_BUDGET
from holon.context.render import describe_projection, recorded_projection
from holon.replay.config import projection_config_of, state_after
from holon.replay.evidence import append_evidence, state_to_append_to
from holon.replay.imported import ImportedPrefix, imported_prefix
from holon.replay.memory import MemoryView, memory_at, memory_of
from holon.replay.passes import PromptSummary, Replay, TurnReplay, replay_of, replay_turns
from holon.replay.prompts import (
    APPENDED,
    PromptAt,
    PromptCheck,
    PromptsSummary,
    PromptStatus,
    RenderOverrides,
    check_prompts,
    check_prompts_of,
    config_from_recorded,
    next_prompt,
    next_prompt_of,
    prompt_at,
    prompt_of,
    shared_prefix,
    version_changes,
)
from holon.replay.reading import Reader, fold_seeing, records_by_scan
from holon.replay.refs import LedgerRefSource
from holon.replay.resume import Checkpoints, Resume, ledger_projection
from holon.replay.stats import LedgerStats, SectionStats, ledger_stats
from holon.replay.turns import TurnSpan, find_turn, turn_spans
from holon.replay.verify import LedgerVerification, verify_ledger

__all__ = [
    "APPENDED",
    "DEFAULT_BUDGET",
    "Checkpoints",
    "ImportedPrefix",
    "LedgerRefSource",
    "LedgerStats",
    "LedgerVerification",
    "MemoryView",
    "PromptAt",
    "PromptCheck",
    "PromptStatus",
    "PromptSummary",
    "PromptsSummary",
    "Reader",
    "RenderOverrides",
    "Replay",
    "Resume",
    "SectionStats",
    "TurnReplay",
    "TurnSpan",
    "append_evidence",
    "check_prompts",
    "check_prompts_of",
    "config_from_recorded",
    "describe_projection",
    "find_turn",
    "fold_seeing",
    "imported_prefix",
    "ledger_projection",
    "ledger_stats",
    "memory_at",
    "memory_of",
    "next_prompt",
    "next_prompt_of",
    "projection_config_of",
    "prompt_at",
    "prompt_of",
    "recorded_projection",
    "records_by_scan",
    "replay_of",
    "replay_turns",
    "shared_prefix",
    "state_after",
    "state_to_append_to",
    "turn_spans",
    "verify_ledger",
    "version_changes",
]

# Names holon/replay.py imported for its own use when it was one module, and so could be
# imported from it though they were never its API: still resolved (one release), with a
# DeprecationWarning naming their home. Module -> the names it holds.
_FORMERLY_IMPORTED: Final = {
    "holon.context": "Budget EpisodeIndex EvidenceBuffer EvidenceView PendingView Prompt RENDER_VERSION "
    "RenderConfig build_context get_estimator",
    "holon.context.sections": "SECTION_ORDER",
    "holon.context.causes": "omission_cause",
    "holon.ledger": "Ledger",
    "holon.ledger.frames": "OVERSIZED_ADVICE",
    "holon.ledger.blobs": "blob_hash",
    "holon.projections": "ActiveEpisodeBuilder DEFAULT_CONFIG ProjectionConfig ProjectionState "
    "WorkingMemorySnapshot WorkingMemoryState apply fold initial_state owed_refresh post_turn_refresh "
    "refresh_before_prompt snapshot_lines stated_config unstated_config_derives",
    "holon.errors": "InvalidRecord RefNotFound UsageError",
    "__future__": "annotations",
    "collections": "Counter",
    "collections.abc": "Callable Iterable Iterator Sequence",
    "typing": "Any Final NamedTuple Protocol cast runtime_checkable",
}
# ... and the modules it imported: name -> module.
_FORMER_MODULES: Final = {"r": "holon.records", "msgspec": "msgspec", "itertools": "itertools", "re": "re"}


# Not seen by type checkers: a name missing from here stays an error for them.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """A name the single module imported for its own use (:data:`_FORMERLY_IMPORTED`), with a warning."""
        home = _FORMER_MODULES.get(name) or next(
            (module for module, names in _FORMERLY_IMPORTED.items() if name in names.split()), None
        )
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        warnings.warn(
            f"holon.replay.{name} is not part of holon.replay's API; import it from {home}",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(home)
        return module if name in _FORMER_MODULES else getattr(module, name)
