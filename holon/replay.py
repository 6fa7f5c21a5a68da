"""Replaying a ledger: memory turn by turn, past prompts, plans, statistics and restoration.

This is the library behind ``holon replay``, ``render``, ``explain``, ``memory``,
``episodes``, ``stats``, ``get``, ``append`` and ``import``; everything here is usable
without the CLI. It is an edge module: it reads ledgers (I/O) and composes the pure
layers — :mod:`holon.projections` folds, :mod:`holon.context` renders.

- :class:`LedgerRefSource` — the :class:`~holon.context.RefSource` of a ledger, so
  ``restore(ref, LedgerRefSource(ledger))`` gives back what a placeholder promises.
- :func:`turn_spans` — where each turn's records start and end (derived records included).
- :func:`replay_turns` — per turn: revision, delta, episodes finalized, epoch, prompts
  (:func:`replay_of`: the same, reading a ledger in passes rather than holding it).
- :func:`prompt_at` / :func:`next_prompt` — the prompt of a past turn, re-rendered from
  the ledger up to its ``PromptRendered`` record with the recorded budget and config
  (so its hash can be checked), or the prompt for the next model call.
- :func:`memory_at` — working memory, pending delta and active episode builder after a turn.
- :func:`projection_config_of` — the projection config a ledger's prompts record (what its
  derived records were derived under); every fold here uses it unless told otherwise.
- :func:`ledger_stats` — records by kind, tokens per section, evictions, cache-key churn.
- :func:`append_evidence` — append evidence the way the runtime does: after every
  ``turn_ended`` the post-turn refresh's derived records follow, so the result verifies.
- :func:`imported_prefix` — how much of an import a ledger already ends with (an import
  cut short by a full disk, or one already complete), so that it can be continued.

Functions take records (any iterable, in seq order) rather than a ledger where they
can, so a caller decides how to read them (all at once, with a progress bar, ...). They
fold from seq 0: records that start later, skip a seq or repeat one are a UsageError
(see :func:`holon.projections.fold`), not a state no ledger ever had.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, NamedTuple, Protocol, cast, runtime_checkable

import msgspec

import holon.records as r
from holon.context.budget import DEFAULT_BUDGET, Budget
from holon.context.causes import omission_cause
from holon.context.estimator import get_estimator
from holon.context.evidence import EvidenceBuffer, EvidenceView, PendingView
from holon.context.prompt import Prompt
from holon.context.render import (
    RENDER_VERSION,
    RenderConfig,
    build_context,
    describe_projection,
    recorded_projection,
)
from holon.context.search import EpisodeIndex
from holon.context.sections import SECTION_ORDER
from holon.errors import InvalidRecord, RefNotFound, UsageError
from holon.ledger.blobs import blob_hash
from holon.ledger.frames import OVERSIZED_ADVICE
from holon.ledger.store import Ledger
from holon.projections import (
    DEFAULT_CONFIG,
    ActiveEpisodeBuilder,
    ProjectionConfig,
    ProjectionState,
    WorkingMemorySnapshot,
    WorkingMemoryState,
    apply,
    fold,
    initial_state,
    owed_refresh,
    post_turn_refresh,
    refresh_before_prompt,
    snapshot_lines,
    stated_config,
    unstated_config_derives,
)

__all__ = [
    "DEFAULT_BUDGET",
    "Checkpoints",
    "ImportedPrefix",
    "LedgerRefSource",
    "LedgerStats",
    "MemoryView",
    "PromptAt",
    "PromptSummary",
    "Reader",
    "RenderOverrides",
    "Replay",
    "Resume",
    "SectionStats",
    "TurnReplay",
    "TurnSpan",
    "append_evidence",
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
    "state_after",
    "state_to_append_to",
    "turn_spans",
    "version_changes",
]

# Roles whose messages are input to a turn (what the first model call of the turn
# answers), as opposed to what the model itself produced.
_INPUT_ROLES: Final = frozenset({"user", "operator", "channel", "system"})


# --------------------------------------------------------------------------- restoration


class LedgerRefSource:
    """A :class:`~holon.context.RefSource` reading records, blobs and episodes from a ledger.

    Episodes are found by scanning the ledger for ``context_episode`` records once, on
    the first episode lookup.
    """

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._episodes: dict[int, r.ContextEpisodeRecord] | None = None

    def record(self, seq: int) -> r.Record:
        """The record at ``seq`` (RefNotFound past the head)."""
        return self._ledger.get(seq)

    def blob(self, blob_hash: str) -> bytes:
        """A blob's original bytes, verified against its hash."""
        return self._ledger.get_blob(blob_hash)

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
        """The archived episode with this id (RefNotFound when the ledger holds none)."""
        if self._episodes is None:
            self._episodes = {
                rec.body.episode_id: rec.body
                for rec in self._ledger.read()
                if isinstance(rec.body, r.ContextEpisodeRecord)
            }
        found = self._episodes.get(episode_id)
        if found is None:
            held = len(self._episodes)
            raise RefNotFound(
                f"episode:{episode_id} is not in ledger {self._ledger.path} "
                f"({'no episodes yet' if not held else f'it holds episodes 0..{held - 1}'}); "
                "list them with `holon episodes`"
            )
        return found


# --------------------------------------------------------------------------- turns


class TurnSpan(msgspec.Struct, frozen=True, kw_only=True):
    """Where one turn lies in a record sequence.

    ``start`` is the index of its ``turn_started``; ``end`` the index just past its last
    record, derived records of its post-turn refresh included (``records[start:end]``).
    ``ended_seq`` is the seq of its ``turn_ended``, or ``None`` when the turn is still open.
    """

    turn: int
    start: int
    end: int
    started_seq: int
    ended_seq: int | None


def turn_spans(records: Iterable[r.Record]) -> list[TurnSpan]:
    """Every turn of ``records``, in order.

    A turn runs from its ``turn_started`` through its ``turn_ended`` and the derived
    records that directly follow it; an unterminated turn runs to the next
    ``turn_started`` or the end.
    """
    scan = _SpanScan()
    spans: list[TurnSpan] = []
    count = 0
    for count, record in enumerate(records, 1):
        closed = scan.see(count - 1, record)
        if closed is not None:
            spans.append(closed)
    last = scan.finish(count)
    return [*spans, last] if last is not None else spans


class _SpanScan:
    """:func:`turn_spans` one record at a time: :meth:`see` returns each span as it closes.

    One rule for the list functions and for the passes of the ``*_of`` functions, which
    do not hold the records.
    """

    def __init__(self) -> None:
        self.open: tuple[int, int, int] | None = None  # start index, turn, started_seq
        self.closed = 0
        self.held: tuple[int, int] | None = None  # the first and last turn closed
        self._ended: int | None = None
        self._tail = False  # past its turn_ended: only derived records still belong to it

    def see(self, index: int, record: r.Record) -> TurnSpan | None:
        """Take record ``index``; the span it ends, if it ends one (it may then start the next)."""
        body = record.body
        closed = None
        if self.open is not None:
            # After its turn_ended only derived records belong to it; before, the next turn_started ends it.
            if record.kind not in r.DERIVED_KINDS if self._tail else isinstance(body, r.TurnStarted):
                closed = self.finish(index)
            elif isinstance(body, r.TurnEnded):
                self._ended, self._tail = record.seq, True
        if self.open is None and isinstance(body, r.TurnStarted):
            turn = record.turn if record.turn is not None else self.closed + 1
            self.open, self._ended, self._tail = (index, turn, record.seq), None, False
        return closed

    def finish(self, end: int) -> TurnSpan | None:
        """Close the open span at index ``end`` (the end of the records); ``None`` if none is open."""
        if self.open is None:
            return None
        start, turn, started = self.open
        self.open = None
        self.closed += 1
        self.held = (self.held[0] if self.held else turn, turn)
        return TurnSpan(turn=turn, start=start, end=end, started_seq=started, ended_seq=self._ended)


def find_turn(spans: Sequence[TurnSpan], turn: int) -> TurnSpan:
    """The span of turn ``turn``; UsageError naming the turns there are when it is absent."""
    for span in spans:
        if span.turn == turn:
            return span
    raise _no_turn(turn, (spans[0].turn, spans[-1].turn) if spans else None)


def _no_turn(turn: int, held: tuple[int, int] | None) -> UsageError:
    """Turn ``turn`` is absent; ``held`` is the first and last turn there are (``None``: no turns)."""
    if held is None:
        return UsageError(f"turn {turn} is not in this ledger: it has no turns yet")
    return UsageError(f"turn {turn} is not in this ledger: it holds turns {held[0]}..{held[1]}")


