"""The runtime facade: one agent, its ledger, its projections and its renderer.

:class:`Agent` is the only place that composes the layers. It appends input and runtime
records to the ledger, folds each one into the live :class:`~holon.projections.ProjectionState`,
and at every turn boundary runs the post-turn refresh and appends the derived records
it returns — so the ledger alone reproduces everything the agent saw.

>>> with Agent.open(".agent", agent_id="a1") as agent:  # doctest: +SKIP
...     with agent.turn(input="summarise README.md") as turn:
...         prompt = turn.context()
...         call = turn.tool("read_file", {"path": "README.md"}, idempotency_key="r1")
...         text = call.run(lambda: Path("README.md").read_text())
...         turn.record_message("It describes holon.")

See docs/daemon-guide.md for the integration, the tool WAL and the failure model.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias, get_args

import msgspec

import holon.records as r
from holon.context import (
    Budget,
    EpisodeIndex,
    EpisodeIndexRejected,
    EvidenceBuffer,
    PendingView,
    Prompt,
    RenderConfig,
    build_context,
    get_estimator,
    prompt_rendered,
    restore_bytes,
)
from holon.context.render import describe_projection, projection_stated, token_counter
from holon.context.rounds import (
    bounded_count,
    call_line,
    is_model_output,
    result_head,
    round_text,
    rounds_fit,
)
from holon.errors import InvalidRecord, InvalidRef, LedgerCorrupt, NotALedger, RefNotFound, UsageError
from holon.ledger import (
    DEFAULT_BLOB_THRESHOLD,
    DEFAULT_SEGMENT_BYTES,
    FsyncPolicy,
    Ledger,
    interrupted_create,
)
from holon.projections import (
    DEFAULT_CONFIG,
    CheckpointRejected,
    ProjectionConfig,
    ProjectionState,
    RuntimeState,
    WorkingMemorySnapshot,
    WorkingMemoryState,
    apply,
    derived_after,
    derived_before,
    initial_state,
    stated_config,
    unstated_config_derives,
)
from holon.runtime.checkpoints import (
    CheckpointChunks,
    ToolIndex,
    UnknownOutcome,
    list_checkpoints,
    load_checkpoint,
    load_episode_index,
    prune_checkpoints,
    write_checkpoint,
)
from holon.runtime.recall import (
    GET_TOOL,
    RECALL_PAGE_CHARS,
    RECALL_TOOL_NAMES,
    AgentRefSource,
    RestoredText,
    blob_text_of,
    get_text,
    is_recall,
    recall_args,
    search_text,
)
from holon.search import MemoryHit, MemorySearch

__all__ = ["Agent", "AgentConfig", "OpenReport", "ToolCall", "Turn", "TurnSummary"]

log = logging.getLogger("holon.runtime")

Outcome = Literal["completed", "waiting", "failed", "interrupted"]
# "unknown" too: a daemon that cannot tell whether the effect happened (a remote call
# that timed out) says so, as the runtime does for a call a crash interrupted.
ToolStatus = Literal["ok", "error", "interrupted", "unknown"]

# Kinds only the runtime itself writes: a caller recording one would break the turn
# structure or forge a derived record.
_RUNTIME_KINDS: Final = frozenset(
    {r.TurnStarted.KIND, r.TurnEnded.KIND, r.PromptRendered.KIND, r.ModelCall.KIND, *r.DERIVED_KINDS}
)
_INPUT_ROLES: Final = ("user", "operator", "channel")
_PREVIEW_CHARS: Final = 200
# Records appended since the last search that the agent keeps for the next one. Past this
# many, it drops them and the next search reads them back from the ledger instead.
_SEARCH_PENDING: Final = 10_000


def _checked(record: r.Record) -> r.Record:
    """The record as it will be stored, validated by a round trip through the wire form.

    Struct constructors do not check ``Literal`` fields, so this runs *before* anything
    is appended; the decoded form is what gets folded, not the caller's object (a list
    where the schema says tuple would make the live state differ from a cold replay's).
    """
    try:
        stored = r.decode_msgpack_record(r.encode_msgpack_record(record), where="the record to append")
    except UnicodeEncodeError as exc:
        raise _not_utf8(exc) from None
    except (msgspec.EncodeError, TypeError, OverflowError) as exc:
        raise InvalidRecord(f"record does not encode ({exc})", where="the record to append") from None
    r.check_json_fields(stored, where="the record to append")  # as the ledger will (bytes, NaN)
    return stored


def _not_utf8(exc: UnicodeEncodeError) -> InvalidRecord:
    # Lone surrogates are what errors="surrogateescape" makes of non-UTF-8 bytes (file
    # names, subprocess output); the ledger stores UTF-8 only.
    return InvalidRecord(
        f"text is not valid UTF-8 ({exc}): decode bytes with errors='replace' or 'backslashreplace' "
        "before recording them",
        where="the record to append",
    )


def _error_text(exc: BaseException) -> str:
    """An exception as the runtime records it (``Type: message``), always storable.

    Its message may carry lone surrogates (a non-UTF-8 file name or command output decoded
    with surrogateescape); recorded verbatim, the turn_ended or error result would not
    encode, leaving the turn or call open and hiding the caller's exception.
    """
    return f"{type(exc).__name__}: {exc}".encode("utf-8", "backslashreplace").decode("utf-8")


def _strings(value: tuple[str, ...], field: str) -> tuple[str, ...]:
    """A tuple-of-strings argument as a tuple, refusing a bare string.

    ``tuple("src/app.py")`` is ten one-character strings, which would validate and be
    recorded as such.
    """
    if isinstance(value, str):
        raise InvalidRecord(
            f"expected a tuple of strings, got the string {value!r}: pass ({value!r},)",
            where="the record to append",
            field=field,
        )
    return tuple(value)


# How many known ids a refusal lists (open work items, open waits, running tasks...).
_LISTED_IDS: Final = 5


def _listed(ids: list[str]) -> str:
    """Up to :data:`_LISTED_IDS` ids, quoted, and how many more: ``'W1', 'W2' and 3 more``, or ``none``."""
    if not ids:
        return "none"
    shown = ", ".join(repr(i) for i in ids[:_LISTED_IDS])
    return shown if len(ids) <= _LISTED_IDS else f"{shown} and {len(ids) - _LISTED_IDS} more"


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default clock of an agent."""
    return time.time_ns() // 1_000_000


# How many records after a derived record's evidence its seq is looked for (a delta stands
# right after it, an episode after the delta of the same refresh).
_DERIVED_SEARCH: Final = 3


def _derived_seq(ledger: Ledger, body: r.WorkingMemoryDelta | r.ContextEpisodeRecord) -> int | None:
    """Where ``body`` (the state's newest delta or episode) stands in the ledger; ``None``: not found.

    The state keeps the record, not its seq: only an error message needs it, so it is read here.
    """
    after = body.evidence_to_seq if isinstance(body, r.WorkingMemoryDelta) else body.to_seq
    for record in ledger.read(after + 1, after + 1 + _DERIVED_SEARCH):
        if record.body == body:
            return record.seq
    return None


# A prompt (its seq) or a derived record that states a projection config.
_Stating: TypeAlias = int | r.WorkingMemoryDelta | r.ContextEpisodeRecord


def _stated_order(item: tuple[ProjectionConfig, _Stating]) -> tuple[int, int]:
    """Where a record stating a config stands: a delta follows its evidence, an episode the delta."""
    record = item[1]
    if isinstance(record, int):
        return record, 0
    if isinstance(record, r.WorkingMemoryDelta):
        return record.evidence_to_seq + 1, 0
    return record.to_seq + 1, 1


def _check_projection(ledger: Ledger, state: ProjectionState, config: ProjectionConfig) -> None:
    """Refuse to go on deriving under a projection config other than the ledger's records state.

    The post-turn refresh would append deltas and episodes derived under ``config`` after
    ones derived under the old config, and no single config re-derives both: `holon verify`
    and `replay --check` would report the ledger divergent from then on. The newest delta
    and the newest episode state the config they were derived under (from projection
    version 9 on; also in a ledger whose turns never rendered a prompt), the last prompt
    the one it was rendered under (from render version 7 on); each one that states a config
    must state ``config``. Checked before recovery appends anything, so a refused open
    leaves the ledger as it was.
    """
    # (config, the record stating it): a prompt's seq, or a derived body (found by seq on error).
    stated: list[tuple[ProjectionConfig, _Stating]] = []
    last = state.runtime.last_prompt
    if last is not None:
        prompt = projection_stated(last.prompt.render_config, where=f"seq {last.seq}")
        if prompt is not None:
            stated.append((prompt, last.seq))
    memory = state.memory
    for derived in (memory.latest_delta, *memory.archive.latest(1)):
        if derived is None:
            continue
        found = stated_config(derived)
        if found is not None:
            stated.append((found, derived))
    if not stated:
        _check_unstated(ledger, state, config)
        return
    # Newest first, so the record named is the newest that states another config.
    stated.sort(key=_stated_order, reverse=True)

    def named(record: _Stating) -> str:
        if isinstance(record, int):
            return f"its prompt at seq {record}"
        seq = _derived_seq(ledger, record)
        return f"its {record.KIND} at seq {seq}" if seq is not None else f"its newest {record.KIND}"

    other = next(((c, record) for c, record in stated if c != config), None)
    if other is None:
        return
    have, record = other
    clash = next(((c, second) for c, second in stated if c != have), None)
    if clash is not None:
        # The ledger states two configs already: neither re-derives all of its records.
        raise UsageError(
            f"ledger {ledger.path} states two projection configs: {named(record)} records "
            f"{describe_projection(have)}, {named(clash[1])} records {describe_projection(clash[0])}; its "
            "derived records cannot be verified from seq 0 under either (`holon verify` names where they "
            "part): start a new ledger"
        )
    raise UsageError(
        f"ledger {ledger.path} was derived under {describe_projection(have)} ({named(record)} records it), "
        f"but this agent is configured with {describe_projection(config)}: "
        "records derived under two configs can no longer be verified from seq 0. Open it with "
        f"AgentConfig(projection={describe_projection(have)}), or start a new ledger for the new config"
    )


def _check_unstated(ledger: Ledger, state: ProjectionState, config: ProjectionConfig) -> None:
    """Refuse ``config`` for a ledger that states no config when its turns would derive under it
    what it lacks (:func:`~holon.projections.unstated_config_derives`): recovery would append the
    last turn's records under it, and `holon verify` report the ledger divergent for good."""
    lacking = unstated_config_derives(state, config, lambda: ledger.read(0, state.seq + 1))
    if lacking is not None:
        raise UsageError(
            f"ledger {ledger.path} holds no derived record, but under {describe_projection(config)} "
            f"{lacking}: it was written under another projection config, or without the post-turn "
            "refresh, and records derived under this one would not verify from seq 0. Open it with "
            "the AgentConfig.projection it was written under, or start a new ledger"
        )


