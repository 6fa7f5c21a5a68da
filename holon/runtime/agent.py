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

The agent and its turns share one write core (:mod:`holon.runtime.core`); a turn lives in
:mod:`holon.runtime.turn`, the tool WAL in :mod:`holon.runtime.calls`, and what opening an
existing ledger folds, checks and recovers in :mod:`holon.runtime.opening`.

See docs/daemon-guide.md for the integration, the tool WAL and the failure model.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Final, Literal

import msgspec

import holon.records as r
from holon.context import (
    Budget,
    EpisodeIndex,
    EpisodeIndexRejected,
    PendingView,
    Prompt,
    RenderConfig,
    build_context,
    restore_bytes,
)
from holon.errors import InvalidRef, LedgerCorrupt, NotALedger, UsageError
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
    derived_before,
)
from holon.runtime.calls import ToolCall, abandon
from holon.runtime.checkpoints import (
    CheckpointChunks,
    ToolIndex,
    UnknownOutcome,
    prune_checkpoints,
    write_checkpoint,
)
from holon.runtime.core import AgentCore, Outcome, checked, error_text, wall_clock_ms
from holon.runtime.opening import check_projection, fold_ledger, recover, restore_index, tail_ts
from holon.runtime.recall import (
    RECALL_PAGE_CHARS,
    AgentRefSource,
    RestoredText,
    blob_text_of,
    get_text,
    is_recall,
)
from holon.runtime.turn import Turn, TurnSummary
from holon.search import MemoryHit, MemorySearch

# ToolCall, Turn and TurnSummary live in their own modules; named here too, as they always were.
__all__ = ["Agent", "AgentConfig", "OpenReport", "ToolCall", "Turn", "TurnSummary"]

log = logging.getLogger("holon.runtime")