def _projection_of(
    records: Iterable[r.Record], config: ProjectionConfig | None
) -> tuple[Iterable[r.Record], ProjectionConfig]:
    """``records`` (held in a list when they must be read twice) and the config to fold them under.

    ``config`` when given, else the one the records themselves record (see
    :func:`projection_config_of`). An iterator is then held in memory to be read twice:
    to fold a long ledger in one streaming pass, pass its config.
    """
    if config is not None:
        return records, config
    held = records if isinstance(records, Sequence) else list(records)
    return held, projection_config_of(held)


def state_after(records: Iterable[r.Record], config: ProjectionConfig | None = None) -> ProjectionState:
    """The projection state after folding ``records`` in order.

    Under ``config``, or (by default) the config the records' prompts record.
    """
    records, config = _projection_of(records, config)
    return fold(records, config=config)


class PromptSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A recorded ``PromptRendered``, as replay shows it.

    ``previous_cache_key`` is the key of the prompt before it (``None`` for the first):
    when it differs, the provider had to write a new cache prefix.
    """

    seq: int
    cache_key: str
    previous_cache_key: str | None
    working_memory_revision: int
    compression_epoch: int
    total_tokens: int
    budget: int
    sections: tuple[r.SectionTokens, ...]
    omitted: int


class TurnReplay(msgspec.Struct, frozen=True, kw_only=True):
    """One turn after its post-turn refresh: what happened to memory and the prompts.

    ``input`` is the turn's input, or (when ``turn_started`` carries none) the text of
    its first user, operator, channel or system message.
    """

    turn: int
    started_seq: int
    ended_seq: int | None
    trigger: str
    input: str | None
    outcome: str | None
    records: int
    tool_calls: int
    revision: int
    compression_epoch: int
    pending_delta: bool
    delta: r.WorkingMemoryDelta | None
    episodes: tuple[r.ContextEpisodeRecord, ...]
    prompts: tuple[PromptSummary, ...]


class _TurnBuilder:
    """Collects one turn's facts while its records are folded."""

    def __init__(self, record: r.Record, body: r.TurnStarted, turn: int) -> None:
        self.turn = turn
        self.started_seq = record.seq
        self.ended_seq: int | None = None
        self.trigger = body.trigger
        self.input = body.input
        self.outcome: str | None = None
        self.records = 0
        self.tool_calls = 0
        self.delta: r.WorkingMemoryDelta | None = None
        self.episodes: list[r.ContextEpisodeRecord] = []
        self.prompts: list[PromptSummary] = []

    def finish(self, state: ProjectionState) -> TurnReplay:
        memory = state.memory
        return TurnReplay(
            turn=self.turn,
            started_seq=self.started_seq,
            ended_seq=self.ended_seq,
            trigger=self.trigger,
            input=self.input,
            outcome=self.outcome,
            records=self.records,
            tool_calls=self.tool_calls,
            revision=memory.revision,
            compression_epoch=memory.compression_epoch,
            pending_delta=memory.pending is not None,
            delta=self.delta,
            episodes=tuple(self.episodes),
            prompts=tuple(self.prompts),
        )


def replay_turns(
    records: Iterable[r.Record],
    *,
    until_turn: int | None = None,
    config: ProjectionConfig | None = None,
) -> Iterator[TurnReplay]:
    """Fold ``records`` and yield one :class:`TurnReplay` per turn, after its refresh.

    A turn is reported once its derived records have been folded (revision and epoch
    are the values after the refresh). With ``until_turn``, stops after the first turn
    numbered ``until_turn`` or more. Folds under ``config``, or (by default) the config
    the records' prompts record; given ``config``, ``records`` are read once, as they
    come (:func:`replay_of` reads a ledger in passes and stops at turn ``until_turn``).
    """
    records, config = _projection_of(records, config)
    yield from _TurnFold(config).turns(records, until_turn)


class _TurnFold:
    """The fold behind :func:`replay_turns` and :meth:`Replay.turns`: one record at a time.

    Each record is folded as it comes and each turn reported as it closes, so nothing
    but the open turn's facts is held; ``state`` is the state after the records folded.
    """

    def __init__(self, config: ProjectionConfig) -> None:
        self.state = initial_state(config)
        self._current: _TurnBuilder | None = None
        self._last_key: str | None = None
        self._started = 0

    def turns(self, records: Iterable[r.Record], until_turn: int | None = None) -> Iterator[TurnReplay]:
        """Fold ``records``, yielding each turn after its refresh; stop after turn ``until_turn`` or more."""
        for record in records:
            done = self._see(record)
            if done is not None:
                yield done
                if until_turn is not None and done.turn >= until_turn:
                    return
        if self._current is not None:
            done, self._current = self._current.finish(self.state), None
            yield done

    def _see(self, record: r.Record) -> TurnReplay | None:
        """Fold ``record``; the turn it closes (finished before it is folded), if it closes one."""
        body = record.body
        current = self._current
        done = None
        if current is not None and (
            isinstance(body, r.TurnStarted)
            or (current.outcome is not None and record.kind not in r.DERIVED_KINDS)
        ):
            done, current = current.finish(self.state), None
        # fold, not apply: records that skip or repeat seqs are refused
        self.state = fold((record,), self.state)
        if isinstance(body, r.TurnStarted):
            self._started += 1
            current = _TurnBuilder(record, body, record.turn if record.turn is not None else self._started)
        self._current = current
        if current is None:
            return done
        current.records += 1
        if isinstance(body, r.TurnEnded):
            current.outcome, current.ended_seq = body.outcome, record.seq
        elif isinstance(body, r.ToolIntent):
            current.tool_calls += 1
        elif isinstance(body, r.Message) and body.role in _INPUT_ROLES and current.input is None:
            # A wake-up without explicit input answers the turn's first input message.
            current.input = body.text
        elif isinstance(body, r.WorkingMemoryDelta):
            current.delta = body
        elif isinstance(body, r.ContextEpisodeRecord):
            current.episodes.append(body)
        elif isinstance(body, r.PromptRendered):
            current.prompts.append(
                PromptSummary(
                    seq=record.seq,
                    cache_key=body.cache_key,
                    previous_cache_key=self._last_key,
                    working_memory_revision=body.working_memory_revision,
                    compression_epoch=body.compression_epoch,
                    total_tokens=body.total_tokens,
                    budget=body.budget,
                    sections=body.sections,
                    omitted=len(body.omitted),
                )
            )
            self._last_key = body.cache_key
        return done


# --------------------------------------------------------------------------- prompts


def config_from_recorded(render_config: dict[str, Any], *, where: str) -> tuple[Budget, RenderConfig]:
    """The Budget and RenderConfig a ``PromptRendered.render_config`` records.

    Raises InvalidRecord (naming ``where``) when the recorded config does not decode. The
    projection config it may record is read by :func:`recorded_projection`.
    """
    data = dict(render_config)
    data.pop("estimator_version", None)
    data.pop("projection", None)
    if "clear_batch_tokens" in data:
        # Renderer versions before 14 named it so: the least a clearing step frees.
        data.setdefault("clear_at_least", data.pop("clear_batch_tokens"))
    # Every prompt recorded before the layout was a choice was laid out in the RFC's order,
    # whatever the default is now.
    data.setdefault("layout", "rfc")
    # ... and left the turn's rounds no room of their own; and before render version 16
    # nothing was recalled.
    data.setdefault("rounds_reserve", 0.0)
    data.setdefault("recall_share", 0.0)
    budget = data.pop("budget", None)
    try:
        if budget is None:
            raise msgspec.ValidationError("the budget is missing")
        return msgspec.convert(budget, Budget), msgspec.convert(data, RenderConfig)
    except (msgspec.ValidationError, ValueError) as exc:
        raise InvalidRecord(
            f"the recorded render_config does not decode ({exc})", where=where, field="body.render_config"
        ) from None


_DERIVED: Final = frozenset({r.WorkingMemoryDelta, r.ContextEpisodeRecord})


def _stating(kind: type[r.Body]) -> str:
    """A record that states a projection config, as a message names it: ``the prompt``."""
    return "the prompt" if kind is r.PromptRendered else f"the {kind.KIND}"