def _floor_ts(floor: int, record: r.Record, path: Path) -> int:
    """The floor of later timestamps after ``record``: its ts, unless it is out of range.

    A ledger written before the ledger checked ``ts`` may hold a nanosecond reading; as
    the floor it would make every later append fail (the ledger refuses it now), so it
    is skipped, with a warning naming it (``holon verify`` lists such records too).
    """
    if r.MIN_TS <= record.ts <= r.MAX_TS:
        return record.ts
    log.warning(
        "ledger %s: seq %d has ts %d, outside %d..%d (milliseconds since the epoch); later "
        "timestamps do not follow it",
        path,
        record.seq,
        record.ts,
        r.MIN_TS,
        r.MAX_TS,
    )
    return floor


class AgentConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How an agent renders, stores and checkpoints.

    - ``budget`` / ``render``: the prompt budget and render knobs for :meth:`Turn.context`.
    - ``projection``: the projection config (part of every checkpoint's key).
    - ``fsync``: the ledger's fsync policy. Whatever it is, the runtime flushes at every
      :meth:`Turn.context` call that follows new records (before every model call), before
      every tool side effect (the tool WAL) and at every turn end; ``batch`` (default) fsyncs exactly there,
      ``always`` also after every record, ``never`` hands bytes to the OS without fsync
      (survives ``kill -9``, not a power loss).
    - ``checkpoint_every``: write a checkpoint after every turn whose index is a
      multiple of N (0: never);
      ``checkpoints_kept``: how many to keep.
    - ``segment_bytes`` / ``blob_threshold``: used when the ledger is created.
    - ``recall_page_chars``: the most characters of restored text one ``holon_get`` call
      returns (:meth:`Turn.recall`); a longer text comes in pages, each ending with a
      one-line note naming the next offset, which adds at most
      :data:`~holon.runtime.recall.NOTE_CHARS` (200) characters.
    """

    budget: Budget = Budget(context_window=32_000, output_reserve=4_000)
    render: RenderConfig = RenderConfig()
    projection: ProjectionConfig = DEFAULT_CONFIG
    fsync: FsyncPolicy = "batch"
    checkpoint_every: int = 100
    checkpoints_kept: int = 2
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    blob_threshold: int = DEFAULT_BLOB_THRESHOLD
    recall_page_chars: int = RECALL_PAGE_CHARS

    def __post_init__(self) -> None:
        if self.checkpoint_every < 0 or self.checkpoints_kept < 1:
            raise ValueError("AgentConfig: checkpoint_every must be >= 0 and checkpoints_kept >= 1")
        if self.recall_page_chars < 1:
            raise ValueError(f"AgentConfig: recall_page_chars must be >= 1, got {self.recall_page_chars}")


class OpenReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`Agent.open` found and did.

    - ``created``: a new ledger was created.
    - ``checkpoint_seq``: the seq of the checkpoint resumed from (``None``: full fold);
      ``rejected``: checkpoints that were not trusted, newest first, with the reason.
    - ``folded``: records folded on open (the tail after the checkpoint, or all).
    - ``interrupted_turn``: the turn left open by a crash, closed now as interrupted.
    - ``unknown_outcomes``: tool intents without a result, recorded now as ``unknown``.
    - ``ledger_recovery``: what the ledger repaired (a torn tail cut, a seal finished).
    - ``completed_refresh``: derived records appended now because the post-turn refresh
      of the last turn was cut short (its ``turn_ended`` reached the disk, not all of
      what it derives).
    - ``episode_index``: ``restored`` (the BM25 episode index was read from the
      checkpoint's ``.episodes`` file, plus the episodes archived after it) or ``built``
      (it is built from the whole archive on first use: no checkpoint was used, or its
      index file was rejected); ``episode_index_rejected``: why the checkpoint's index
      file was not used (``missing``, ``corrupt`` or ``stale``).
    """

    created: bool
    checkpoint_seq: int | None = None
    rejected: tuple[tuple[str, CheckpointRejected], ...] = ()
    folded: int = 0
    interrupted_turn: int | None = None
    unknown_outcomes: tuple[UnknownOutcome, ...] = ()
    ledger_recovery: tuple[str, ...] = ()
    completed_refresh: int = 0
    episode_index: Literal["restored", "built"] = "built"
    episode_index_rejected: EpisodeIndexRejected | None = None


class TurnSummary(msgspec.Struct, frozen=True, kw_only=True):
    """How a turn ended and what its post-turn refresh derived."""

    turn: int
    outcome: Outcome
    first_seq: int
    last_seq: int
    deltas: tuple[r.WorkingMemoryDelta, ...] = ()
    episodes: tuple[r.ContextEpisodeRecord, ...] = ()
    checkpoint_seq: int | None = None


class Agent:
    """A long-lived agent backed by one ledger; the single writer of that ledger.

    Build one with :meth:`open`; close it (or use ``with``). Not thread-safe: one
    thread drives an agent, one turn at a time.
    """

    def __init__(
        self,
        ledger: Ledger,
        state: ProjectionState,
        tools: ToolIndex,
        *,
        config: AgentConfig,
        clock: Callable[[], int],
    ) -> None:
        """Use :meth:`open`."""
        self._ledger = ledger
        self._state = state
        self._tools = tools
        # The evidence the prompts' history is read from: what this agent appends, and the
        # ledger for what came before it (a history reaching back past a reopen).
        self._evidence = EvidenceBuffer(start=state.seq + 1, older=ledger.read, blob=ledger.get_blob)
        self.config = config
        self._clock = clock
        self._last_ts = 0
        self._index: EpisodeIndex | None = None
        # The chunk files the checkpoint resumed from names (and each checkpoint writes):
        # the next checkpoint names them instead of writing the archive and its index again.
        self._chunks = CheckpointChunks()
        # Built from the ledger on the first search. From then on the records appended are
        # kept (``_unsearched``) and the next search indexes them: reading them back, even
        # none, walks the ledger's active segment from its start (up to 8 MB, ~15 ms at 3 MB)
        # on every call. None: more than _SEARCH_PENDING were appended, read them back.
        self._search: MemorySearch | None = None
        self._searched_to = 0  # the next seq the search index has not seen
        self._unsearched: list[r.Record] | None = None
        # The text holon_get last paged, so each next page does not restore it again;
        # dropped when a turn ends (a daemon pages through an output within a turn).
        self._restored = RestoredText()
        self._turn: Turn | None = None
        self._unfinished_refresh: tuple[r.Record, ...] = ()
        self._tail_ts = 0  # the ts of the newest record (set on open from the ledger)
        # The newest seq this agent flushed (set on open: what the ledger holds is on disk).
        self._flushed_seq = state.seq
        self._closed = False
        # Why this agent's live state can no longer be trusted to match its ledger (an
        # append folded only in part, a post-turn refresh cut short): it refuses more use.
        self._stale: str | None = None
        # Held while the agent appends (and through a turn's end, a render, an intent's
        # flush): a second thread appending at the same time broke the hash chain.
        self._busy = threading.RLock()
        self.report = OpenReport(created=False)

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        agent_id: str | None = None,
        config: AgentConfig | None = None,
        clock: Callable[[], int] | None = None,
        policy: r.SystemPolicy | None = None,
        create: bool = True,
    ) -> Agent:
        """Create the ledger at ``path``, or resume the one there.

        A missing path or an empty directory gets a new ledger (``agent_id`` required),
        unless ``create`` is false: then it raises NotALedger, so a daemon restarted with a
        mistyped path does not start over as a blank agent.
        An existing ledger is resumed from its newest valid checkpoint plus the records
        after it (or a full fold); a turn left open by a crash is closed as
        ``interrupted`` and tool intents without a result are recorded as ``unknown``
        (see :attr:`report`). ``policy``, when given and different from the ledger's
        current system policy, is recorded. ``clock`` returns milliseconds (default:
        wall clock); timestamps never go backwards within a ledger.

        Raises NotALedger (the path holds something else), LedgerLocked (another
        process writes it), UsageError (``agent_id`` differs from the ledger's, or
        ``config.projection`` from the projection config its derived records and prompts
        record, or, when they record none, is one under which its turns derive records
        it lacks).
        """
        config = config or AgentConfig()
        root = Path(path)
        # What a create killed before its header left (no record: nothing was appended yet)
        # is created again, as `Ledger.create` does, so a daemon whose first start crashed starts.
        created = not root.exists() or (
            root.is_dir() and (not any(root.iterdir()) or interrupted_create(root))
        )
        if created and not create:
            raise NotALedger(
                f"no ledger at {root} (create=False): check the path, or open it with create=True "
                "to start a new agent there"
            )
        if created:
            if agent_id is None:
                raise UsageError(f"no ledger at {root}: pass agent_id=... to create one")
            ledger = Ledger.create(
                root,
                agent_id=agent_id,
                fsync=config.fsync,
                segment_bytes=config.segment_bytes,
                blob_threshold=config.blob_threshold,
            )
        else:
            if not root.is_dir():
                raise NotALedger(f"{root} is a file, not a holon ledger directory")
            ledger = Ledger.open(root, fsync=config.fsync)
        try:
            if agent_id is not None and agent_id != ledger.agent_id:
                raise UsageError(
                    f"ledger {root} belongs to agent {ledger.agent_id!r}, not {agent_id!r}; "
                    "open it without agent_id or with the right one"
                )
            agent = cls._resume(ledger, config, clock or wall_clock_ms, created=created)
            if policy is not None:
                # Compared in wire form, as the policy is stored (a list where the schema
                # says tuple reads back as a tuple, a tuple inside the JSON schema as a list):
                # compared as given, an unchanged policy was recorded again at every open.
                given = _checked(r.Record(body=policy, ts=0)).body
                current = agent._state.runtime.policy
                if current is None or current.policy != given:
                    agent._append(policy, None)
                    agent._flush()
        except BaseException:
            ledger.close()
            raise
        return agent

    @classmethod
    def _resume(
        cls, ledger: Ledger, config: AgentConfig, clock: Callable[[], int], *, created: bool
    ) -> Agent:
        head = ledger.head()
        rejected: list[tuple[str, CheckpointRejected]] = []
        state: ProjectionState | None = None
        tools = ToolIndex()
        checkpoint_seq: int | None = None
        checkpoint: tuple[Path, str] | None = None
        chunks = CheckpointChunks()
        folded = 0
        last_ts = 0

        def tail(seq: int) -> list[r.Record]:
            return list(ledger.read(seq + 1))

        for _seq, path in list_checkpoints(ledger.path):
            loaded = load_checkpoint(path, head=head, tail=tail, config=config.projection, chunks=chunks)
            if isinstance(loaded, CheckpointRejected):
                rejected.append((path.name, loaded))
                log.warning(
                    "ledger %s: checkpoint %s rejected (%s: %s); trying an older one",
                    ledger.path,
                    path.name,
                    loaded.reason,
                    loaded.detail,
                )
                continue
            state, tools, records = loaded
            checkpoint_seq = state.seq
            checkpoint = (path, tools.head_hash)
            for record in records:
                state = apply(state, record)
                tools.apply(record)
                last_ts = _floor_ts(last_ts, record, ledger.path)
            folded = len(records)
            break
        if state is None:
            if rejected:
                log.warning("ledger %s: no valid checkpoint; folding all records", ledger.path)
            state = initial_state(config.projection)
            for record in ledger.read(0):
                state = apply(state, record)
                tools.apply(record)
                last_ts = _floor_ts(last_ts, record, ledger.path)
                folded += 1
        _check_projection(ledger, state, config.projection)
        agent = cls(ledger, state, tools, config=config, clock=clock)
        agent._chunks = chunks
        agent._last_ts = last_ts if folded else agent._last_record_ts()
        agent._tail_ts = agent._last_ts
        # A crash between a turn_ended and the end of its refresh: append the rest on open.
        agent._unfinished_refresh = derived_before(state, tail_ts=agent._tail_ts)
        index_rejected: EpisodeIndexRejected | None = None
        if checkpoint is not None and checkpoint_seq is not None:
            # Restored before recovery, so episodes its refresh archives are added to it.
            restored = load_episode_index(
                checkpoint[0],
                seq=checkpoint_seq,
                head_hash=checkpoint[1],
                episodes=state.memory.archive,
                chunks=chunks,
            )
            if isinstance(restored, EpisodeIndexRejected):
                index_rejected = restored
                log.warning(
                    "ledger %s: saved episode index not used (%s: %s); it is rebuilt from %d episodes",
                    ledger.path,
                    restored.reason,
                    restored.detail,
                    state.memory.archive.count,
                )
            else:
                agent._index = restored
        completed_refresh = len(agent._unfinished_refresh)
        interrupted, unknown = agent._recover()
        agent.report = OpenReport(
            created=created,
            checkpoint_seq=checkpoint_seq,
            rejected=tuple(rejected),
            folded=folded,
            interrupted_turn=interrupted,
            unknown_outcomes=unknown,
            ledger_recovery=tuple(str(action) for action in ledger.recovery),
            completed_refresh=completed_refresh,
            episode_index="built" if agent._index is None else "restored",
            episode_index_rejected=index_rejected,
        )
        return agent

    def _last_record_ts(self) -> int:
        seq = self._state.seq
        return _floor_ts(0, self._ledger.get(seq), self._ledger.path) if seq >= 0 else 0

    def _recover(self) -> tuple[int | None, tuple[UnknownOutcome, ...]]:
        """Close what a crash left open, as records (recorded, not guessed)."""
        if self._unfinished_refresh:
            # The process died after a turn_ended reached the disk and before (all of)
            # its derived records did: append the rest, exactly as the refresh derives them.
            for record in self._unfinished_refresh:
                self._index_episode(self._append(record.body, record.turn, ts=record.ts))
            log.warning(
                "ledger %s: the post-turn refresh of the last turn was cut short; appended its %d "
                "missing derived record(s)",
                self._ledger.path,
                len(self._unfinished_refresh),
            )
            self._unfinished_refresh = ()
            self._flush()
        turn = self._state.runtime.turn
        open_turn = turn.index if turn is not None and turn.open and turn.started_seq is not None else None
        pending = list(self._tools.pending.values())
        if open_turn is None and not pending:
            return None, ()
        # What recovery records happened when the process died, not when it was restarted:
        # stamped with the last record's time (the latest moment the ledger knows of), so
        # the dead turn's duration and a call's result time do not include the downtime.
        crashed_at = self._tail_ts
        unknown: list[UnknownOutcome] = []
        for intent in pending:
            # Recorded in the open turn (the one that died), or outside any turn.
            in_turn = open_turn
            stored = self._append(
                r.ToolResult(
                    call_id=intent.call_id,
                    tool=intent.tool,
                    status="unknown",
                    output=(
                        "outcome unknown: the process ended after this call's intent was recorded and "
                        "before its result was; check its effects before retrying"
                    ),
                ),
                in_turn,
                ts=crashed_at,
            )
            unknown.append(self._tools.unknown[-1])
            assert self._tools.unknown[-1].recorded_seq == stored.seq
        if open_turn is not None:
            ended = self._append(
                r.TurnEnded(
                    outcome="interrupted",
                    error="the process ended while this turn was open; closed when the ledger was reopened",
                ),
                open_turn,
                ts=crashed_at,
            )
            self._refresh(ended)
            log.warning(
                "ledger %s: turn %d was left open, closed as interrupted; %d tool call(s) of unknown outcome",
                self._ledger.path,
                open_turn,
                len(unknown),
            )
        self._flush()
        return open_turn, tuple(unknown)

    # ------------------------------------------------------------------ reading

    @property
    def agent_id(self) -> str:
        """The agent this ledger belongs to."""
        return self._ledger.agent_id

    @property
    def ledger(self) -> Ledger:
        """The underlying ledger (read from it freely; append only through the agent)."""
        return self._ledger

    @property
    def path(self) -> Path:
        """The ledger directory."""
        return self._ledger.path

    @property
    def projection(self) -> ProjectionState:
        """The whole projection state (runtime state and working memory), at :attr:`seq`."""
        return self._state

    @property
    def state(self) -> RuntimeState:
        """What the agent knows now (the runtime fold)."""
        return self._state.runtime

    @property
    def memory(self) -> WorkingMemoryState:
        """Working-memory bookkeeping: revision, pending delta, epoch, episode builder, archive."""
        return self._state.memory

    @property
    def working_memory(self) -> WorkingMemorySnapshot:
        """The working-memory snapshot at the current revision."""
        return self._state.memory.snapshot

    @property
    def episodes(self) -> EpisodeIndex:
        """The archived episodes, indexed for search, kept current as episodes are archived.

        Restored on open from the checkpoint's saved index when it is valid (see
        ``report.episode_index``); otherwise built from the whole archive on first use.
        """
        if self._index is None:
            self._index = EpisodeIndex(self._state.memory.archive)
        return self._index

    def search(
        self, query: str, *, limit: int = 10, only: Literal["episodes", "evidence"] | None = None
    ) -> list[MemoryHit]:
        """Search the agent's archived episodes and evidence (BM25, as ``holon search`` does).

        The index is built from the ledger on the first call and extended by the records
        appended since on each later one (the agent keeps them for it rather than reading
        them back); it holds each searchable record's postings, not its text (a hit's record
        is read back from the ledger; a blob-stored output is searched by its text, read
        from the blob store), and an agent that never searches pays nothing.
        Recall calls themselves are left out: a search would find its own query, and a
        restored text would be found twice.
        """
        self._check_open()
        # Checked here: a limit below 1 or an unknown `only` returned no hits, which reads
        # as "nothing matches", and a non-string query failed deep in the tokenizer.
        if not isinstance(query, str):
            raise UsageError(f"search query must be a string, got {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"search limit must be an integer >= 1, got {limit!r}")
        if only not in (None, "episodes", "evidence"):
            raise UsageError(f"search only= must be None, 'episodes' or 'evidence', got {only!r}")
        if self._search is None:
            self._search = MemorySearch(blob_text=blob_text_of(self._ledger), read_record=self._ledger.get)
        kept, self._unsearched = self._unsearched, []
        unsearched: Iterable[r.Record] = kept or ()
        # The kept records, when they are exactly the ones not indexed yet; otherwise (none
        # kept, too many, or a search cut short) what is missing is read from the ledger.
        if kept is None or (kept[0].seq if kept else self._state.seq + 1) != self._searched_to:
            unsearched = self._ledger.read(from_seq=self._searched_to, to_seq=self._state.seq + 1)
        for record in unsearched:
            if not is_recall(record):
                self._search.add(record)
            self._searched_to = record.seq + 1
        return self._search.search(query, limit=limit, only=only)

    def get_text(self, ref: str, *, offset: int = 0) -> str:
        """The text behind a prompt's ref, one page of ``config.recall_page_chars`` from ``offset``.

        What the ``holon_get`` recall tool returns (see :func:`holon.runtime.recall.get_text`);
        :meth:`get_bytes` gives the whole original bytes instead.
        """
        self._check_open()
        if not isinstance(ref, str):
            raise InvalidRef(f"a ref is a string (ledger:<seq>, blob:<hash> or episode:<id>), got {ref!r}")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise UsageError(f"offset must be an integer, got {offset!r}")
        source = AgentRefSource(self._ledger, self.episodes)
        return get_text(
            ref, source, offset=offset, page_chars=self.config.recall_page_chars, kept=self._restored
        )

    def get_bytes(self, ref: str) -> bytes:
        """The whole original bytes behind a prompt's ref, as :func:`holon.context.restore_bytes` gives them.

        A cleared tool result restores to its full output (read from the blob store when it
        was stored there), a message to its text, an episode to its JSON encoding. Raises
        :class:`~holon.errors.InvalidRef` for a malformed ref and
        :class:`~holon.errors.RefNotFound` for one that names nothing in this ledger.
        """
        self._check_open()
        if not isinstance(ref, str):
            raise InvalidRef(f"a ref is a string (ledger:<seq>, blob:<hash> or episode:<id>), got {ref!r}")
        return restore_bytes(ref, AgentRefSource(self._ledger, self.episodes))

    @property
    def seq(self) -> int:
        """The seq of the newest record (``-1`` for an empty ledger)."""
        return self._state.seq

    @property
    def last_ts(self) -> int:
        """The timestamp of the newest record this agent knows of."""
        return self._last_ts

    @property
    def current_turn(self) -> Turn | None:
        """The open turn, if any."""
        return self._turn

    @property
    def next_turn_index(self) -> int:
        """The index the next turn will get (turns count from 1)."""
        turn = self._state.runtime.turn
        return 1 if turn is None or turn.index is None else turn.index + 1

    def unknown_outcomes(self) -> tuple[UnknownOutcome, ...]:
        """Every tool call of this ledger whose outcome is unknown, oldest first.

        A call lands here when the process ended between its durable intent and its
        result; :meth:`open` records it as a ``tool_result`` with status ``unknown``
        (``recorded_seq``) and the next prompts list it as continuation context. It is
        never executed again by the runtime; retrying its idempotency key returns the
        ``unknown`` result (see :meth:`Turn.tool`).
        """
        return tuple(self._tools.unknown)

    def recorded_call(self, idempotency_key: str) -> r.ToolResult | None:
        """The recorded result of the call made under ``idempotency_key``, if any."""
        entry = self._tools.keys.get(idempotency_key)
        if entry is None or entry.result_seq is None:
            return None
        body = self._ledger.get(entry.result_seq).body
        assert isinstance(body, r.ToolResult)
        return body

    def output_of(self, result: r.ToolResult) -> str:
        """A tool result's output text, read back from the blob store when it was moved there."""
        if result.blob is None:
            return result.output
        return self._ledger.get_blob(result.blob.hash).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ turns

    def turn(self, input: str | None = None, *, trigger: str = "user", role: str = "user") -> Turn:
        """Open the next turn: ``with agent.turn(input=..., trigger=...) as turn: ...``.

        Appends ``turn_started`` and, when ``input`` is given, the input as a message of
        ``role`` (user, operator or channel; it is the prompt's current input). Raises
        UsageError while another turn is open.
        """
        self._check_open()
        if self._turn is not None:
            raise UsageError(
                f"turn {self._turn.index} is still open; end it (leave its `with` block) before opening "
                "another: turns do not nest"
            )
        open_in_ledger = self._state.runtime.turn
        if open_in_ledger is not None and open_in_ledger.open and open_in_ledger.index is not None:
            # The last turn's end could not be recorded (its clock reading or its turn_ended
            # append failed): a new turn_started would nest inside it, and no open would
            # ever close it.
            raise UsageError(
                f"turn {open_in_ledger.index} is still open in ledger {self._ledger.path}: its end could "
                "not be recorded (see the error its `with` block raised); close this agent and open it "
                "again, which closes that turn as interrupted"
            )
        if input is not None and role not in _INPUT_ROLES:
            raise UsageError(f"input role {role!r} must be one of {', '.join(_INPUT_ROLES)}")
        index = self.next_turn_index
        # Both records are validated before either is appended: a bad input must not
        # leave a turn_started behind that no turn_ended will ever close.
        started = _checked(r.Record(body=r.TurnStarted(trigger=trigger), ts=self._now(), turn=index))
        message = (
            _checked(r.Record(body=r.Message(role=role, text=input), ts=self._now(), turn=index))  # type: ignore[arg-type]
            if input is not None
            else None
        )
        turn = Turn(self, index)
        self._turn = turn
        try:
            # In one all-or-nothing append: the ledger can still refuse the input (over its
            # payload limit), and a turn_started without its input would stay open.
            opening = [started] if message is None else [started, message]
            turn.first_seq = self._append_all_checked(opening)[0].seq
        except BaseException:
            self._turn = None
            raise
        return turn

    def preview(self, input: str | None = None, *, trigger: str = "user", role: str = "user") -> Prompt:
        """The prompt the next turn's first model call would see for ``input``, appending nothing.

        What ``with agent.turn(input, trigger=trigger, role=role) as turn: turn.context()``
        would render now — the same bytes, when the clock gives the same reading — but the
        turn's records are folded into a copy of the agent's state, not appended: the
        ledger's bytes, the working memory and the next turn's index are unchanged, and
        nothing is confirmed (the pending delta stays pending). Raises UsageError while a
        turn is open (its next prompt is :meth:`Turn.context`'s) and for a role
        :meth:`turn` refuses; an input the ledger would refuse is refused as :meth:`turn`
        refuses it, before anything is rendered.
        """
        self._check_open()
        if self._turn is not None:
            raise UsageError(
                f"turn {self._turn.index} is open: its next prompt is turn.context(); preview renders a new "
                "turn's first prompt, so call it between turns"
            )
        if input is not None and role not in _INPUT_ROLES:
            raise UsageError(f"input role {role!r} must be one of {', '.join(_INPUT_ROLES)}")
        index = self.next_turn_index
        ts = self._clock_reading()
        seq = self._state.seq
        opening = [r.TurnStarted(trigger=trigger)]
        if input is not None:
            opening.append(r.Message(role=role, text=input))  # type: ignore[arg-type]
        pending = [
            _checked(r.Record(body=body, ts=ts, turn=index, seq=seq + 1 + i))
            for i, body in enumerate(opening)
        ]
        state = self._state
        for record in pending:
            state = apply(state, record)
        for derived in derived_before(state, r.PromptRendered.KIND, tail_ts=pending[-1].ts):
            # As Turn.context appends them, before it renders.
            stored = msgspec.structs.replace(derived, seq=state.seq + 1)
            pending.append(stored)
            state = apply(state, stored)
        return build_context(
            state,
            self.config.budget,
            self.config.render,
            agent_id=self.agent_id,
            index=self.episodes,
            history=PendingView(self._evidence, pending),
        )

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"agent on ledger {self._ledger.path} is closed; open it again")
        if self._stale is not None:
            raise UsageError(
                f"agent on ledger {self._ledger.path} stopped: {self._stale}; its live state may no longer "
                "match the ledger, so it records nothing more: close it and open the ledger again, which "
                "folds what was recorded and completes what was cut short"
            )

    def _now(self) -> int:
        # Timestamps never go backwards in one ledger, even when the wall clock steps back.
        ts = self._clock_reading()
        self._last_ts = ts
        return ts

    def _clock_reading(self) -> int:
        """The timestamp the next record would get (the clock, checked, never before the last)."""
        now = self._clock()
        # Checked before it is kept: a float (time.time() * 1000) or an overflowing reading
        # became the floor of every later timestamp, so each record after it failed to
        # validate, with a message about a field, not the clock.
        if isinstance(now, bool) or not isinstance(now, int) or now >= 1 << 63:
            raise UsageError(
                f"the agent's clock returned {now!r}: it must return integer milliseconds since the "
                "epoch below 2**63, e.g. time.time_ns() // 1_000_000; nothing was recorded"
            )
        if not r.MIN_TS <= now <= r.MAX_TS:
            # time.time_ns or a microsecond clock passed as the clock: every timestamp of an
            # append-only ledger would be wrong for good, and the floor of all later ones.
            raise UsageError(
                f"the agent's clock returned {now:,}, which is not milliseconds since the epoch "
                "(negative, or past the year 5000: micro- or nanoseconds?); return "
                "time.time_ns() // 1_000_000; nothing was recorded"
            )
        return max(now, self._last_ts)

    def _append(self, body: r.Body, turn: int | None, *, ts: int | None = None) -> r.Record:
        """Append one record, fold it, and return it exactly as stored (and as replay reads it).

        ``ts`` defaults to the clock; derived records carry their turn_ended's ``ts``.
        """
        with self._exclusive():
            record = r.Record(body=body, ts=self._now() if ts is None else ts, turn=turn)
            if isinstance(body, r.ToolResult | r.TaskResult) and body.blob is None:
                record = self._place_output(record, body)
            return self._append_checked(_checked(record))

    def _append_checked(self, checked: r.Record) -> r.Record:
        """Append a record already validated by :func:`_checked`, fold it, return it as stored."""
        seq = self._ledger.append(checked)
        try:
            return self._fold_stored(msgspec.structs.replace(checked, seq=seq))
        except BaseException as exc:
            self._stop(f"seq {seq} was appended but not folded ({_error_text(exc)})")
            raise

    def _append_all_checked(self, records: list[r.Record]) -> list[r.Record]:
        """Append validated records all or none (:meth:`Ledger.append_many`), fold them, return them."""
        # The fold too: another thread's append between these records and their fold would
        # be folded before them, out of the ledger's order.
        with self._exclusive():
            seqs = self._ledger.append_many(records)
            try:
                return [
                    self._fold_stored(msgspec.structs.replace(record, seq=seq))
                    for record, seq in zip(records, seqs, strict=True)
                ]
            except BaseException as exc:
                self._stop(
                    f"seqs {seqs[0]}..{seqs[-1]} were appended but not all folded ({_error_text(exc)})"
                )
                raise

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Refuse (UsageError) a second thread using the agent while this one appends."""
        if not self._busy.acquire(blocking=False):
            raise UsageError(
                f"agent on ledger {self._ledger.path} is in use by another thread; nothing was recorded: "
                "an agent is driven by one thread at a time (hand it to another thread only between calls)"
            )
        try:
            yield
        finally:
            self._busy.release()

    def _flush(self) -> None:
        """Flush the ledger (fsynced under ``batch`` and ``always``), noting the seq now durable."""
        self._ledger.flush()
        self._flushed_seq = self._state.seq

    def _stop(self, why: str) -> None:
        """Refuse further use: the live state may differ from the ledger (KeyboardInterrupt mid-append).

        Going on would derive the post-turn refresh from a state the ledger does not
        reproduce, and `holon verify` would report the ledger divergent from then on.
        """
        if self._stale is None:
            self._stale = why

    def _fold_stored(self, stored: r.Record) -> r.Record:
        """Fold a record the ledger has just stored into the agent's state and tool log."""
        self._tail_ts = stored.ts
        self._state = apply(self._state, stored)
        self._evidence.add(stored)
        self._tools.apply(stored)
        unsearched = self._unsearched
        if unsearched is not None:  # the agent has searched: the next search indexes this
            if len(unsearched) < _SEARCH_PENDING:
                unsearched.append(stored)
            else:
                self._unsearched = None
        return stored

    def _place_output(self, record: r.Record, body: r.ToolResult | r.TaskResult) -> r.Record:
        """Move an output over the blob threshold to the blob store, keeping a preview."""
        threshold = self._ledger.header.blob_threshold
        output = body.output
        if not isinstance(output, str) or len(output) * 4 <= threshold:
            return record  # a wrong type is named by _checked
        try:
            data = output.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _not_utf8(exc) from None
        if len(data) <= threshold:
            return record
        ref = self._ledger.put_blob(data, preview=output[:_PREVIEW_CHARS], tail=output[-_PREVIEW_CHARS:])
        return msgspec.structs.replace(record, body=msgspec.structs.replace(body, output="", blob=ref))

    def _refresh(self, ended: r.Record) -> tuple[r.Record, ...]:
        """Run the post-turn refresh after ``ended`` (its turn_ended) and append what it derives."""
        derived = tuple(
            self._append(record.body, record.turn, ts=record.ts)
            for record in derived_after(self._state, ended)
        )
        for record in derived:
            self._index_episode(record)
        return derived

    def _index_episode(self, record: r.Record) -> None:
        """Add a derived episode just appended to the episode index, when one is held.

        Every path that appends a ``context_episode`` calls it: an index restored from a
        checkpoint (or built) must keep covering the archive, or the episode cannot be
        restored by ref or selected, and the next checkpoint refuses the index.
        """
        if self._index is not None and isinstance(record.body, r.ContextEpisodeRecord):
            self._index.add(record.body)

    def _end_turn(self, turn: Turn, outcome: Outcome, error: str | None) -> TurnSummary:
        try:
            with self._exclusive():
                for call in list(turn.open_calls()):
                    call._abandon()
                ended = self._append(r.TurnEnded(outcome=outcome, error=error), turn.index)
                try:
                    derived = self._refresh(ended)
                except BaseException as exc:
                    # turn_ended is recorded without (all of) what its refresh derives: a next
                    # turn started after it would leave that refresh missing for good.
                    # Reopening the ledger completes it (derived_before: the refresh owed).
                    self._stop(
                        f"the post-turn refresh of turn {turn.index} was cut short ({_error_text(exc)})"
                    )
                    raise
                self._flush()
        finally:
            self._turn = None
            self._restored.clear()
        checkpoint_seq = None
        every = self.config.checkpoint_every
        # By turn index, not by turns since open: the same turns checkpoint however
        # often the daemon was restarted.
        if every and turn.index % every == 0:
            # The turn is recorded and durable; a checkpoint is only a cache of its fold. A
            # full disk or a read-only checkpoint directory raised out of the turn's `with`
            # block, hiding the daemon's own exception and the summary of a turn that did
            # end: a daemon redelivering the input then ran the turn twice. So did a symbolic
            # link among the checkpoint files (LedgerCorrupt naming it): refused, and said here.
            try:
                checkpoint_seq = self.checkpoint()
            except (OSError, LedgerCorrupt) as exc:
                log.warning(
                    "ledger %s: checkpoint after turn %d not written (%s); the turn is recorded, the "
                    "next open folds from an older checkpoint",
                    self._ledger.path,
                    turn.index,
                    exc,
                )
        return TurnSummary(
            turn=turn.index,
            outcome=outcome,
            first_seq=turn.first_seq,
            last_seq=self._state.seq,
            deltas=tuple(d.body for d in derived if isinstance(d.body, r.WorkingMemoryDelta)),
            episodes=tuple(d.body for d in derived if isinstance(d.body, r.ContextEpisodeRecord)),
            checkpoint_seq=checkpoint_seq,
        )

    def checkpoint(self) -> int:
        """Write a checkpoint of the current state now (between turns); returns its seq."""
        self._check_open()
        if self._turn is not None:
            raise UsageError("checkpoints are written between turns; end the open turn first")
        with self._exclusive():
            self._flush()
            seq, head_hash = self._ledger.head()
            # The episode index is saved too, so the first turn after the next open does not
            # re-tokenize the whole archive; only the episodes no checkpoint saved yet are.
            write_checkpoint(
                self._ledger.path,
                self._state,
                self._tools,
                head_hash=head_hash,
                save_index=True,
                chunks=self._chunks,
            )
            prune_checkpoints(self._ledger.path, self.config.checkpoints_kept, head_seq=seq)
        return seq

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush and release the ledger. A turn still open stays open in the ledger
        (the next open closes it as interrupted); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._restored.clear()
        self._ledger.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Agent {self.agent_id!r} at {self._ledger.path} seq={self.seq}>"


