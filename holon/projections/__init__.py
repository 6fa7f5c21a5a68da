"""Memory projections: pure folds from ledger records to working memory and episodes.

No I/O, no clock, no randomness, no hash-order iteration: the same records give the
same state, snapshots, deltas and episodes in any process. See docs/memory-model.md.

- :class:`RuntimeState` / :func:`apply_runtime` — what the agent knows now.
- :class:`WorkingMemorySnapshot` / :func:`derive_snapshot` / :func:`snapshot_lines` —
  the structured working memory derived from it.
- :class:`WorkingMemoryState` — revision, pending delta, epoch, episode builder, archive.
- :class:`ProjectionState` / :func:`apply` / :func:`fold` — both folded together.
- :func:`refresh_working_memory` / :func:`refresh_episode_memory` /
  :func:`post_turn_refresh` — the post-turn refresh producing derived records
  (:func:`owed_refresh`: what of it a ledger cut short still owes);
  :func:`refresh_before_prompt` — the mid-turn refresh when working memory states
  something the turn made untrue (:func:`superseded_fields`).
- :func:`derived_before` / :func:`derived_after` — the one rule every writer follows: which
  of those derived records a record brings with it, before and after it.
- :func:`verify_derivations` — replay verification; :func:`unstated_config_derives` — what a
  ledger that states no config lacks under one.
- :func:`encode_checkpoint` / :func:`restore_checkpoint` — checkpoint bytes;
  :func:`encode_archive_chunk` / :func:`decode_archive_chunk` — an archive chunk one names.

What it may import: :mod:`holon.records`, :mod:`holon.errors`, msgspec, zstandard and the
stdlib, but no clock, randomness, environment or file system: it is a pure layer
(tests/test_layers.py holds it).
"""

from holon.projections.checkpoint import (
    CHECKPOINT_MAGIC,
    CheckpointKey,
    CheckpointRejected,
    decode_archive_chunk,
    encode_archive_chunk,
    encode_checkpoint,
    read_checkpoint_key,
    restore_checkpoint,
)
from holon.projections.config import DEFAULT_CONFIG, PROJECTION_VERSION, ProjectionConfig, stated_config
from holon.projections.derive import derived_after, derived_before
from holon.projections.memory import (
    ARCHIVE_CHUNK,
    ActiveEpisodeBuilder,
    EpisodeArchive,
    TurnInterval,
    WorkingMemoryState,
    apply_memory,
)
from holon.projections.projection import ProjectionState, apply, fold, initial_state
from holon.projections.refresh import (
    BOUNDARY_ORDER,
    DELTA_REASON_PRECEDENCE,
    DeltaSince,
    boundary_reasons,
    changed_fields,
    delta_lines,
    owed_refresh,
    post_turn_refresh,
    refresh_before_prompt,
    refresh_episode_memory,
    refresh_working_memory,
    superseded_fields,
)
from holon.projections.snapshot import (
    SNAPSHOT_FIELDS,
    DecisionRef,
    FailingRef,
    FileRef,
    FollowUpRef,
    SnapshotPlanStep,
    TaskRef,
    WaitRef,
    WorkingMemorySnapshot,
    derive_snapshot,
    failing_line,
    snapshot_lines,
    task_activity,
    task_head,
)
from holon.projections.state import (
    DERIVED_WORK_PREFIX,
    BriefEntry,
    CarriedRecord,
    DecisionEntry,
    EnvironmentEntry,
    FailingCheck,
    FileTouch,
    FollowUpEntry,
    MandateEntry,
    MessageEntry,
    PlanEntry,
    PolicyEntry,
    PromptEntry,
    RequestEntry,
    ResultEntry,
    RuntimeState,
    SummaryEntry,
    TaskEntry,
    ToolExecution,
    TurnState,
    WaitEntry,
    WorkItemEntry,
    apply_runtime,
    derived_work,
    queued_work,
    task_job,
    waiting_work,
)
from holon.projections.verify import (
    Divergence,
    FieldDiff,
    VerificationReport,
    diff_records,
    unstated_config_derives,
    verify_derivations,
)

__all__ = [
    "ARCHIVE_CHUNK",
    "BOUNDARY_ORDER",
    "CHECKPOINT_MAGIC",
    "DEFAULT_CONFIG",
    "DELTA_REASON_PRECEDENCE",
    "DERIVED_WORK_PREFIX",
    "PROJECTION_VERSION",
    "SNAPSHOT_FIELDS",
    "ActiveEpisodeBuilder",
    "BriefEntry",
    "CarriedRecord",
    "CheckpointKey",
    "CheckpointRejected",
    "DecisionEntry",
    "DecisionRef",
    "DeltaSince",
    "Divergence",
    "EnvironmentEntry",
    "EpisodeArchive",
    "FailingCheck",
    "FailingRef",
    "FieldDiff",
    "FileRef",
    "FileTouch",
    "FollowUpEntry",
    "FollowUpRef",
    "MandateEntry",
    "MessageEntry",
    "PlanEntry",
    "PolicyEntry",
    "ProjectionConfig",
    "ProjectionState",
    "PromptEntry",
    "RequestEntry",
    "ResultEntry",
    "RuntimeState",
    "SnapshotPlanStep",
    "SummaryEntry",
    "TaskEntry",
    "TaskRef",
    "ToolExecution",
    "TurnInterval",
    "TurnState",
    "VerificationReport",
    "WaitEntry",
    "WaitRef",
    "WorkItemEntry",
    "WorkingMemorySnapshot",
    "WorkingMemoryState",
    "apply",
    "apply_memory",
    "apply_runtime",
    "boundary_reasons",
    "changed_fields",
    "decode_archive_chunk",
    "delta_lines",
    "derive_snapshot",
    "derived_after",
    "derived_before",
    "derived_work",
    "diff_records",
    "encode_archive_chunk",
    "encode_checkpoint",
    "failing_line",
    "fold",
    "initial_state",
    "owed_refresh",
    "post_turn_refresh",
    "refresh_before_prompt",
    "queued_work",
    "read_checkpoint_key",
    "refresh_episode_memory",
    "refresh_working_memory",
    "superseded_fields",
    "restore_checkpoint",
    "snapshot_lines",
    "stated_config",
    "task_activity",
    "task_head",
    "task_job",
    "unstated_config_derives",
    "verify_derivations",
    "waiting_work",
]