class _ConfigScan:
    """:func:`projection_config_of`, one record at a time, so a pass can also do other work.

    The first error is kept, not raised, so that a caller can raise it where
    :func:`projection_config_of` would have (see :meth:`result`).
    """

    def __init__(self) -> None:
        # The first record stating a config: its seq, the config, and its body type.
        self.first: tuple[int, ProjectionConfig, type[r.Body]] | None = None
        self.error: InvalidRecord | None = None

    def see(self, record: r.Record) -> None:
        if self.error is not None:
            return
        body = record.body
        kind = type(body)  # not isinstance: this runs for every record, and it is the cheaper test
        if kind is r.PromptRendered:
            prompt = cast(r.PromptRendered, body)
            if not prompt.render_config:
                return
            try:
                config = recorded_projection(prompt.render_config, where=f"seq {record.seq}")
            except InvalidRecord as exc:
                self.error = exc
                return
        elif kind in _DERIVED:
            config = stated_config(cast("r.WorkingMemoryDelta | r.ContextEpisodeRecord", body))
        else:
            return
        if config is None:
            return
        first = self.first
        if first is None:
            self.first = (record.seq, config, kind)
        elif config is not first[1] and config != first[1]:
            self.error = InvalidRecord(
                f"{_stating(kind)} records {describe_projection(config)}, but {_stating(first[2])} at seq "
                f"{first[0]} recorded {describe_projection(first[1])}: the agent's projection config changed "
                "within this ledger, so its derived records cannot be re-derived from seq 0 under "
                "either config",
                where=f"seq {record.seq}",
                field="body.render_config.projection" if kind is r.PromptRendered else "body.projection",
            )

    def result(self) -> ProjectionConfig:
        if self.error is not None:
            raise self.error
        return self.first[1] if self.first is not None else DEFAULT_CONFIG


def projection_config_of(records: Iterable[r.Record]) -> ProjectionConfig:
    """The projection config ``records`` were derived under, as their derived records and prompts state it.

    The config of the first record that states one: a delta or an episode of projection
    version 9 or later (which always states it, ``None`` being the default), or a
    ``PromptRendered`` recording one (the renderer records none for the default, and
    older ledgers record none at all); else the default. A later record stating a
    different config is an InvalidRecord naming both seqs and both configs: derived
    records under two configs cannot be re-derived from seq 0 under either one.
    """
    scan = _ConfigScan()
    for record in records:
        scan.see(record)
        if scan.error is not None:
            break
    return scan.result()


class PromptAt(msgspec.Struct, frozen=True, kw_only=True):
    """A prompt re-rendered from a ledger, and the record it is checked against.

    ``before_seq``: the prompt is rendered from every record with a smaller seq.
    ``recorded`` / ``recorded_seq``: the ``PromptRendered`` it reproduces, if the turn
    has one. ``checked`` is true when the recorded budget and config were used, so the
    hashes must match; ``reproducible`` is false when the record carries no
    ``render_config`` (it was not written by :func:`holon.context.prompt_rendered`).
    ``delta_confirmed`` is true when an earlier prompt already confirmed the current
    working-memory revision, so a ``pending_delta`` section in this prompt is that
    revision's delta shown again (unpinned, for the cache prefix), not news.
    """

    turn: int | None
    before_seq: int
    prompt: Prompt
    recorded: r.PromptRendered | None = None
    recorded_seq: int | None = None
    checked: bool = False
    reproducible: bool = True
    delta_confirmed: bool = False

    @property
    def matches(self) -> bool:
        """True when the prompt was checked and its hash equals the recorded one."""
        recorded = self.recorded
        return self.checked and recorded is not None and self.prompt.prompt_hash == recorded.prompt_hash

    def mismatch_reasons(self) -> tuple[str, ...]:
        """Why a checked prompt may differ: a renderer or estimator version changed since."""
        return version_changes(self.recorded.render_config) if self.recorded is not None else ()


def version_changes(render_config: dict[str, Any]) -> tuple[str, ...]:
    """Why a prompt recorded with ``render_config`` may not reproduce here, named for a reader.

    Empty when its renderer and estimator versions are this holon's; otherwise each
    difference: another renderer version, another estimator version, or an estimator
    this holon cannot load. A prompt whose hash differs for none of these reasons is a
    real divergence.
    """
    reasons: list[str] = []
    version = render_config.get("version")
    if version is not None and version != RENDER_VERSION:
        reasons.append(f"recorded by renderer version {version}, this holon renders version {RENDER_VERSION}")
    name = render_config.get("estimator")
    if isinstance(name, str):
        try:
            current = get_estimator(name).version
        except (KeyError, ValueError, ImportError):
            current = None
        if current is None:
            reasons.append(f"estimator {name!r} is not available here")
        elif render_config.get("estimator_version") != current:
            reasons.append(
                f"estimator {name} was version {render_config.get('estimator_version')}, now {current}"
            )
    return tuple(reasons)


class RenderOverrides(msgspec.Struct, frozen=True, kw_only=True):
    """Changes to the budget and render config a prompt is rendered with; ``None`` keeps a value.

    They apply on top of the recorded budget and config (or the defaults when there
    are none), so ``RenderOverrides(context_window=4000)`` keeps the recorded output
    reserve and everything else.
    """

    context_window: int | None = None
    output_reserve: int | None = None
    prompt_cache_key: str | None = None
    estimator: str | None = None

    @property
    def empty(self) -> bool:
        """True when nothing is overridden."""
        return self == RenderOverrides()

    def apply(self, budget: Budget, config: RenderConfig) -> tuple[Budget, RenderConfig]:
        """``budget`` and ``config`` with the overridden values replaced."""
        if self.context_window is not None or self.output_reserve is not None:
            budget = Budget(
                context_window=self.context_window
                if self.context_window is not None
                else budget.context_window,
                output_reserve=self.output_reserve
                if self.output_reserve is not None
                else budget.output_reserve,
                prefix_share=budget.prefix_share,
                episode_share=budget.episode_share,
            )
        if self.prompt_cache_key is not None:
            config = msgspec.structs.replace(config, prompt_cache_key=self.prompt_cache_key)
        if self.estimator is not None:
            config = msgspec.structs.replace(config, estimator=self.estimator)
        return budget, config


_NO_OVERRIDES: Final = RenderOverrides()


def _recorded_settings(record: r.Record) -> tuple[Budget, RenderConfig] | None:
    body = record.body
    if isinstance(body, r.PromptRendered) and body.render_config:
        return config_from_recorded(body.render_config, where=f"seq {record.seq}")
    return None


def _load_estimator(config: RenderConfig, recorded_by: r.Record | None) -> None:
    """Load the estimator ``config`` names, so that one this holon cannot load is a clear error.

    ``recorded_by`` is the ``prompt_rendered`` record the name comes from (``None`` when
    the caller chose it). Unloadable: a name from a newer holon, or an exact estimator
    without the optional tokenizer extra.
    """
    try:
        get_estimator(config.estimator)
    except ValueError as exc:
        if recorded_by is None:
            raise UsageError(str(exc)) from None
        raise InvalidRecord(
            f"the recorded render_config names an estimator this holon cannot load: {exc}; "
            "render with another estimator (holon render --estimator NAME)",
            where=f"seq {recorded_by.seq}",
            field="body.render_config.estimator",
        ) from None


def prompt_at(
    records: Sequence[r.Record],
    turn: int,
    *,
    agent_id: str,
    call: int = 1,
    overrides: RenderOverrides = _NO_OVERRIDES,
    projection: ProjectionConfig | None = None,
    blobs: Callable[[str], bytes] | None = None,
) -> PromptAt:
    """The prompt of model call ``call`` (1-based) of turn ``turn``, re-rendered from the ledger.

    When the turn has a ``PromptRendered`` for that call, the prompt is rendered from the
    records before it with the budget and config recorded in it. Without ``overrides``
    the result is ``checked``: its hash must equal the recorded ``prompt_hash`` (see
    :attr:`PromptAt.matches`). A turn without recorded prompts is rendered as its first
    call would have seen it — after its ``turn_started`` and input messages — with the
    newest budget and config recorded before it (or the defaults). The ledger is folded
    under ``projection``, or (by default) the projection config its prompts record.
    ``blobs`` reads the blob store (the ledger's ``get_blob``): without it, an output stored
    there is shown as its preview, not as the agent that had the store showed it.
    """
    return prompt_of(
        lambda: records,
        turn,
        agent_id=agent_id,
        call=call,
        overrides=overrides,
        projection=projection,
        blobs=blobs,
    )