class ToolCall:
    """One tool call through the write-ahead log (built by :meth:`Turn.tool`).

    Either the intent is durable and the call must be executed and finished
    (``replayed`` false), or an earlier call with the same idempotency key already has
    a result, which ``result`` holds (``replayed`` true) — do not execute it again.
    Use it as a context manager (an exception records an ``error`` result) or through
    :meth:`run`.
    """

    def __init__(
        self,
        turn: Turn,
        *,
        call_id: str,
        tool: str,
        args: dict[str, Any],
        idempotency_key: str | None,
        result: r.ToolResult | None,
        intent_seq: int | None,
    ) -> None:
        self._turn = turn
        self.call_id = call_id
        self.tool = tool
        self.args = args
        self.idempotency_key = idempotency_key
        self.intent_seq = intent_seq
        self.result: r.ToolResult | None = result
        self.result_seq: int | None = None
        self.replayed = result is not None
        # The output text of ``result`` (the result it belongs to, and the text): a
        # blob-stored output is read back, hashed and decoded once, not on every access
        # (finishing a call read a 12 MB output twice, for the round and its count).
        self._output: tuple[r.ToolResult, str] | None = None

    @property
    def done(self) -> bool:
        """True once the call has a result (recorded now, or replayed from the ledger)."""
        return self.result is not None

    @property
    def output(self) -> str:
        """The result's output text (read back from the blob store when it was moved there)."""
        if self.result is None:
            raise UsageError(f"tool call {self.call_id} has no result yet")
        kept = self._output
        if kept is None or kept[0] is not self.result:
            kept = self._output = (self.result, self._turn.agent.output_of(self.result))
        return kept[1]

    def finish(
        self,
        output: str = "",
        *,
        status: ToolStatus = "ok",
        exit_code: int | None = None,
        touched_files: tuple[str, ...] = (),
        duration_ms: int | None = None,
    ) -> r.ToolResult:
        """Record the result (after the side effect). Large outputs go to the blob store."""
        if self.replayed:
            raise UsageError(
                f"tool call under idempotency key {self.idempotency_key!r} was replayed from the ledger; "
                "it was not executed, so there is no new result to record"
            )
        if self.result is not None:
            raise UsageError(f"tool call {self.call_id} already has a result")
        self._turn._check_live()
        stored = self._turn.agent._append(
            r.ToolResult(
                call_id=self.call_id,
                tool=self.tool,
                status=status,
                output=output,
                exit_code=exit_code,
                touched_files=_strings(touched_files, "body.touched_files"),
                duration_ms=duration_ms,
            ),
            self._turn.index,
        )
        body = stored.body
        assert isinstance(body, r.ToolResult)
        self.result = body
        self.result_seq = stored.seq
        # What was stored is this text (inline, or as its UTF-8 bytes in a blob).
        self._output = (body, output)
        self._turn._add_tool_round(self)
        return body

    def run(self, execute: Callable[[], str | tuple[str, int]]) -> r.ToolResult:
        """Execute unless replayed, and record the result.

        ``execute()`` returns the output, or ``(output, exit_code)`` (a non-zero exit
        code records status ``error``). An exception records an ``error`` result and
        propagates. A returned value that cannot be recorded (bytes, not a string, text
        that is not UTF-8) raises InvalidRecord and leaves the call open: the effect ran,
        so it is not recorded as an error.
        """
        if self.result is not None:
            return self.result
        try:
            value = execute()
        except BaseException as exc:
            self.finish(_error_text(exc), status="error" if isinstance(exc, Exception) else "interrupted")
            raise
        # Past this point the effect has happened. A value that cannot be recorded (bytes,
        # text that is not UTF-8) was recorded as an ``error`` result, which reads as "it did
        # not happen": a daemon retrying under a new key ran the effect twice. The call stays
        # open instead; unless finished, the turn's end records it ``unknown``.
        try:
            if isinstance(value, tuple) and len(value) == 2:
                output, code = value
                self.finish(output, status="ok" if code == 0 else "error", exit_code=code)
            else:
                self.finish(value)
        except InvalidRecord as exc:
            raise InvalidRecord(
                f"tool call {self.call_id} ({self.tool}) ran, but what it returned cannot be recorded "
                f"({exc}); the call is still open: finish it with call.finish(<str output>) (decode bytes "
                "with errors='replace'), or the turn's end records its outcome as unknown",
                where="the record to append",
            ) from None
        assert self.result is not None
        return self.result

    def _round(self) -> dict[str, Any]:
        assert self.result is not None
        return {
            "role": "tool",
            "call_id": self.call_id,
            "name": self.tool,
            "args": self.args,
            "status": self.result.status,
            "content": self.output,
            "replayed": self.replayed,
        }

    def _abandon(self) -> None:
        # The turn ends with this intent still open: the caller never said what happened,
        # so the honest record is "unknown" — the same as after a crash.
        stored = self._turn.agent._append(
            r.ToolResult(
                call_id=self.call_id,
                tool=self.tool,
                status="unknown",
                output="outcome unknown: the turn ended before this call's result was recorded",
            ),
            self._turn.index,
        )
        assert isinstance(stored.body, r.ToolResult)
        self.result = stored.body
        self.result_seq = stored.seq

    def __enter__(self) -> ToolCall:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.result is not None:
            return
        if exc is not None:
            status: ToolStatus = "error" if isinstance(exc, Exception) else "interrupted"
            self.finish(_error_text(exc), status=status)
            return
        self._abandon()
        raise UsageError(
            f"tool call {self.call_id} ({self.tool}) left its `with` block without finish(); "
            "its outcome was recorded as unknown"
        )

    def __repr__(self) -> str:
        state = "replayed" if self.replayed else ("done" if self.result is not None else "in flight")
        return f"<ToolCall {self.call_id} {self.tool} {state}>"