_INPUT_ROLES: Final = ("user", "operator", "channel")


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
        self._core = AgentCore(ledger, state, tools, clock=clock)
        self.config = config
        # The chunk files the checkpoint resumed from names (and each checkpoint writes):
        # the next checkpoint names them instead of writing the archive and its index again.
        self._chunks = CheckpointChunks()
        # Built from the ledger on the first search. From then on the records appended are
        # kept (``AgentCore.unsearched``) and the next search indexes them: reading them back,
        # even none, walks the ledger's active segment from its start (up to 8 MB, ~15 ms at
        # 3 MB) on every call.
        self._search: MemorySearch | None = None
        self._searched_to = 0  # the next seq the search index has not seen
        # The text holon_get last paged, so each next page does not restore it again;
        # dropped when a turn ends (a daemon pages through an output within a turn).
        self._restored = RestoredText()
        self._turn: Turn | None = None
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
                given = checked(r.Record(body=policy, ts=0)).body
                current = agent.state.policy
                if current is None or current.policy != given:
                    agent._core.append(policy, None)
                    agent._core.flush()
        except BaseException:
            ledger.close()
            raise
        return agent

    @classmethod
    def _resume(
        cls, ledger: Ledger, config: AgentConfig, clock: Callable[[], int], *, created: bool
    ) -> Agent:
        """The agent on ``ledger``: folded, its config checked, what a crash left open closed."""
        folded = fold_ledger(ledger, config.projection)
        check_projection(ledger, folded.state, config.projection)
        agent = cls(ledger, folded.state, folded.tools, config=config, clock=clock)
        agent._chunks = folded.chunks
        core = agent._core
        core.last_ts = core.tail_ts = tail_ts(ledger, folded)
        # A crash between a turn_ended and the end of its refresh: append the rest on open.
        owed = derived_before(folded.state, tail_ts=core.tail_ts)
        # Restored before recovery, so episodes its refresh archives are added to it.
        restored = restore_index(ledger, folded)
        if isinstance(restored, EpisodeIndex):
            core.index = restored
        interrupted, unknown = recover(core, owed)
        agent.report = OpenReport(
            created=created,
            checkpoint_seq=folded.checkpoint[1] if folded.checkpoint is not None else None,
            rejected=folded.rejected,
            folded=folded.folded,
            interrupted_turn=interrupted,
            unknown_outcomes=unknown,
            ledger_recovery=tuple(str(action) for action in ledger.recovery),
            completed_refresh=len(owed),
            episode_index="built" if core.index is None else "restored",
            episode_index_rejected=restored if isinstance(restored, EpisodeIndexRejected) else None,
        )
        return agent

    # ------------------------------------------------------------------ reading

    @property
    def agent_id(self) -> str:
        """The agent this ledger belongs to."""
        return self._core.ledger.agent_id

    @property
    def ledger(self) -> Ledger:
        """The underlying ledger (read from it freely; append only through the agent)."""
        return self._core.ledger

    @property
    def path(self) -> Path:
        """The ledger directory."""
        return self._core.ledger.path

    @property
    def projection(self) -> ProjectionState:
        """The whole projection state (runtime state and working memory), at :attr:`seq`."""
        return self._core.state

    @property
    def state(self) -> RuntimeState:
        """What the agent knows now (the runtime fold)."""
        return self._core.state.runtime

    @property
    def memory(self) -> WorkingMemoryState:
        """Working-memory bookkeeping: revision, pending delta, epoch, episode builder, archive."""
        return self._core.state.memory

    @property
    def working_memory(self) -> WorkingMemorySnapshot:
        """The working-memory snapshot at the current revision."""
        return self._core.state.memory.snapshot

    @property
    def episodes(self) -> EpisodeIndex:
        """The archived episodes, indexed for search, kept current as episodes are archived.

        Restored on open from the checkpoint's saved index when it is valid (see
        ``report.episode_index``); otherwise built from the whole archive on first use.
        """
        core = self._core
        if core.index is None:
            core.index = EpisodeIndex(core.state.memory.archive)
        return core.index

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
        self._core.check_open()
        # Checked here: a limit below 1 or an unknown `only` returned no hits, which reads
        # as "nothing matches", and a non-string query failed deep in the tokenizer.
        if not isinstance(query, str):
            raise UsageError(f"search query must be a string, got {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"search limit must be an integer >= 1, got {limit!r}")
        if only not in (None, "episodes", "evidence"):
            raise UsageError(f"search only= must be None, 'episodes' or 'evidence', got {only!r}")
        if self._search is None:
            self._search = MemorySearch(
                blob_text=blob_text_of(self._core.ledger), read_record=self._core.ledger.get
            )
        kept, self._core.unsearched = self._core.unsearched, []
        unsearched: Iterable[r.Record] = kept or ()
        # The kept records, when they are exactly the ones not indexed yet; otherwise (none
        # kept, too many, or a search cut short) what is missing is read from the ledger.
        if kept is None or (kept[0].seq if kept else self._core.state.seq + 1) != self._searched_to:
            unsearched = self._core.ledger.read(from_seq=self._searched_to, to_seq=self._core.state.seq + 1)
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
        self._core.check_open()
        if not isinstance(ref, str):
            raise InvalidRef(f"a ref is a string (ledger:<seq>, blob:<hash> or episode:<id>), got {ref!r}")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise UsageError(f"offset must be an integer, got {offset!r}")
        source = AgentRefSource(self._core.ledger, self.episodes)
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
        self._core.check_open()
        if not isinstance(ref, str):
            raise InvalidRef(f"a ref is a string (ledger:<seq>, blob:<hash> or episode:<id>), got {ref!r}")
        return restore_bytes(ref, AgentRefSource(self._core.ledger, self.episodes))

    @property
    def seq(self) -> int:
        """The seq of the newest record (``-1`` for an empty ledger)."""
        return self._core.state.seq

    @property
    def last_ts(self) -> int:
        """The timestamp of the newest record this agent knows of."""
        return self._core.last_ts

    @property
    def current_turn(self) -> Turn | None:
        """The open turn, if any."""
        return self._turn

    @property
    def next_turn_index(self) -> int:
        """The index the next turn will get (turns count from 1)."""
        turn = self._core.state.runtime.turn
        return 1 if turn is None or turn.index is None else turn.index + 1

    def unknown_outcomes(self) -> tuple[UnknownOutcome, ...]:
        """Every tool call of this ledger whose outcome is unknown, oldest first.

        A call lands here when the process ended between its durable intent and its
        result; :meth:`open` records it as a ``tool_result`` with status ``unknown``
        (``recorded_seq``) and the next prompts list it as continuation context. It is
        never executed again by the runtime; retrying its idempotency key returns the
        ``unknown`` result (see :meth:`Turn.tool`).
        """
        return tuple(self._core.tools.unknown)

    def recorded_call(self, idempotency_key: str) -> r.ToolResult | None:
        """The recorded result of the call made under ``idempotency_key``, if any."""
        entry = self._core.tools.keys.get(idempotency_key)
        if entry is None or entry.result_seq is None:
            return None
        body = self._core.ledger.get(entry.result_seq).body
        assert isinstance(body, r.ToolResult)
        return body

    def output_of(self, result: r.ToolResult) -> str:
        """A tool result's output text, read back from the blob store when it was moved there."""
        return self._core.output_of(result)

    # ------------------------------------------------------------------ turns

    def turn(self, input: str | None = None, *, trigger: str = "user", role: str = "user") -> Turn:
        """Open the next turn: ``with agent.turn(input=..., trigger=...) as turn: ...``.

        Appends ``turn_started`` and, when ``input`` is given, the input as a message of
        ``role`` (user, operator or channel; it is the prompt's current input). Raises
        UsageError while another turn is open.
        """
        self._core.check_open()
        if self._turn is not None:
            raise UsageError(
                f"turn {self._turn.index} is still open; end it (leave its `with` block) before opening "
                "another: turns do not nest"
            )
        open_in_ledger = self._core.state.runtime.turn
        if open_in_ledger is not None and open_in_ledger.open and open_in_ledger.index is not None:
            # The last turn's end could not be recorded (its clock reading or its turn_ended
            # append failed): a new turn_started would nest inside it, and no open would
            # ever close it.
            raise UsageError(
                f"turn {open_in_ledger.index} is still open in ledger {self.path}: its end could "
                "not be recorded (see the error its `with` block raised); close this agent and open it "
                "again, which closes that turn as interrupted"
            )
        if input is not None and role not in _INPUT_ROLES:
            raise UsageError(f"input role {role!r} must be one of {', '.join(_INPUT_ROLES)}")
        index = self.next_turn_index
        # Both records are validated before either is appended: a bad input must not
        # leave a turn_started behind that no turn_ended will ever close.
        now = self._core.now
        started = checked(r.Record(body=r.TurnStarted(trigger=trigger), ts=now(), turn=index))
        message = (
            checked(r.Record(body=r.Message(role=role, text=input), ts=now(), turn=index))  # type: ignore[arg-type]
            if input is not None
            else None
        )
        turn = Turn(self, self._core, index, end=self._end_turn)
        self._turn = turn
        try:
            # In one all-or-nothing append: the ledger can still refuse the input (over its
            # payload limit), and a turn_started without its input would stay open.
            opening = [started] if message is None else [started, message]
            turn.first_seq = self._core.append_all_checked(opening)[0].seq
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
        self._core.check_open()
        if self._turn is not None:
            raise UsageError(
                f"turn {self._turn.index} is open: its next prompt is turn.context(); preview renders a new "
                "turn's first prompt, so call it between turns"
            )
        if input is not None and role not in _INPUT_ROLES:
            raise UsageError(f"input role {role!r} must be one of {', '.join(_INPUT_ROLES)}")
        index = self.next_turn_index
        ts = self._core.clock_reading()
        seq = self._core.state.seq
        opening = [r.TurnStarted(trigger=trigger)]
        if input is not None:
            opening.append(r.Message(role=role, text=input))  # type: ignore[arg-type]
        pending = [
            checked(r.Record(body=body, ts=ts, turn=index, seq=seq + 1 + i)) for i, body in enumerate(opening)
        ]
        state = self._core.state
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
            history=PendingView(self._core.evidence, pending),
        )

    # ------------------------------------------------------------------ ending a turn

    def _end_turn(self, turn: Turn, outcome: Outcome, error: str | None) -> TurnSummary:
        """Record ``turn``'s end and what its refresh derives; then the periodic checkpoint."""
        core = self._core
        try:
            with core.exclusive():
                for call in list(turn.open_calls()):
                    abandon(call)
                ended = core.append(r.TurnEnded(outcome=outcome, error=error), turn.index)
                try:
                    derived = core.refresh(ended)
                except BaseException as exc:
                    # turn_ended is recorded without (all of) what its refresh derives: a next
                    # turn started after it would leave that refresh missing for good.
                    # Reopening the ledger completes it (derived_before: the refresh owed).
                    core.stop(f"the post-turn refresh of turn {turn.index} was cut short ({error_text(exc)})")
                    raise
                core.flush()
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
                    self._core.ledger.path,
                    turn.index,
                    exc,
                )
        return TurnSummary(
            turn=turn.index,
            outcome=outcome,
            first_seq=turn.first_seq,
            last_seq=self._core.state.seq,
            deltas=tuple(d.body for d in derived if isinstance(d.body, r.WorkingMemoryDelta)),
            episodes=tuple(d.body for d in derived if isinstance(d.body, r.ContextEpisodeRecord)),
            checkpoint_seq=checkpoint_seq,
        )

    def checkpoint(self) -> int:
        """Write a checkpoint of the current state now (between turns); returns its seq."""
        self._core.check_open()
        if self._turn is not None:
            raise UsageError("checkpoints are written between turns; end the open turn first")
        with self._core.exclusive():
            self._core.flush()
            seq, head_hash = self._core.ledger.head()
            # The episode index is saved too, so the first turn after the next open does not
            # re-tokenize the whole archive; only the episodes no checkpoint saved yet are.
            write_checkpoint(
                self._core.ledger.path,
                self._core.state,
                self._core.tools,
                head_hash=head_hash,
                save_index=True,
                chunks=self._chunks,
            )
            prune_checkpoints(self._core.ledger.path, self.config.checkpoints_kept, head_seq=seq)
        return seq

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush and release the ledger. A turn still open stays open in the ledger
        (the next open closes it as interrupted); idempotent."""
        if self._core.closed:
            return
        self._core.closed = True
        self._restored.clear()
        self._core.ledger.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Agent {self.agent_id!r} at {self._core.ledger.path} seq={self.seq}>"