def next_prompt(
    records: Sequence[r.Record],
    *,
    agent_id: str,
    overrides: RenderOverrides = _NO_OVERRIDES,
    projection: ProjectionConfig | None = None,
    blobs: Callable[[str], bytes] | None = None,
) -> PromptAt:
    """The prompt for the next model call after ``records``.

    Rendered with the budget and config of the newest recorded prompt that has a
    ``render_config`` (what the agent itself renders with), else the defaults, with
    ``overrides`` applied; folded under ``projection``, or (by default) the projection
    config the records' prompts record. ``blobs``: as for :func:`prompt_at`.
    """
    return next_prompt_of(
        lambda: records, agent_id=agent_id, overrides=overrides, projection=projection, blobs=blobs
    )


def _render_next(
    source: r.Record | None,
    last: r.Record | None,
    folded: Callable[[], tuple[ProjectionState, EvidenceView]],
    *,
    agent_id: str,
    overrides: RenderOverrides,
    index: Callable[[ProjectionState], EpisodeIndex | None] | None = None,
    input: str | None = None,
) -> PromptAt:
    """The prompt for the next model call after ``last``, rendered from ``folded()``.

    With ``input``, a new turn's first call for that input (see :func:`next_prompt_of`).

    ``source`` is the newest ``prompt_rendered`` with a ``render_config`` (``None``: the
    defaults); ``folded`` is called after its settings are decoded and its estimator loaded.
    ``index(state)`` may give an episode index over the state's archive (a checkpoint's
    saved one), so that the renderer does not index every archived episode again.
    """
    settings = _recorded_settings(source) if source is not None else None
    budget, config = overrides.apply(*(settings or (DEFAULT_BUDGET, RenderConfig())))
    _load_estimator(config, source if overrides.estimator is None else None)
    state, evidence = folded()
    ts = last.ts if last is not None else 0
    pending: list[r.Record] = []
    if input is not None:
        last_turn = state.runtime.turn
        if last_turn is not None and last_turn.open:
            raise UsageError(
                f"turn {last_turn.index} is still open in the ledger: --input renders a new turn's first "
                "prompt, which cannot begin inside it; render without --input for that turn's next call"
            )
        index_of = 1 if last_turn is None or last_turn.index is None else last_turn.index + 1
        for body in (r.TurnStarted(trigger="user"), r.Message(role="user", text=input)):
            record = r.Record(body=body, ts=ts, turn=index_of, seq=state.seq + 1)
            pending.append(record)
            state = apply(state, record)
    # As the runtime would: refresh first what the open turn made untrue (folded, not appended).
    for derived in refresh_before_prompt(state, ts=ts):
        state = apply(state, msgspec.structs.replace(derived, seq=state.seq + 1))
    episodes = index(state) if index is not None else None
    history = PendingView(evidence, pending) if pending else evidence
    prompt = build_context(state, budget, config, agent_id=agent_id, index=episodes, history=history)
    turn = state.runtime.turn.index if state.runtime.turn is not None and state.runtime.turn.open else None
    return PromptAt(
        turn=turn,
        before_seq=last.seq + 1 if last is not None else 0,
        prompt=prompt,
        delta_confirmed=state.memory.pending is None,
    )


# --------------------------------------------------------------------------- memory


class MemoryView(msgspec.Struct, frozen=True, kw_only=True):
    """Working memory at one point: snapshot, its lines, pending delta, episode builder.

    ``latest_delta`` is the delta that made the current revision once a prompt has
    confirmed it (``pending_delta`` is then ``None``): the renderer may still show it,
    unpinned, while the revision holds.
    """

    turn: int | None
    after_seq: int
    revision: int
    compression_epoch: int
    confirmed_revision: int | None
    archived_episodes: int
    snapshot: WorkingMemorySnapshot
    lines: tuple[str, ...]
    pending_delta: r.WorkingMemoryDelta | None
    latest_delta: r.WorkingMemoryDelta | None
    builder: ActiveEpisodeBuilder


def _confirmed_delta(memory: WorkingMemoryState) -> r.WorkingMemoryDelta | None:
    latest = memory.latest_delta
    if memory.pending is not None or latest is None or latest.to_revision != memory.revision:
        return None
    return latest


def memory_at(
    records: Sequence[r.Record], turn: int | None = None, *, projection: ProjectionConfig | None = None
) -> MemoryView:
    """Working memory after turn ``turn``'s post-turn refresh (or after the whole ledger).

    Folded under ``projection``, or (by default) the projection config the ledger's prompts record.
    """
    return memory_of(lambda: records, turn, projection=projection)


def _memory_view(turn: int | None, state: ProjectionState) -> MemoryView:
    memory = state.memory
    return MemoryView(
        turn=turn,
        after_seq=state.seq,
        revision=memory.revision,
        compression_epoch=memory.compression_epoch,
        confirmed_revision=memory.confirmed_revision,
        archived_episodes=memory.archived_episodes,
        snapshot=memory.snapshot,
        lines=snapshot_lines(memory.snapshot),
        pending_delta=memory.pending,
        latest_delta=_confirmed_delta(memory),
        builder=memory.builder,
    )


# --------------------------------------------------------------------------- streaming a ledger

#: Reads a ledger's records from seq 0, in order, afresh at each call (``lambda: ledger.read()``).
#: The ``*_of`` functions below read a ledger in passes this way instead of holding its records.
Reader = Callable[[], Iterable[r.Record]]

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
    instead of reading every record (see :func:`_from_checkpoint`).
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


class _TurnScan:
    """Where turn ``wanted`` lies, found in one pass: what ``find_turn(turn_spans(records))`` gives.

    Also kept for that turn: its recorded prompts (index and record), the end of its
    input — its ``turn_started`` and the input messages right after it — with the record
    before it, and the newest prompt with a ``render_config`` before it (what
    :func:`next_prompt` would render its prefix with).
    """

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted
        self.found: TurnSpan | None = None
        self.prompts: list[tuple[int, r.Record]] = []
        self.input_end = 0
        self.input_last: r.Record | None = None
        self.settings: r.Record | None = None
        self._spans = _SpanScan()
        self._inputs = False  # still reading the input messages right after its turn_started
        self._configured: r.Record | None = None

    def see(self, index: int, record: r.Record) -> None:
        body = record.body
        self._take(self._spans.see(index, record))
        opened = self._spans.open
        if self.found is None and opened is not None and opened[1] == self.wanted:
            if opened[0] == index:  # its turn_started
                self._inputs, self.input_end, self.input_last = True, index + 1, record
                self.settings = self._configured
            else:
                if isinstance(body, r.PromptRendered):
                    self.prompts.append((index, record))
                if self._inputs and isinstance(body, r.Message) and body.role in _INPUT_ROLES:
                    self.input_end, self.input_last = index + 1, record
                else:
                    self._inputs = False
        if isinstance(body, r.PromptRendered) and body.render_config:
            self._configured = record

    def _take(self, closed: TurnSpan | None) -> None:
        if closed is not None and self.found is None and closed.turn == self.wanted:
            self.found = closed

    def finish(self, count: int) -> TurnSpan:
        """The turn's span once ``count`` records were seen; UsageError as :func:`find_turn` when absent."""
        self._take(self._spans.finish(count))
        if self.found is None:
            raise _no_turn(self.wanted, self._spans.held)
        return self.found


class _Pass(msgspec.Struct, kw_only=True):
    """What a first pass over a ledger learns: its count, last record, newest configured prompt."""

    count: int = 0
    last: r.Record | None = None
    configured: r.Record | None = None


def _first_pass(read: Reader, config: _ConfigScan | None, turn: _TurnScan | None) -> _Pass:
    seen = _Pass()
    for index, record in enumerate(read()):
        if config is not None:
            config.see(record)
        if turn is not None:
            turn.see(index, record)
        body = record.body
        if isinstance(body, r.PromptRendered) and body.render_config:
            seen.configured = record
        seen.last = record
        seen.count = index + 1
    return seen


class _Resumed(NamedTuple):
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


def _from_checkpoint(
    resume: Resume | Checkpoints | None, projection: ProjectionConfig | None, *, settings: bool
) -> _Resumed | None:
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
    scan = _ConfigScan()
    seen = _first_pass(lambda: rest, scan, None)  # the first pass, over the records after it only
    configured = seen.configured
    if projection is None and (scan.error is not None or (scan.first and scan.first[1] != config)):
        return None  # the full pass decides: another config first recorded after it, or the error
    if settings and configured is None and last_prompt is not None:
        if not last_prompt.prompt.render_config:
            return None
        configured = resume.record(last_prompt.seq)
    last = seen.last if rest else resume.record(state.seq) if state.seq >= 0 else None
    return _Resumed(state=state, rest=rest, configured=configured, last=last)