class Turn:
    """An open turn of an :class:`Agent` (from :meth:`Agent.turn`); records go through it.

    Leaving the ``with`` block appends ``turn_ended`` (``completed``; ``waiting`` after
    :meth:`wait_for`; ``failed`` when an exception escapes, which is re-raised;
    ``interrupted`` for KeyboardInterrupt and other BaseExceptions), runs the post-turn
    refresh, appends its derived records and flushes. :attr:`summary` then holds the
    outcome and what was derived.
    """

    def __init__(self, agent: Agent, index: int) -> None:
        self.agent = agent
        self.index = index
        self.first_seq = -1
        self.summary: TurnSummary | None = None
        self._prompt: Prompt | None = None
        self._prompts = 0
        # Rounds recorded since the prompt was rendered, and their estimated tokens.
        self._rounds: list[dict[str, Any]] = []
        self._round_tokens = 0
        self._calls: list[ToolCall] = []
        self._outcome: Outcome | None = None
        self._waiting = False
        self._ended = False

    # ------------------------------------------------------------------ context

    def context(self) -> Prompt:
        """The prompt for this turn's next model call; call it before every model call.

        The first call renders the prompt and appends its ``prompt_rendered`` record, which
        confirms the working-memory revision shown (clearing the pending delta) and records
        the episode selection and the history anchor; then the ledger is flushed, so the
        turn's input and the record of what the model is about to see are durable before
        the model call. Later calls return the *same* prompt while the rounds recorded
        since it (see :meth:`messages`) still fit the budget after it: the rounds are
        appended after the prompt, so the provider's prefix cache keeps hitting round
        after round. Returning the same prompt, it flushes what was recorded since the
        last flush (a tool's result, the model's words), so they are durable before the
        model call that follows them. Once they no longer fit, the prompt is rendered again — this turn's
        calls are then in its recent history, cleared and placed like any history — and
        the rounds start over. It is rendered again too when the turn's evidence made
        something working memory states untrue (a decision revised, a plan step
        reworded, the active work switched, a wait resolved): working memory is
        refreshed first (:func:`~holon.projections.refresh_before_prompt`), so the model
        is never shown the old statement beside the new one. A daemon compares the
        returned prompt with the one it holds (``is not``) and, when it changed, starts
        its message list again from it.
        """
        self._check_live()
        agent = self.agent
        prompt = self._prompt
        available = agent.config.budget.available
        owed = derived_before(agent._state, r.PromptRendered.KIND, tail_ts=agent._tail_ts)
        if prompt is None or owed or not rounds_fit(prompt.total_tokens, self._round_tokens, available):
            with agent._exclusive():
                for record in owed:
                    agent._append(record.body, record.turn, ts=record.ts)
                prompt = build_context(
                    agent._state,
                    agent.config.budget,
                    agent.config.render,
                    agent_id=agent.agent_id,
                    index=agent.episodes,
                    history=agent._evidence,
                )
                agent._append(prompt_rendered(prompt), self.index)
                # The model is called next, often for seconds: make the turn's input and the
                # record of what the model is shown durable first, so a crash during the
                # call leaves an interrupted turn with its input, not a lost one.
                agent._flush()
            self._prompt = prompt
            self._prompts += 1
            self._rounds, self._round_tokens = [], 0
        elif agent._flushed_seq < agent._state.seq:
            # The same prompt, for the next model call: the rounds recorded since the last
            # flush (a tool's result, the model's words) were buffered. A crash during that
            # call, the longest phase of a turn, lost them: a side effect that ran and was
            # recorded was reported `unknown` on the next open.
            with agent._exclusive():
                agent._flush()
        return prompt

    @property
    def prompt(self) -> Prompt | None:
        """The prompt :meth:`context` rendered last, if it was called."""
        return self._prompt

    @property
    def prompts_rendered(self) -> int:
        """How many times this turn's prompt was rendered (1 + re-renders when rounds outgrew it)."""
        return self._prompts

    @property
    def prompt_seq(self) -> int | None:
        """The seq of the ``prompt_rendered`` record of :attr:`prompt` (None before :meth:`context`)."""
        last = self.agent.state.last_prompt
        return last.seq if self._prompt is not None and last is not None else None

    @property
    def round_tokens(self) -> int:
        """Estimated tokens of the rounds recorded after :attr:`prompt` (what a request adds to it)."""
        return self._round_tokens

    def record_model_call(self, call: r.ModelCall) -> int:
        """Record a model call and the usage its provider reported; returns its seq.

        :mod:`holon.runtime.loop` calls this after every model call; a daemon with a loop
        of its own calls it with what its provider's response says. The record is for the
        audit (``holon audit PATH --report usage``): it is not a round, and no prompt shows it.
        """
        self._check_live()
        if not isinstance(call, r.ModelCall):
            raise UsageError(f"record_model_call takes a holon.records.ModelCall, not {type(call).__name__}")
        if self._prompt is None or call.prompt_seq != self.prompt_seq:
            raise UsageError(
                f"model call names prompt_seq {call.prompt_seq}, but the prompt of this turn's next model "
                f"call is ledger:{self.prompt_seq}: call turn.context() before the model call and record "
                "the call with turn.prompt_seq"
            )
        return self.agent._append(call, self.index).seq

    def messages(self) -> list[dict[str, Any]]:
        """The prompt for the next model call followed by the rounds recorded after it, in order.

        Provider-neutral chat items: ``{"role": "system", "content": <Stable + AgentScoped
        text>}``, ``{"role": "user", "content": <TurnScoped text>}``, then one item per
        round recorded after the prompt: messages (``{"role": <role>, "content": ...}``),
        tool calls with their results (``{"role": "tool", "call_id", "name", "args",
        "status", "content", "replayed"}``) and the model's other records — plans,
        decisions, waits — as ``{"role": "assistant", "content": <the record as a line>}``
        (input such as a task result as ``"user"``). Append-only while the prompt holds;
        it calls :meth:`context`, so when the rounds no longer fit, the list starts over
        from the new prompt.
        """
        prompt = self.context()
        prefix = "\n\n".join(s.text for s in prompt.sections if s.stability != "turn")
        head: list[dict[str, Any]] = []
        if prefix:
            head.append({"role": "system", "content": prefix})
        head.append({"role": "user", "content": prompt.block_text("turn")})
        return head + [dict(item) for item in self._rounds]

    def _add_round(self, item: dict[str, Any], *parts: str) -> None:
        """Count a round recorded after the prompt (the parts of its text: a long output is
        counted on its own, as the next render's history will count it, so it is counted once)."""
        if self._prompt is not None:  # before the first prompt, the prompt itself shows it
            name = self.agent.config.render.estimator
            count = token_counter(name)
            self._rounds.append(item)
            # Past the room left, a long part's exact count changes nothing (the next call
            # renders the prompt again): where it is a sound upper bound, stop counting there.
            bounded = get_estimator(name).joins_add_up
            room = self.agent.config.budget.available - self._prompt.total_tokens
            for part in parts:
                left = room - self._round_tokens
                self._round_tokens += (bounded_count(count, part, left) if bounded else count(part)) + 1

    def _add_tool_round(self, call: ToolCall) -> None:
        assert call.result is not None and call.intent_seq is not None
        intent = r.ToolIntent(call_id=call.call_id, tool=call.tool, args=call.args)
        head = call_line(call.intent_seq, intent)
        if call.result_seq is not None:
            head += "\n" + result_head(call.result_seq, call.result)
        self._add_round(call._round(), head, call.output)

    # ------------------------------------------------------------------ recording

    def record(self, body: r.Body) -> r.Record:
        """Append any evidence record in this turn (runtime and derived kinds are refused).

        This is the raw evidence path, and it stays permissive: it records what it is
        given even when the ids it names are unknown (a state change for an undeclared
        work item, the resolution of a wait that is not open, the result of a task this
        ledger never saw start), which an importer or a replay of another tool's history
        needs. The fold keeps what it cannot place in ``state.carried``, which the prompt
        does not show. The named methods (:meth:`activate`, :meth:`resolve_wait`,
        :meth:`task_result`, ...) refuse such calls instead; use this method to record
        one of them anyway.

        A sub-agent's evidence goes through here too: its messages, tool intents and
        results and plans, each with the ``task_id`` of the running task it belongs to. It
        is kept apart from the agent's own (working memory shows it as the task's
        aggregates) and is not a round of this turn: the model sees the task's result.
        """
        self._check_live()
        kind = getattr(type(body), "KIND", None)
        if not isinstance(kind, str) or r.BODY_TYPES.get(kind) is not type(body):
            raise InvalidRecord(
                f"{type(body).__name__} is not a record body: pass one of the holon.records kinds "
                f"({', '.join(sorted(r.BODY_TYPES))}), e.g. records.Message(role=..., text=...)",
                where="the record to append",
            )
        if r.kind_of(body) in _RUNTIME_KINDS:
            raise UsageError(
                f"{r.kind_of(body)} records are written by the runtime itself "
                "(turn boundaries, rendered prompts, derived memory); use the Turn methods"
            )
        if isinstance(body, r.ToolIntent | r.ToolResult) and body.task_id is None:
            # A sub-agent's calls (a task_id) ran elsewhere and are recorded as evidence.
            raise UsageError(
                "tool calls go through turn.tool(...), which keeps the write-ahead log "
                "(a sub-agent's calls, recorded with its task_id, go through turn.record)"
            )
        stored = self.agent._append(body, self.index)
        # A large task output is in the blob store now; the round shows what the caller gave.
        text = round_text(stored, output=body.output if isinstance(body, r.TaskResult) else None)
        if text is not None:
            if isinstance(body, r.Message):
                item: dict[str, Any] = {"role": body.role, "content": body.text}
                if body.name is not None:
                    item["name"] = body.name
            else:
                item = {"role": "assistant" if is_model_output(body) else "user", "content": text}
            self._add_round(item, text)
        return stored

    def record_message(
        self, text: str, *, role: str = "assistant", name: str | None = None, channel: str | None = None
    ) -> int:
        """Record a message (default: the assistant's reply); returns its seq."""
        return self.record(r.Message(role=role, text=text, name=name, channel=channel)).seq  # type: ignore[arg-type]

    def record_plan(
        self, steps: list[r.PlanStep] | tuple[r.PlanStep, ...], *, work_item_id: str | None = None
    ) -> int:
        """Replace the plan of a work item (default: the active one) whole.

        ``steps`` are :class:`~holon.records.PlanStep` (``PlanStep(id="s1", text="run the
        tests")``, status ``pending`` unless given); a bare string, or a list of strings,
        is refused with an :class:`~holon.errors.InvalidRecord` saying so. With no active
        work item (and no ``work_item_id``) the plan is the unscoped one.

        An explicit ``work_item_id`` must name an open (queued, active or waiting) work
        item, declared earlier (in this turn too): plans are kept for open work only, so
        a plan for a finished item would be carried in ``state.carried`` (no prompt
        shows it), as would one for an item never declared (declaring it later does not
        bring the plan back).
        Otherwise a :class:`~holon.errors.UsageError` names the id and the open items,
        and nothing is recorded: declare the item with :meth:`add_work_item` (or reopen
        a finished one with :meth:`activate`) first, or record the plan anyway with
        ``turn.record(holon.records.WorkPlan(...))``.
        """
        self._check_live()
        if work_item_id is not None:
            self._check_open_work("turn.record_plan", "plans", work_item_id)
        target = work_item_id if work_item_id is not None else self.agent.state.active_work_item_id
        if isinstance(steps, str):
            raise InvalidRecord(
                f"a plan is a list of steps, got the string {steps!r}: "
                f"pass [holon.PlanStep(id='s1', text={steps!r})]",
                where="the record to append",
                field="body.steps",
            )
        steps = tuple(steps)
        for n, step in enumerate(steps):
            if isinstance(step, str):
                raise InvalidRecord(
                    f"a plan step is a holon.PlanStep with an id of its own, got the string {step!r}: "
                    f"pass holon.PlanStep(id='s{n + 1}', text={step!r})",
                    where="the record to append",
                    field=f"body.steps[{n}]",
                )
        return self.record(r.WorkPlan(work_item_id=target, steps=steps)).seq

    def record_decision(
        self, id: str, text: str, *, rationale: str | None = None, work_item_id: str | None = None
    ) -> int:
        """Record a decision (scoped to the active work item unless given; unscoped when none is active).

        An explicit ``work_item_id`` must name an open (queued, active or waiting) work
        item, as for :meth:`record_plan`: decisions are kept per open work item, so one
        for a finished item, or one never declared, would be carried. Otherwise a
        :class:`~holon.errors.UsageError` says so and nothing is recorded;
        ``turn.record(holon.records.Decision(...))`` records it anyway.
        """
        self._check_live()
        if work_item_id is not None:
            self._check_open_work("turn.record_decision", "decisions", work_item_id)
        target = work_item_id if work_item_id is not None else self.agent.state.active_work_item_id
        return self.record(r.Decision(id=id, text=text, rationale=rationale, work_item_id=target)).seq

    def record_brief(
        self,
        status: Literal["ack", "result", "failure"],
        text: str,
        *,
        work_item_id: str | None = None,
        task_id: str | None = None,
    ) -> int:
        """Record a brief: acknowledgement, result or failure."""
        return self.record(r.Brief(status=status, text=text, work_item_id=work_item_id, task_id=task_id)).seq

    def follow_up(
        self,
        id: str,
        text: str,
        *,
        status: Literal["open", "done", "dropped"] = "open",
        work_item_id: str | None = None,
    ) -> int:
        """Declare (or close, with ``status``) a follow-up.

        Declaring (``status="open"``) is always accepted: it opens the follow-up, rewords
        an open one, or reopens a closed one. Closing (``"done"`` / ``"dropped"``) needs a
        follow-up of that id that is open now (opened earlier, in this turn too); closing
        an id that is not open — never opened, a typo, or closed already — would leave
        the intended follow-up open in the prompt, so it is refused with a
        :class:`~holon.errors.UsageError` naming the open follow-ups, and nothing is
        recorded (``turn.record(holon.records.FollowUp(...))`` records it anyway).
        """
        self._check_live()
        if status != "open":
            self._check_open_follow_up(id, status)
        return self.record(r.FollowUp(id=id, text=text, status=status, work_item_id=work_item_id)).seq

    def wait_for(
        self, id: str, waiting_on: str, *, work_item_id: str | None = None, resume_hint: str | None = None
    ) -> int:
        """Record a waiting intent; the turn then ends ``waiting`` (unless :meth:`end` says otherwise).

        ``id`` must not name a wait that is open now: the fold would replace the open one,
        so its ``waiting_on`` would leave the prompt and one resolution would end both. It
        is refused with a :class:`~holon.errors.UsageError` naming the open wait, and
        nothing is recorded; resolve it first (``resolution="cancelled"`` to drop it), or
        replace it on purpose with ``turn.record(holon.records.WaitingIntent(...))``.
        """
        self._check_live()
        self._check_new_wait(id)
        seq = self.record(
            r.WaitingIntent(id=id, waiting_on=waiting_on, work_item_id=work_item_id, resume_hint=resume_hint)
        ).seq
        self._waiting = True
        return seq

    def resolve_wait(
        self,
        id: str,
        *,
        resolution: Literal["arrived", "cancelled", "timed_out"] = "arrived",
        detail: str | None = None,
    ) -> int:
        """Record that an open wait ended.

        ``id`` must name a wait that is open now (opened with :meth:`wait_for`, in this
        turn too). Resolving one that is not — never opened, a typo, or resolved already
        (resolving twice) — would be carried by the fold (``state.carried``) and leave
        the real wait open in the prompt, so it is refused with a
        :class:`~holon.errors.UsageError` naming the open waits, and nothing is
        recorded; ``turn.record(holon.records.WaitingResolved(...))`` records it anyway.
        """
        self._check_live()
        self._check_open_wait(id)
        return self.record(r.WaitingResolved(id=id, resolution=resolution, detail=detail)).seq

    def add_work_item(
        self,
        id: str,
        objective: str,
        *,
        state: Literal["queued", "active", "waiting", "done", "abandoned"] = "queued",
        delivery_target: str | None = None,
        scope_constraints: tuple[str, ...] = (),
        summary: str | None = None,
    ) -> int:
        """Declare (or redeclare, replacing every field) a work item."""
        return self.record(
            r.WorkItem(
                id=id,
                objective=objective,
                state=state,
                delivery_target=delivery_target,
                scope_constraints=_strings(scope_constraints, "body.scope_constraints"),
                summary=summary,
            )
        ).seq

    def set_work_state(
        self,
        id: str,
        state: Literal["queued", "active", "waiting", "done", "abandoned"],
        *,
        reason: str | None = None,
    ) -> int:
        """Move a work item to a new state (activate, wait, finish, abandon).

        ``id`` must name a work item the agent knows: an open one (declared with
        :meth:`add_work_item`, in this turn too) or one among the
        ``projection.finished_window`` most recently finished. A finished item can be
        moved again: to ``active``, ``queued`` or ``waiting`` reopens it (its plan and
        decisions start empty, as the fold keeps those for open work only); ``done``
        or ``abandoned`` again records the new reason. Any other id — undeclared, a
        typo, finished too long ago — is refused with a :class:`~holon.errors.UsageError`
        naming the open and recently finished items, and nothing is recorded: the fold
        would only carry the change and the model would silently lose its work. Declare
        it with :meth:`add_work_item` (which works for an old finished item too), or
        record the change anyway with ``turn.record(holon.records.WorkItemState(...))``.
        """
        return self._set_work_state("turn.set_work_state", id, state, reason)

    def activate(self, id: str, *, reason: str | None = None) -> int:
        """Make a work item the active one (a known id only: see :meth:`set_work_state`)."""
        return self._set_work_state("turn.activate", id, "active", reason)

    def finish_work(self, id: str, *, reason: str | None = None) -> int:
        """Mark a work item done (a known id only: see :meth:`set_work_state`)."""
        return self._set_work_state("turn.finish_work", id, "done", reason)

    def _set_work_state(
        self,
        call: str,
        id: str,
        state: Literal["queued", "active", "waiting", "done", "abandoned"],
        reason: str | None,
    ) -> int:
        self._check_live()
        known = self.agent.state
        if known.find_work_item(id) is None:
            raise UsageError(
                f"{call}({id!r}) in turn {self.index}: no work item {id!r} is open or recently finished "
                f"({self._known_work(known)}), so the fold would only carry the change in state.carried, "
                f"which no prompt shows; nothing was recorded: declare it first with "
                f"turn.add_work_item({id!r}, objective, state={state!r}), or record the change anyway "
                f"with turn.record(holon.records.WorkItemState(id={id!r}, state={state!r}))"
            )
        return self.record(r.WorkItemState(id=id, state=state, reason=reason)).seq

    def start_task(self, id: str, description: str, *, work_item_id: str | None = None) -> int:
        """Record a background task started.

        ``id`` must not name a task that is running now: the fold would replace it, and
        the two tasks' results could not be told apart (the first result would end the
        second start). It is refused with a :class:`~holon.errors.UsageError` naming the
        running task, and nothing is recorded; use a new id, record the running task's
        result first, or replace it on purpose with
        ``turn.record(holon.records.TaskStarted(...))``.
        """
        self._check_live()
        self._check_new_task(id)
        return self.record(r.TaskStarted(id=id, description=description, work_item_id=work_item_id)).seq

    def task_result(
        self, id: str, *, status: Literal["ok", "error", "cancelled"], summary: str, output: str = ""
    ) -> int:
        """Record a running background task's result rejoining the agent (large outputs go to a blob).

        ``id`` must name a task that is running now (started with :meth:`start_task`, in
        this turn too). A result for a task never started — a typo — or one that already
        rejoined (a second result) is refused with a :class:`~holon.errors.UsageError`
        naming the running tasks, and nothing is recorded. For a task started before
        this ledger (an import), record the result anyway with
        ``turn.record(holon.records.TaskResult(...))``.
        """
        self._check_live()
        self._check_running_task(id)
        return self.record(r.TaskResult(id=id, status=status, summary=summary, output=output)).seq

    def set_environment(
        self,
        *,
        workspace: str | None = None,
        cwd: str | None = None,
        branch: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> int:
        """Record where the agent works."""
        return self.record(
            r.ExecutionEnvironment(workspace=workspace, cwd=cwd, branch=branch, extra=dict(extra or {}))
        ).seq

    # ------------------------------------------------------------------ id checks
    # The named methods refuse ids the fold could not place (it would carry the record
    # in ``state.carried``, which no prompt shows): a daemon's typo must not silently
    # lose the model's active work. They read the live state, which is folded after
    # every append, so what this turn declared earlier counts.

    @staticmethod
    def _known_work(state: RuntimeState) -> str:
        finished = [e.id for e in reversed(state.finished_work)]
        return f"open work items: {_listed(list(state.work_items))}; recently finished: {_listed(finished)}"

    def _check_open_work(self, call: str, what: str, work_item_id: str) -> None:
        """Refuse a plan or decision for a work item that is not open."""
        state = self.agent.state
        if work_item_id in state.work_items:
            return
        finished = state.find_work_item(work_item_id)
        if finished is not None:
            problem = (
                f"work item {work_item_id!r} is {finished.state} (since seq {finished.state_seq}) and "
                f"{what} are kept for open work items only, so the fold would only carry this in "
                "state.carried"
            )
            todo = f"reopen it first with turn.activate({work_item_id!r})"
        else:
            problem = (
                f"no open or recently finished work item is {work_item_id!r}, so the fold would only "
                "carry this in state.carried"
            )
            todo = f"declare it first with turn.add_work_item({work_item_id!r}, objective)"
        kind = "WorkPlan" if what == "plans" else "Decision"
        raise UsageError(
            f"{call}(work_item_id={work_item_id!r}) in turn {self.index}: {problem} "
            f"({self._known_work(state)}); nothing was recorded: {todo}, leave work_item_id out to use "
            f"the active item, or record it anyway with turn.record(holon.records.{kind}(...))"
        )

    def _check_open_wait(self, id: str) -> None:
        state = self.agent.state
        if id in state.waits:
            return
        resolved = next((w for w in reversed(state.resolved_waits) if w.id == id), None)
        problem = (
            f"wait {id!r} was already resolved ({resolved.resolution}) at seq {resolved.resolved_seq}"
            if resolved is not None
            else f"no wait {id!r} is open"
        )
        raise UsageError(
            f"turn.resolve_wait({id!r}) in turn {self.index}: {problem} (open waits: "
            f"{_listed(list(state.waits))}), so the fold would only carry the resolution in state.carried; "
            f"nothing was recorded: resolve one of the open waits, open this one first with "
            f"turn.wait_for({id!r}, waiting_on), or record it anyway with "
            f"turn.record(holon.records.WaitingResolved(id={id!r}, ...))"
        )

    def _check_new_wait(self, id: str) -> None:
        open_wait = self.agent.state.waits.get(id)
        if open_wait is None:
            return
        raise UsageError(
            f"turn.wait_for({id!r}) in turn {self.index}: wait {id!r} is already open (waiting on "
            f"{open_wait.waiting_on!r} since seq {open_wait.seq}), and a second one would replace it, so "
            f"one resolution would end both; nothing was recorded: use a new id, resolve the open one first "
            f"with turn.resolve_wait({id!r}) (resolution='cancelled' to drop it), or replace it on purpose "
            f"with turn.record(holon.records.WaitingIntent(id={id!r}, ...))"
        )

    def _check_new_task(self, id: str) -> None:
        running = self.agent.state.tasks.get(id)
        if running is None:
            return
        raise UsageError(
            f"turn.start_task({id!r}) in turn {self.index}: task {id!r} is already running "
            f"({running.description!r}, started at seq {running.started_seq}), and a second start would "
            f"replace it, so the two results could not be told apart; nothing was recorded: use a new id, "
            f"record the running task's result first with turn.task_result({id!r}, ...), or replace it on "
            f"purpose with turn.record(holon.records.TaskStarted(id={id!r}, ...))"
        )

    def _check_running_task(self, id: str) -> None:
        state = self.agent.state
        if id in state.tasks:
            return
        done = next((t for t in reversed(state.finished_tasks) if t.id == id), None)
        problem = (
            f"task {id!r} already rejoined ({done.status}) at seq {done.result_seq}"
            if done is not None
            else f"no task {id!r} was started"
        )
        raise UsageError(
            f"turn.task_result({id!r}) in turn {self.index}: {problem} (running tasks: "
            f"{_listed(list(state.tasks))}); nothing was recorded: record the result of a running task, "
            f"start this one first with turn.start_task({id!r}, description), or, for a task started "
            f"before this ledger, record it anyway with turn.record(holon.records.TaskResult(id={id!r}, ...))"
        )

    def _check_open_follow_up(self, id: str, status: str) -> None:
        state = self.agent.state
        if id in state.follow_ups:
            return
        closed = next((f for f in reversed(state.closed_follow_ups) if f.id == id), None)
        problem = (
            f"follow-up {id!r} was already closed ({closed.status}) at seq {closed.seq}"
            if closed is not None
            else f"no follow-up {id!r} is open"
        )
        raise UsageError(
            f"turn.follow_up({id!r}, status={status!r}) in turn {self.index}: {problem} (open follow-ups: "
            f"{_listed(list(state.follow_ups))}); nothing was recorded: close one of the open follow-ups, "
            f"open this one first with turn.follow_up({id!r}, text), or record it anyway with "
            f"turn.record(holon.records.FollowUp(id={id!r}, ..., status={status!r}))"
        )

    # ------------------------------------------------------------------ tools

    def recall(self, name: str, args: dict[str, Any]) -> ToolCall:
        """Answer the model's call of a recall tool (``holon_get``, ``holon_search``), recorded.

        Offer :data:`~holon.runtime.recall.RECALL_TOOLS` to the model (in the
        ``SystemPolicy``) and route its calls of them here instead of to
        :meth:`tool`: the call goes through the write-ahead log like any other (intent,
        then result), so the ledger holds what the model was given back. A bad ref, an
        unknown ref, an offset past the end or malformed arguments become an ``error``
        result whose text says what to do — the model made the mistake, so the model is
        told. Send ``call.output`` back as the tool result, as for any tool. A name that
        is not a recall tool is the daemon's mistake: UsageError, nothing recorded.
        """
        if name not in RECALL_TOOL_NAMES:
            raise UsageError(
                f"{name!r} is not a recall tool ({', '.join(sorted(RECALL_TOOL_NAMES))}); "
                "run it with turn.tool"
            )
        try:
            call = self.tool(name, args)
        except InvalidRecord as exc:
            # The model's arguments cannot be stored as given (not a JSON object, an integer
            # beyond 64 bits, a lone surrogate): the call is recorded with them as text and
            # the model is told, like any other mistake of its arguments.
            shown = repr(args).encode("utf-8", "backslashreplace").decode("utf-8")
            problem = _error_text(exc).removeprefix("InvalidRecord: ")
            if isinstance(args, Mapping):
                # The ledger's reason is written for the daemon ("record it as a string or
                # null"); when the arguments are also wrong as the tool reads them (a NaN
                # offset), the model is told that instead, in the tool's terms.
                try:
                    recall_args(name, args)
                except UsageError as mistake:
                    problem = str(mistake)
            call = self.tool(name, {"unrecordable_arguments": shown[:_PREVIEW_CHARS]})
            with call:
                call.finish(problem, status="error")
            return call
        with call:  # anything else (a damaged ledger) records an error result and propagates
            try:
                given = recall_args(name, args)
                if name == GET_TOOL.name:
                    output = self.agent.get_text(given["ref"], offset=given["offset"])
                else:
                    hits = self.agent.search(given["query"], limit=given["limit"])
                    output = search_text(given["query"], hits)
            except (InvalidRef, RefNotFound, UsageError) as exc:
                call.finish(str(exc), status="error")
            else:
                call.finish(output)
        return call

    def tool(self, name: str, args: dict[str, Any], *, idempotency_key: str | None = None) -> ToolCall:
        """Start a tool call through the write-ahead log.

        When ``idempotency_key`` names a call that already has a result, nothing is
        appended and nothing must run: the returned call is ``replayed`` with that
        result (an ``unknown`` result too: check its effects, then retry under a new
        key). Otherwise the intent is appended and made durable (flushed and, unless
        the fsync policy is ``never``, fsynced) *before* this returns, so the side effect
        that follows is always preceded by its intent on disk.
        """
        self._check_live()
        agent = self.agent
        if not isinstance(name, str) or not name.strip():
            # A call to no tool: nothing could run it, and no provider accepts it back in
            # the next request (the importers refuse one in a transcript for the same reason).
            raise InvalidRecord(
                f"tool name {name!r} is blank; a call names the tool it runs (the model's call had "
                "no name: answer it with an error message instead of recording a call)",
                where="the record to append",
                field="body.tool",
            )
        # Checked before anything else: dict() of a list or string fails with a TypeError,
        # or silently turns a list of pairs into arguments the caller did not write.
        if not isinstance(args, Mapping):
            raise InvalidRecord(
                f"tool {name!r}: arguments must be a dict (a JSON object), got {type(args).__name__}",
                where="the record to append",
                field="body.args",
            )
        if idempotency_key is not None:
            entry = agent._tools.keys.get(idempotency_key)
            if entry is not None:
                if entry.result_seq is None:
                    raise UsageError(
                        f"a call under idempotency key {idempotency_key!r} ({entry.call_id}) is still in "
                        "flight; finish it before retrying"
                    )
                intent = agent._ledger.get(entry.intent_seq).body
                assert isinstance(intent, r.ToolIntent)
                # Compared in wire form, as the intent was stored (tuples read back as lists);
                # arguments that do not encode are an InvalidRecord, as for a new call.
                asked = _checked(r.Record(body=r.ToolIntent(call_id="", tool=name, args=args), ts=0)).body
                assert isinstance(asked, r.ToolIntent)
                if (intent.tool, intent.args) != (asked.tool, asked.args):
                    raise UsageError(
                        f"idempotency key {idempotency_key!r} was used for {intent.tool} {intent.args!r} "
                        f"(ledger:{entry.intent_seq}), not {name} {args!r}: a key names one effect; "
                        "use a new key for a different call"
                    )
                recorded = agent.recorded_call(idempotency_key)
                assert recorded is not None
                call = ToolCall(
                    self,
                    call_id=entry.call_id,
                    tool=name,
                    args=dict(args),
                    idempotency_key=idempotency_key,
                    result=recorded,
                    intent_seq=entry.intent_seq,
                )
                self._add_tool_round(call)
                return call
        call_id = f"c{self.index}.{len(self._calls) + 1}"
        with agent._exclusive():
            stored = agent._append(
                r.ToolIntent(call_id=call_id, tool=name, args=dict(args), idempotency_key=idempotency_key),
                self.index,
            )
            # The write-ahead rule: the intent reaches the disk before the side effect runs.
            agent._flush()
        body = stored.body
        assert isinstance(body, r.ToolIntent)
        call = ToolCall(
            self,
            call_id=call_id,
            tool=name,
            args=body.args,
            idempotency_key=idempotency_key,
            result=None,
            intent_seq=stored.seq,
        )
        self._calls.append(call)
        return call

    def open_calls(self) -> Iterator[ToolCall]:
        """Calls of this turn whose intent is recorded but whose result is not."""
        return (c for c in self._calls if c.result is None)

    # ------------------------------------------------------------------ ending

    def end(self, outcome: Outcome) -> None:
        """Choose how the turn ends when its block exits normally (default: completed/waiting)."""
        self._check_live()
        # Checked now: a bad outcome found only when turn_ended is appended would leave the
        # turn open in the ledger after its block exited.
        if outcome not in get_args(Outcome):
            raise UsageError(f"outcome {outcome!r} must be one of {', '.join(get_args(Outcome))}")
        self._outcome = outcome

    @property
    def ended(self) -> bool:
        """True once the turn's ``turn_ended`` record is written."""
        return self._ended

    def _check_live(self) -> None:
        if self._ended:
            raise UsageError(
                f"turn {self.index} has ended; record inside `with agent.turn(...) as turn:` "
                "(recording outside a turn is not allowed)"
            )
        self.agent._check_open()

    def __enter__(self) -> Turn:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._ended:
            return
        error: str | None = None
        if exc is None:
            outcome: Outcome = self._outcome or ("waiting" if self._waiting else "completed")
        elif isinstance(exc, Exception):
            outcome, error = "failed", _error_text(exc)
        else:
            outcome, error = "interrupted", _error_text(exc)
        self._ended = True
        agent = self.agent
        if agent._closed or (exc is not None and agent._stale is not None):
            # Nothing more is recorded by a stopped agent: the turn stays open in the
            # ledger, and the next open closes it as interrupted.
            return
        try:
            self.summary = agent._end_turn(self, outcome, error)
        except Exception as end_exc:
            if exc is None:
                raise
            # The block's own exception (a KeyboardInterrupt that cut a flush short, an
            # OSError) is what the daemon must see, not the failure it caused here.
            log.warning(
                "ledger %s: turn %d's end was not recorded (%s); it stays open in the ledger until the "
                "next open closes it as interrupted",
                agent._ledger.path,
                self.index,
                _error_text(end_exc),
            )