def ledger_projection(read: Reader, resume: Resume | Checkpoints | None = None) -> ProjectionConfig:
    """:func:`projection_config_of` the records ``read()`` gives, from their newest checkpoint when it can.

    Given :class:`Checkpoints` whose newest checkpoint states the ledger's config (the
    rules of the whole-ledger reads, :func:`memory_of`), only the records after it are
    read; otherwise every record is, and a conflict is the same InvalidRecord.
    """
    resumed = _from_checkpoint(resume, None, settings=False)
    return resumed.state.config if resumed is not None else projection_config_of(read())


def state_to_append_to(
    read: Reader,
    incoming: Sequence[r.Record],
    resume: Resume | Checkpoints | None = None,
    *,
    where: Callable[[int], str] | None = None,
) -> ProjectionState:
    """The state of the ledger ``read()`` gives, for :func:`append_evidence` to append ``incoming`` onto.

    Folded under the projection config the ledger's records state, else the one the first
    record of ``incoming`` stating one states (in a ledger that states none, appended
    prompts may be the first to record it), else the default; from ``resume``'s
    checkpoint when there is one. An incoming prompt stating another config is left to
    :func:`append_evidence`, whose refusal names that record (an input line, not the seq
    the record was decoded with). Given :class:`Checkpoints` whose newest checkpoint
    states the ledger's config (the rule of the whole-ledger reads, :func:`memory_of`) and
    ``incoming`` states none or the same, there is no first pass: only the records after
    the checkpoint are read. Otherwise every record is: whether the ledger states a config
    is for its records to say, not a checkpoint that found none.

    A ledger that states none and holds no derived record takes an incoming config only
    when its turns derive nothing under it either (as :func:`holon.Agent.open` lets such
    a ledger in): otherwise the records appended would state a config under which its
    own turns owe derived records it lacks, and it would fail verification from seq 0
    for good. That is an InvalidRecord naming the incoming record (``where(n)`` for the
    n-th, as :func:`append_evidence` names it) and where the derivations part.
    """
    stated = _ConfigScan()
    stating = 0  # which incoming record (from 1) is the first to state a config
    for number, record in enumerate(incoming, 1):
        stated.see(record)
        if not stating and stated.first is not None:
            stating = number
    # The first config incoming states; a conflict or a config that does not decode after it
    # is append_evidence's to refuse, naming the record.
    wanted = stated.first[1] if stated.first is not None else None
    resumed = _from_checkpoint(resume, None, settings=False)
    if resumed is not None and (wanted is None or wanted == resumed.state.config):
        return fold(resumed.rest, resumed.state)
    scan = _ConfigScan()
    for record in read():
        scan.see(record)
        if scan.error is not None:
            break
    if scan.first is not None or scan.error is not None:
        return _fold_all(read, scan.result(), resume)
    if wanted is None:
        return _fold_all(read, DEFAULT_CONFIG, resume)
    state = _fold_all(read, wanted, resume)
    # Under the default, the config it verifies under now, nothing changes; a derived record
    # stating one is append_evidence's to refuse.
    if wanted != DEFAULT_CONFIG and stated.first is not None and stated.first[2] is r.PromptRendered:
        named = where(stating) if where is not None else f"input record {stating}"
        _check_unstated(read, state, wanted, named)
    return state


def _check_unstated(read: Reader, state: ProjectionState, config: ProjectionConfig, where: str) -> None:
    """Refuse ``config``, stated by the incoming record ``where``, for a ledger that states none,
    when the ledger's turns would derive under it what the ledger lacks (see :func:`state_to_append_to`),
    by the rule :func:`holon.Agent.open` applies (:func:`~holon.projections.unstated_config_derives`)."""
    lacking = unstated_config_derives(state, config, read)
    if lacking is not None:
        raise InvalidRecord(
            f"the prompt records {describe_projection(config)}, but the ledger states no projection config "
            f"and holds no derived record, and under that config {lacking}: its turns were written under "
            "another config (or without the post-turn refresh), and with this prompt appended it would no "
            "longer verify from seq 0. Append it to a ledger written under its config, or start a new ledger",
            where=where,
            field="body.render_config.projection",
        )


#: Evidence a read-only fold keeps in memory for the prompt it renders; a history reaching
#: further back is read from the ledger again, so a command's memory stays flat however
#: long the ledger (and a replay's histories are read by range).
_REPLAY_CHARS: Final = 1 << 18


def _older_of(resume: Resume | Checkpoints | None, read: Reader) -> Callable[[int, int], Iterable[r.Record]]:
    """How a fold reads records it did not keep: by seq from the ledger (:class:`Checkpoints`),
    else by reading ``read()`` up to them."""
    if isinstance(resume, Checkpoints):
        return resume.records
    return records_by_scan(read)


def records_by_scan(read: Reader) -> Callable[[int, int], Iterator[r.Record]]:
    """Records by seq range (``from_seq <= seq < to_seq``), found by reading ``read()`` from its start."""

    def scan(from_seq: int, to_seq: int) -> Iterator[r.Record]:
        for record in read():
            if record.seq >= to_seq:
                return
            if record.seq >= from_seq:
                yield record

    return scan


def _fold_first(
    read: Reader,
    count: int,
    projection: ProjectionConfig,
    blobs: Callable[[str], bytes] | None = None,
    older: Callable[[int, int], Iterable[r.Record]] | None = None,
) -> tuple[ProjectionState, EvidenceBuffer]:
    """The state after the first ``count`` records ``read()`` gives, and their evidence."""
    return fold_seeing(itertools.islice(read(), count), config=projection, older=older, blobs=blobs)


def fold_seeing(
    records: Iterable[r.Record],
    state: ProjectionState | None = None,
    *,
    config: ProjectionConfig | None = None,
    older: Callable[[int, int], Iterable[r.Record]] | None = None,
    blobs: Callable[[str], bytes] | None = None,
) -> tuple[ProjectionState, EvidenceBuffer]:
    """:func:`~holon.projections.fold`, keeping the evidence the history of a prompt is read
    from (:class:`~holon.context.EvidenceBuffer`); ``older`` reads what came before
    ``state`` (a checkpoint's), so a history can reach back past it as the agent's did,
    and ``blobs`` the outputs stored as blobs."""
    evidence = EvidenceBuffer(
        start=state.seq + 1 if state is not None else 0, older=older, blob=blobs, max_chars=_REPLAY_CHARS
    )

    def seen() -> Iterator[r.Record]:
        for record in records:
            evidence.add(record)
            yield record

    return fold(seen(), state, config=config), evidence


def _fold_all(read: Reader, projection: ProjectionConfig, resume: Resume | None) -> ProjectionState:
    start = resume(projection) if resume is not None else None
    if start is None:
        return fold(read(), config=projection)
    state, rest = start
    return fold(rest, state)


class Replay:
    """A replay of the records ``read()`` gives, read in passes rather than held (:func:`replay_of`).

    The first pass, made by :func:`replay_of`, learns what is replayed: ``records``, the
    count through turn ``until_turn``'s post-turn refresh (every record without one),
    the ``turn_count`` turns among them, the ``last_seq`` of the last one (-1: none) and the
    ``projection`` config of the whole ledger. :meth:`turns` folds them, yielding
    each turn as :func:`replay_turns` does; ``state`` is then the state after them.
    """

    def __init__(
        self, read: Reader, *, projection: ProjectionConfig, records: int, turns: int, last_seq: int
    ) -> None:
        self.projection = projection
        self.records = records
        self.turn_count = turns
        self.last_seq = last_seq
        self.state: ProjectionState | None = None
        self._read = read

    def read(self) -> Iterator[r.Record]:
        """The records replayed, read afresh (for a pass of the caller's own, such as a check)."""
        return itertools.islice(self._read(), self.records)

    def turns(self) -> Iterator[TurnReplay]:
        """Fold the records replayed and yield each turn after its refresh; then ``state`` is set."""
        folding = _TurnFold(self.projection)
        yield from folding.turns(self.read())
        self.state = folding.state


def replay_of(
    read: Reader, *, until_turn: int | None = None, projection: ProjectionConfig | None = None
) -> Replay:
    """:func:`replay_turns` of the records ``read()`` gives through turn ``until_turn``, read in passes.

    One pass here learns the projection config (of the whole ledger, also when only a
    prefix is replayed; ``projection`` when given) and where turn ``until_turn`` ends
    (UsageError as :func:`find_turn` when there is no such turn); the returned
    :class:`Replay` folds in another. Nothing is held but one turn's facts.
    """
    scan = _ConfigScan() if projection is None else None
    spans = _SpanScan()
    found: tuple[int, int, int] | None = None  # records, turns, last seq through until_turn
    count = 0
    last: r.Record | None = None
    for index, record in enumerate(read()):
        if scan is not None:
            scan.see(record)
        closed = spans.see(index, record)
        if found is None and closed is not None and closed.turn == until_turn:
            assert last is not None  # the record before ``record`` ends the span
            found = (closed.end, spans.closed, last.seq)
        last, count = record, index + 1
    closed = spans.finish(count)
    if found is None and closed is not None and closed.turn == until_turn:
        assert last is not None
        found = (closed.end, spans.closed, last.seq)
    if scan is not None:
        projection = scan.result()
    assert projection is not None
    if until_turn is None:
        found = (count, spans.closed, last.seq if last is not None else -1)
    elif found is None:
        raise _no_turn(until_turn, spans.held)
    records, turns, last_seq = found
    return Replay(read, projection=projection, records=records, turns=turns, last_seq=last_seq)


def memory_of(
    read: Reader,
    turn: int | None = None,
    *,
    projection: ProjectionConfig | None = None,
    resume: Resume | Checkpoints | None = None,
) -> MemoryView:
    """:func:`memory_at` of the records ``read()`` gives, read in passes rather than held.

    Without ``turn`` the fold may start from ``resume``'s verified state (a checkpoint);
    the result is the same. Given :class:`Checkpoints` whose newest checkpoint states
    the ledger's config, there is no first pass: only the records after the checkpoint
    are read (the records up to it are trusted, as the checkpoint verified; `holon
    verify` reads them all).
    """
    if turn is None:
        resumed = _from_checkpoint(resume, projection, settings=False)
        if resumed is not None:
            return _memory_view(turn, fold(resumed.rest, resumed.state))
        if projection is not None:
            return _memory_view(turn, _fold_all(read, projection, resume))  # nothing to learn first
    scan = _ConfigScan() if projection is None else None
    turns = _TurnScan(turn) if turn is not None else None
    seen = _first_pass(read, scan, turns)
    if scan is not None:
        projection = scan.result()
    assert projection is not None
    if turns is None:
        return _memory_view(turn, _fold_all(read, projection, resume))
    return _memory_view(turn, _fold_first(read, turns.finish(seen.count).end, projection)[0])


def next_prompt_of(
    read: Reader,
    *,
    agent_id: str,
    overrides: RenderOverrides = _NO_OVERRIDES,
    projection: ProjectionConfig | None = None,
    resume: Resume | Checkpoints | None = None,
    blobs: Callable[[str], bytes] | None = None,
    older: Callable[[int, int], Iterable[r.Record]] | None = None,
    input: str | None = None,
) -> PromptAt:
    """:func:`next_prompt` of the records ``read()`` gives, read in passes rather than held.

    With ``input``, the prompt of a new turn's first model call for that input (a user
    message), as :meth:`holon.Agent.preview` renders it: the turn's opening records are
    folded after the ledger's, stamped with the last record's ``ts``, and never written.

    ``blobs`` reads a blob's bytes (the ledger's ``get_blob``): the history shows the tool
    outputs stored there, as the agent's own prompts do. ``older(from_seq, to_seq)`` reads
    records by seq (the ledger's ``read``) for a history reaching back past what the fold
    keeps; by default ``read()`` is scanned for them.

    The fold may start from ``resume``'s verified state (a checkpoint); the prompt is the
    same. Given :class:`Checkpoints` whose newest checkpoint states the ledger's config
    and whose last prompt (or one after it) records its render settings, there is no
    first pass: only the records after the checkpoint are read (the records up to it are
    trusted, as the checkpoint verified; `holon verify` reads them all). Whenever the fold
    starts from a checkpoint of :class:`Checkpoints`, the episode index saved with it is
    used rather than built again, as the agent does.
    """
    started: list[int] = []  # the seq of the checkpoint the fold started from, if it did

    def index(state: ProjectionState) -> EpisodeIndex | None:
        if not started or not isinstance(resume, Checkpoints):
            return None
        return resume.episode_index(started[0], state.memory.archive)

    older = older if older is not None else _older_of(resume, read)
    resumed = _from_checkpoint(resume, projection, settings=True)
    if resumed is not None:
        started.append(resumed.state.seq)
        return _render_next(
            resumed.configured,
            resumed.last,
            lambda: fold_seeing(resumed.rest, resumed.state, older=older, blobs=blobs),
            agent_id=agent_id,
            overrides=overrides,
            index=index,
            input=input,
        )
    scan = _ConfigScan() if projection is None else None
    seen = _first_pass(read, scan, None)

    def folded() -> tuple[ProjectionState, EvidenceView]:
        config = scan.result() if scan is not None else projection
        assert config is not None
        start = resume(config) if resume is not None else None
        if start is None:
            return fold_seeing(read(), config=config, older=older, blobs=blobs)
        started.append(start[0].seq)
        return fold_seeing(start[1], start[0], older=older, blobs=blobs)

    return _render_next(
        seen.configured, seen.last, folded, agent_id=agent_id, overrides=overrides, index=index, input=input
    )


def prompt_of(
    read: Reader,
    turn: int,
    *,
    agent_id: str,
    call: int = 1,
    overrides: RenderOverrides = _NO_OVERRIDES,
    projection: ProjectionConfig | None = None,
    blobs: Callable[[str], bytes] | None = None,
    older: Callable[[int, int], Iterable[r.Record]] | None = None,
) -> PromptAt:
    """:func:`prompt_at` of the records ``read()`` gives, read in passes rather than held
    (``blobs`` and ``older``: as for :func:`next_prompt_of`)."""
    older = older if older is not None else _older_of(None, read)
    scan = _ConfigScan() if projection is None else None
    turns = _TurnScan(turn)
    seen = _first_pass(read, scan, turns)
    if scan is not None:
        projection = scan.result()
    assert projection is not None
    turns.finish(seen.count)
    if call < 1:
        raise UsageError(f"call {call} must be 1 or more (the first model call of a turn is 1)")
    if not turns.prompts:
        if call != 1:
            raise UsageError(f"turn {turn} has no recorded prompt, so it has no call {call}")
        folded_under = projection
        found = _render_next(
            turns.settings,
            turns.input_last,
            lambda: _fold_first(read, turns.input_end, folded_under, blobs, older),
            agent_id=agent_id,
            overrides=overrides,
        )
        return msgspec.structs.replace(found, turn=turn)
    if call > len(turns.prompts):
        raise UsageError(f"turn {turn} recorded {len(turns.prompts)} prompt(s); there is no call {call}")
    index, record = turns.prompts[call - 1]
    recorded = record.body
    assert isinstance(recorded, r.PromptRendered)
    state, evidence = _fold_first(read, index, projection, blobs, older)
    settings = _recorded_settings(record)
    budget, config = overrides.apply(*(settings or (DEFAULT_BUDGET, RenderConfig())))
    _load_estimator(config, record if settings is not None and overrides.estimator is None else None)
    prompt = build_context(state, budget, config, agent_id=agent_id, history=evidence)
    return PromptAt(
        turn=turn,
        before_seq=record.seq,
        prompt=prompt,
        recorded=recorded,
        recorded_seq=record.seq,
        checked=settings is not None and overrides.empty,
        reproducible=settings is not None,
        delta_confirmed=state.memory.pending is None,
    )


# --------------------------------------------------------------------------- statistics


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


def ledger_stats(
    records: Iterable[r.Record], *, projection: ProjectionConfig | None = None, resume: Resume | None = None
) -> LedgerStats:
    """Count what a ledger holds and summarize its recorded prompts.

    Folded under ``projection``, or (by default) the projection config the ledger's prompts
    record. One pass over ``records`` when ``projection`` is given, keeping counts rather
    than records. With ``resume``, the fold starts from its verified state (a checkpoint of
    the same ledger): records up to it are counted, not folded, and the result is the same.
    """
    records, projection = _projection_of(records, projection)
    by_kind: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    section_tokens: dict[str, Counter[int]] = {}
    section_forms: dict[str, list[int]] = {}
    totals: Counter[int] = Counter()
    reasons: dict[str, int] = {}
    keys: set[str] = set()
    changes = evictions = blobs = count = unknown = calls = 0
    last_key: str | None = None
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
            totals[body.total_tokens] += 1
            for s in body.sections:
                section_tokens.setdefault(s.section, Counter())[s.tokens] += 1
                forms = section_forms.setdefault(s.section, [0, 0])
                forms[0] += s.form in ("compact", "truncated")
                forms[1] += s.form == "omitted"
            evictions += len(body.omitted)
            for o in body.omitted:
                reasons[o.reason] = reasons.get(o.reason, 0) + 1
            keys.add(body.cache_key)
            changes += last_key is not None and body.cache_key != last_key
            last_key = body.cache_key
    unknown += sum(unanswered.values())
    # Reasons name their item (a decision, a file): counted by reason, a summary has a row per
    # item; by cause (holon.context.causes), one per kind of omission, as the audit counts.
    causes: Counter[str] = Counter()
    for reason, n in reasons.items():
        causes[omission_cause(reason)] += n
    order = {name: i for i, name in enumerate(SECTION_ORDER)}
    sections = tuple(
        _section_stats(name, section_tokens[name], *section_forms[name])
        for name in sorted(section_tokens, key=lambda n: (order.get(n, len(order)), n))
    )
    return LedgerStats(
        records=count,
        by_kind=dict(sorted(by_kind.items())),
        turns=by_kind.get(r.TurnStarted.KIND, 0),
        outcomes=dict(sorted(outcomes.items())),
        tool_calls=calls,
        unknown_outcomes=unknown,
        prompts=totals.total(),
        prompt_tokens=_section_stats("total", totals, 0, 0) if totals else None,
        sections=sections,
        evictions=evictions,
        evictions_by_reason=dict(sorted(reasons.items())),
        evictions_by_cause=dict(sorted(causes.items(), key=lambda item: (-item[1], item[0]))),
        cache_keys=len(keys),
        cache_key_changes=changes,
        revision=state.memory.revision,
        compression_epoch=state.memory.compression_epoch,
        episodes=state.memory.archived_episodes,
        blobs=blobs,
        first_ts=first_ts,
        last_ts=last_ts,
    )


# --------------------------------------------------------------------------- appending


def _tail_ts(ledger: Ledger) -> int:
    seq = ledger.head()[0]
    return ledger.get(seq).ts if seq >= 0 else 0


def _check_evidence(record: r.Record, folded: ProjectionState, last_ts: int, where: str) -> None:
    """Refuse an input record the runtime would never write (see :func:`append_evidence`)."""
    if record.kind in r.DERIVED_KINDS:
        raise InvalidRecord(
            f"{record.kind} is a derived record: the post-turn refresh appends it; "
            "to copy a whole ledger use `holon import --from jsonl`",
            where=where,
            field="kind",
        )
    if not r.MIN_TS <= record.ts <= r.MAX_TS:
        # The ledger's own range, checked here so the error names the input record.
        raise r.ts_out_of_range(record.ts, where=where)
    if record.ts < last_ts:
        raise InvalidRecord(
            f"ts {record.ts} is before the previous record's ts {last_ts}: timestamps never go "
            "backwards in a ledger; append (or import) records in time order",
            where=where,
            field="ts",
        )
    if record.turn is not None and record.turn < 0:
        raise InvalidRecord(f"turn {record.turn} is negative", where=where, field="turn")
    body = record.body
    if isinstance(body, r.PromptRendered) and body.render_config:
        recorded = recorded_projection(body.render_config, where=where)
        if recorded is not None and recorded != folded.config:
            # The refresh would go on deriving under the folded config: the ledger would
            # then say one config and hold records derived under another.
            raise InvalidRecord(
                f"the prompt records {describe_projection(recorded)}, but the ledger is derived under "
                f"{describe_projection(folded.config)}; append it to a ledger derived under its config",
                where=where,
                field="body.render_config.projection",
            )
    if isinstance(body, r.PromptRendered) and (
        body.working_memory_revision > folded.memory.revision
        or body.compression_epoch > folded.memory.compression_epoch
    ):
        # A prompt confirms the revision it showed: one claiming a revision the ledger has not
        # reached would confirm the next working-memory change before any prompt showed it, so
        # the model would never be told of it.
        raise InvalidRecord(
            f"the prompt records working-memory revision {body.working_memory_revision} and compression "
            f"epoch {body.compression_epoch}, but the ledger has reached revision {folded.memory.revision} "
            f"and epoch {folded.memory.compression_epoch}; a prompt can only show what was derived before "
            "it: fix the record's revision and epoch",
            where=where,
            field="body.working_memory_revision"
            if body.working_memory_revision > folded.memory.revision
            else "body.compression_epoch",
        )
    turn = folded.runtime.turn
    is_open = turn is not None and turn.open
    if isinstance(record.body, r.TurnEnded) and not is_open:
        raise InvalidRecord(
            "turn_ended with no open turn: append the turn's turn_started first", where=where, field="kind"
        )
    if isinstance(record.body, r.TurnStarted) and is_open:
        assert turn is not None
        raise InvalidRecord(
            f"turn_started while turn {turn.index} is still open: end it with a turn_ended first",
            where=where,
            field="kind",
        )
    if is_open and turn is not None and turn.index is not None and record.turn != turn.index:
        # The runtime writes every record of a turn with the turn's number. One that names
        # another turn (a number going backwards in an imported history) filed the turn's
        # message under that turn; a turn_ended under another number, or none, closed the
        # turn's episode as "turns 3-1" (or "3-None") and gave its derived records that turn.
        named = record.turn is not None or isinstance(record.body, r.TurnEnded)
        if named and not isinstance(record.body, r.TurnStarted):
            raise InvalidRecord(
                f"{record.kind} of turn {record.turn} while turn {turn.index} is open: a record of a "
                f"turn carries its number; give it turn {turn.index}",
                where=where,
                field="turn",
            )
    last = turn.index if turn is not None else None
    repeated = record.turn is not None and last is not None and record.turn <= last
    if isinstance(record.body, r.TurnStarted) and repeated:
        assert record.turn is not None and last is not None
        # The runtime numbers turns last + 1: a repeated number makes `--at-turn N` ambiguous.
        raise InvalidRecord(
            f"turn_started for turn {record.turn} after turn {last}: turn numbers only go up in "
            f"a ledger; number this turn {last + 1} or higher",
            where=where,
            field="turn",
        )


def _check_blob_ref(record: r.Record, ledger: Ledger, where: str) -> None:
    """Refuse an input output given as a reference to a blob ``ledger`` does not hold as it says.

    The ledger checks this too, naming the seq the record would get and asking a library
    caller to ``put_blob()`` first; evidence is given with its output inline (the ledger moves a
    large one to its blob store), so what to do is to give it so, or to copy the export the
    reference came from with its blobs.
    """
    body = record.body
    if not isinstance(body, r.ToolResult | r.TaskResult) or body.blob is None:
        return
    ref = body.blob
    instead = (
        "give the output itself in `output`, without `blob` (the ledger moves a large one to its blob "
        "store), or copy the whole `holon export` the record comes from, whose blobs come with it in "
        "FILE.blobs/, into a new ledger with `holon import NEW FILE --from jsonl`"
    )
    try:
        held = ledger.has_blob(ref.hash)
    except ValueError:  # InvalidRef: no blake3 hex digest
        raise InvalidRecord(
            f"blob {ref.hash!r} is no blob name (64 lowercase hex characters, a blake3 digest): {instead}",
            where=where,
            field="body.blob.hash",
        ) from None
    if not held:
        raise InvalidRecord(
            f"the output is a reference to blob {ref.hash}, which the blob store of ledger {ledger.path} "
            f"does not hold: {instead}",
            where=where,
            field="body.blob.hash",
        )
    size = ledger.blobs.size(ref.hash)
    if size != ref.size:
        raise InvalidRecord(
            f"the reference says blob {ref.hash[:16]}… holds {ref.size:,} bytes, the ledger's blob holds "
            f"{size:,}: set `size` to {size}, or {instead}",
            where=where,
            field="body.blob.size",
        )


#: What an oversized evidence record's sender can do (the ledger's advice is a library caller's).
_OVERSIZED_EVIDENCE: Final = (
    "only a tool's or task's output moves to the blob store (when it is longer than the ledger's blob "
    "threshold), no other field: shorten this record, or split its text over several records"
)


def _named_input(
    exc: InvalidRecord, numbers: dict[int, int], where: Callable[[int], str] | None
) -> InvalidRecord:
    """``exc``, raised by the ledger for the record it would give ``seq N``, naming the input record instead.

    ``numbers`` maps the seqs of input records to their numbers (from 1); a derived record's
    error keeps its seq.
    """
    found = re.match(r"seq (\d+)", exc.where or "")
    number = numbers.get(int(found.group(1))) if found is not None else None
    if number is None:
        return exc
    return InvalidRecord(
        exc.detail.replace(OVERSIZED_ADVICE, _OVERSIZED_EVIDENCE),
        where=where(number) if where is not None else f"input record {number}",
        field=exc.field,
    )


def append_evidence(
    ledger: Ledger,
    records: Iterable[r.Record],
    *,
    state: ProjectionState | None = None,
    progress: Callable[[int], None] | None = None,
    where: Callable[[int], str] | None = None,
) -> list[int]:
    """Append evidence records as the runtime would; returns the seqs written.

    ``state`` must be the ledger folded so far (it is folded here when omitted). Each
    record gets the next seq; after every ``turn_ended`` the post-turn refresh runs and
    its derived records are appended right after it (and before a ``prompt_rendered``,
    the refresh the runtime runs before a prompt), and a refresh the ledger still owes
    (its writer died after a ``turn_ended``, or between the refresh's delta and its
    episode) is appended first. Derived records in
    the input are refused (they are the refresh's to write). Everything is checked and
    derived before the first byte is written: on any error nothing is appended.
    Refused as well, because the runtime never writes them and the projections would
    fold them into nonsense: a negative or out-of-range ``ts``, a ``ts`` before the
    previous record's (timestamps never go backwards in a ledger), a negative ``turn``,
    a ``turn_ended`` with no open turn, a ``turn_started`` while a turn is open and one
    whose turn number is not above the previous turn's, inside an open numbered
    turn a record naming another turn or a ``turn_ended`` without the turn's number, and
    a ``prompt_rendered`` showing a working-memory revision or compression epoch the
    ledger has not reached once the refresh before it ran (the revision a runtime's prompt shows).
    So is a ``prompt_rendered`` recording a projection config other than the one the
    ledger is derived under (``state.config``; when ``state`` is omitted, the config the
    ledger's prompts record). ``progress`` is called with the number of input records
    folded so far; ``where(n)``
    names input record ``n`` in errors (default ``input record n``; the CLI passes the
    line of the file).
    """
    # Two streaming reads rather than one held in memory: the config comes before the fold.
    folded = state if state is not None else state_after(ledger.read(), projection_config_of(ledger.read()))
    next_seq = ledger.head()[0] + 1
    if folded.seq != next_seq - 1:
        raise UsageError(
            f"append_evidence: the state is folded to seq {folded.seq} "
            f"but the ledger's head is seq {next_seq - 1}"
        )
    out: list[r.Record] = []
    numbers: dict[int, int] = {}  # seq -> the input record's number, for the ledger's errors

    def put(record: r.Record, number: int | None = None) -> None:
        nonlocal folded
        stored = msgspec.structs.replace(record, seq=next_seq + len(out))
        folded = apply(folded, stored)
        if number is not None:
            numbers[stored.seq] = number
        out.append(stored)

    # A writer that died after a turn_ended owes its refresh, or the rest of it.
    for derived in owed_refresh(folded):
        put(derived)
    tail_ts = _tail_ts(ledger)
    for number, record in enumerate(records, 1):
        if isinstance(record.body, r.PromptRendered):
            # The refresh the runtime runs before it renders comes first: the prompt shows the
            # revision that refresh reached (checked against the state before it, the prompt of
            # a turn whose evidence superseded working memory was refused though the runtime
            # wrote it). Were the prompt refused, nothing is written.
            for derived in refresh_before_prompt(folded, ts=out[-1].ts if out else tail_ts):
                put(derived)
        named = where(number) if where is not None else f"input record {number}"
        _check_evidence(record, folded, out[-1].ts if out else tail_ts, named)
        _check_blob_ref(record, ledger, named)
        put(record, number)
        if isinstance(record.body, r.TurnEnded):
            for derived in post_turn_refresh(folded):
                put(derived)
        if progress is not None:
            progress(number)
    if not out:
        return []
    try:
        return ledger.append_many(out)
    except InvalidRecord as exc:
        # Refused before the first byte is written (a record that does not encode, or is too
        # large): named as the input's record, not by the seq it would have had.
        raise _named_input(exc, numbers, where) from None


# --------------------------------------------------------------------------- continuing an import


class ImportedPrefix(NamedTuple):
    """The first ``held`` records of an import that a ledger ends with (:func:`imported_prefix`)."""

    #: How many of the import's records the ledger holds (all of them: the import is complete).
    held: int
    #: The seq of the first of them.
    first_seq: int
    #: Every record of the import as it was placed there (``placed_at(first_seq)``).
    records: tuple[r.Record, ...]


def _same_body(stored: r.Body, given: r.Body) -> bool:
    """Whether a body read from a ledger holds what ``given`` holds, an output moved to a blob included."""
    if stored == given:
        return True
    if not isinstance(stored, r.ToolResult | r.TaskResult) or type(given) is not type(stored):
        return False
    assert isinstance(given, r.ToolResult | r.TaskResult)
    ref = stored.blob
    if ref is None or given.blob is not None or stored.output:
        return False
    try:
        data = given.output.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return (
        len(data) == ref.size
        and blob_hash(data) == ref.hash
        and msgspec.structs.replace(stored, output=given.output, blob=None) == given
    )


def imported_prefix(
    ledger: Ledger,
    records: Sequence[r.Record],
    placed_at: Callable[[int], Sequence[r.Record]],
) -> ImportedPrefix | None:
    """How much of an import of ``records`` the ledger ends with, if it ends with any of it.

    An import appends ``records`` placed where it starts: ``placed_at(seq)`` gives them as an
    import whose first record gets ``seq`` places them (a transcript's synthetic clock and
    turn numbers continue the ledger before it; the same records, shifted). One cut short (a
    full disk, a kill) left the ledger ending with its first records and the derived records
    among them; one that completed, with all of them. Either is found by content: the
    ledger's last evidence records (derived ones are the refresh's, and skipped) are
    ``records[:n]`` for the largest such ``n``, each record's kind, turn and body equal (an
    output the ledger moved to its blob store compared by its bytes' hash) and its ``ts`` and
    ``turn`` shifted alike; and, placed at the seq the first of them has, the import gives
    exactly those records, ``ts`` and ``turn`` included. Anything else — a ledger that ends
    with other records, or with these under another placement — is no such import: None.

    Deterministic (the ledger and ``records`` decide), and read from the head backwards:
    a ledger whose last evidence record is no record of the import is told so at once.
    """
    head = ledger.head()[0]
    if head < 0 or not records:
        return None
    tail: list[r.Record] = []  # the ledger's evidence records, newest first, read as needed
    cursor = head

    def back(i: int) -> r.Record | None:
        """The ledger's ``i``-th evidence record from the end (0: its last), or None."""
        nonlocal cursor
        while len(tail) <= i:
            if cursor < 0:
                return None
            record = ledger.get(cursor)
            cursor -= 1
            if record.kind not in r.DERIVED_KINDS:
                tail.append(record)
        return tail[i]

    def alike(held: r.Record, anchor: r.Record, given: r.Record, given_anchor: r.Record) -> bool:
        """``held`` is ``given`` shifted as ``anchor`` is from ``given_anchor`` (ts, turn), same body."""
        if held.kind != given.kind or held.ts - anchor.ts != given.ts - given_anchor.ts:
            return False
        if (held.turn is None) != (given.turn is None):
            return False
        # Turns shift alike (whether an anchor has one was checked with the anchors themselves).
        if (
            held.turn is not None
            and given.turn is not None
            and anchor.turn is not None
            and given_anchor.turn is not None
            and held.turn - anchor.turn != given.turn - given_anchor.turn
        ):
            return False
        return _same_body(held.body, given.body)

    last = back(0)
    if last is None:  # derived records alone: no import's
        return None
    for end in range(len(records) - 1, -1, -1):  # the ledger's last evidence record is records[end]
        if not alike(last, last, records[end], records[end]):
            continue
        matched = True
        for i in range(1, end + 1):
            held = back(i)
            if held is None or not alike(held, last, records[end - i], records[end]):
                matched = False
                break
        if not matched:
            continue
        first = back(end)
        assert first is not None
        placed = tuple(placed_at(first.seq))
        if len(placed) == len(records) and all(
            (held := back(end - i)) is not None
            and held.kind == placed[i].kind
            and held.ts == placed[i].ts
            and held.turn == placed[i].turn
            and _same_body(held.body, placed[i].body)
            for i in range(end + 1)
        ):
            return ImportedPrefix(held=end + 1, first_seq=first.seq, records=placed)
    return None
