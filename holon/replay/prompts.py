"""Past and next prompts re-rendered from a ledger, and every recorded prompt checked against its hash.

**One prompt** (``holon render``, ``explain``): :func:`prompt_at` / :func:`prompt_of` re-render
a past turn's prompt from the ledger up to its ``PromptRendered`` record with the recorded
budget and config (so its hash can be checked); :func:`next_prompt` / :func:`next_prompt_of`
render the prompt for the next model call. :func:`config_from_recorded` decodes a recorded
``render_config``, :func:`version_changes` says why one may not reproduce here.

**Every prompt** (``holon prompts``): ``holon render --at-turn N`` re-renders one past
prompt and checks its hash; :func:`check_prompts` / :func:`check_prompts_of` do it for every
``prompt_rendered`` record of a ledger in one fold, which answers two questions a daemon's
operator asks of a whole run:

- **Does every prompt still reproduce?** Invariant 1 of the design — same ledger bytes,
  same prompt bytes — checked over the run, not one turn: after an upgrade, on a
  ledger copied from another machine, in a golden test. A prompt recorded by another
  renderer or estimator version is *not comparable* (named, not failed); one recorded
  without a ``render_config`` cannot be re-rendered at all (its budget is unknown).
- **Where did the cacheable prefix break?** For each prompt, the prefix it shares with
  the previous recorded prompt (whole lines, in estimated tokens), the section where the
  two first differ, and what changed between them (working-memory revision,
  compression epoch, cache key, budget). A provider can read at most that prefix from
  its cache, so the tokens not shared, summed by section and by whether the prompt opened
  its turn, say what costs cache writes — the same split as the evaluation's "where
  holon's cacheable prefix breaks" (docs/evaluation.md), here for a real ledger.

:func:`check_prompts_of` reads a ledger in passes (a first for the projection config, then
one fold) and holds two prompts at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Literal

import msgspec

import holon.records as r
from holon.context.budget import DEFAULT_BUDGET, Budget
from holon.context.estimator import get_estimator
from holon.context.evidence import EvidenceBuffer, EvidenceView, PendingView
from holon.context.prompt import Prompt
from holon.context.render import RENDER_VERSION, RenderConfig, build_context
from holon.context.search import EpisodeIndex
from holon.errors import InvalidRecord, UsageError
from holon.projections import ProjectionConfig, ProjectionState, apply, initial_state, refresh_before_prompt
from holon.replay.config import ConfigScan, projection_config_of
from holon.replay.reading import Reader, first_pass, fold_first, fold_seeing, records_by_scan
from holon.replay.resume import Checkpoints, Resume, from_checkpoint, older_of
from holon.replay.turns import TurnScan

__all__ = [
    "APPENDED",
    "PromptAt",
    "PromptCheck",
    "PromptStatus",
    "PromptsSummary",
    "RenderOverrides",
    "check_prompts",
    "check_prompts_of",
    "config_from_recorded",
    "next_prompt",
    "next_prompt_of",
    "prompt_at",
    "prompt_of",
    "shared_prefix",
    "version_changes",
]


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

    older = older if older is not None else older_of(resume, read)
    resumed = from_checkpoint(resume, projection, settings=True)
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
    scan = ConfigScan() if projection is None else None
    seen = first_pass(read, scan, None)

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
    older = older if older is not None else older_of(None, read)
    scan = ConfigScan() if projection is None else None
    turns = TurnScan(turn)
    seen = first_pass(read, scan, turns)
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
            lambda: fold_first(read, turns.input_end, folded_under, blobs, older),
            agent_id=agent_id,
            overrides=overrides,
        )
        return msgspec.structs.replace(found, turn=turn)
    if call > len(turns.prompts):
        raise UsageError(f"turn {turn} recorded {len(turns.prompts)} prompt(s); there is no call {call}")
    index, record = turns.prompts[call - 1]
    recorded = record.body
    assert isinstance(recorded, r.PromptRendered)
    state, evidence = fold_first(read, index, projection, blobs, older)
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


# --------------------------------------------------------------------------- checking every prompt

#: What a recorded prompt is, rendered again: ``reproduced`` (same hash), ``differs`` (the
#: same renderer and estimator versions give other bytes: a failure), ``not_comparable``
#: (recorded by another renderer or estimator version, or with an estimator not available
#: here) or ``unconfigured`` (recorded without a ``render_config``: not re-rendered).
PromptStatus = Literal["reproduced", "differs", "not_comparable", "unconfigured"]

#: The break "section" of a prompt that only added text to the previous one.
APPENDED: Final = "(appended)"


class PromptCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded prompt, rendered again from the records before it.

    ``call`` counts the turn's recorded prompts from 1 (``holon render --at-turn T --call K``).
    ``tokens`` is the re-rendered prompt's estimate; ``shared`` the tokens of the whole
    lines it shares with the previous re-rendered prompt, ``breaks_at`` the section where
    the two first differ (:data:`APPENDED` when this prompt only added text) and
    ``changed`` what differs in their cache identities and budgets. All three are ``None``
    / empty for the first prompt and for a prompt after one that was not re-rendered.
    ``first_in_turn`` is true when the previous recorded prompt belongs to another turn.
    """

    seq: int
    turn: int | None
    call: int
    status: PromptStatus
    reasons: tuple[str, ...] = ()
    recorded_hash: str
    rendered_hash: str | None = None
    tokens: int | None = None
    shared: int | None = None
    breaks_at: str | None = None
    changed: tuple[str, ...] = ()
    first_in_turn: bool = True


class PromptsSummary(msgspec.Struct, kw_only=True):
    """Totals over the prompts checked (:meth:`add` one :class:`PromptCheck` at a time).

    ``reasons`` counts why prompts were not comparable or not rendered again (a ledger
    written by an older holon has one reason on every prompt).

    ``unshared`` sums, per break section, the tokens of prompts not shared with the previous
    one — ``[at the turn's first prompt, later in the turn]`` — over ``compared`` prompts,
    whose tokens sum to ``compared_tokens``; ``shared_tokens`` is the rest of them.
    """

    prompts: int = 0
    by_status: dict[str, int] = msgspec.field(default_factory=dict)
    reasons: dict[str, int] = msgspec.field(default_factory=dict)
    first_difference: int | None = None
    compared: int = 0
    compared_tokens: int = 0
    shared_tokens: int = 0
    unshared: dict[str, list[int]] = msgspec.field(default_factory=dict)

    def add(self, check: PromptCheck) -> None:
        """Count ``check``."""
        self.prompts += 1
        self.by_status[check.status] = self.by_status.get(check.status, 0) + 1
        if check.status in ("not_comparable", "unconfigured"):
            for reason in check.reasons:
                self.reasons[reason] = self.reasons.get(reason, 0) + 1
        if check.status == "differs" and self.first_difference is None:
            self.first_difference = check.seq
        if check.shared is None or check.tokens is None or check.breaks_at is None:
            return
        self.compared += 1
        self.compared_tokens += check.tokens
        self.shared_tokens += check.shared
        tally = self.unshared.setdefault(check.breaks_at, [0, 0])
        tally[0 if check.first_in_turn else 1] += check.tokens - check.shared

    @property
    def shared_share(self) -> float | None:
        """Share of the compared prompts' tokens shared with the previous prompt (``None``: none compared)."""
        return self.shared_tokens / self.compared_tokens if self.compared_tokens else None


def shared_prefix(previous: Prompt, current: Prompt) -> tuple[int, str]:
    """Tokens of the whole lines ``current`` shares with ``previous``, and where they first differ.

    Sections equal in name and text count their tokens and the separator before them
    (one token, as the budget counts it); in the first section that differs, the lines
    both start with are counted with ``current``'s estimator. Whole lines, because a
    provider's cache reads whole tokens (and Anthropic whole content blocks), so a shared
    half-word is not a shared token. The section is ``current``'s (the previous one's when
    ``current`` has fewer), or :data:`APPENDED` when ``previous`` is all of ``current``'s start.
    """
    shared = 0
    for index, section in enumerate(current.sections):
        before = previous.sections[index] if index < len(previous.sections) else None
        join = 1 if index else 0
        if before is not None and before.name == section.name and before.text == section.text:
            shared += join + section.tokens
            continue
        if before is None:
            return shared, APPENDED
        common = before.text[: _common_length(before.text, section.text)]
        if before.name == section.name and common == before.text and index == len(previous.sections) - 1:
            place = APPENDED  # the previous prompt ended in this section, and this one only went on
        else:
            place = section.name
        lines = (
            common if _line_end(before.text, section.text, len(common)) else common[: common.rfind("\n") + 1]
        )
        counted = get_estimator(current.estimator).count(lines) if lines else 0
        return shared + join + counted if lines else shared, place
    if len(previous.sections) > len(current.sections):
        return shared, previous.sections[len(current.sections)].name
    return shared, APPENDED


def _line_end(a: str, b: str, at: int) -> bool:
    """True when ``at`` ends a line in both texts: a line break follows, or the text ends there."""
    return all(at == len(text) or text[at] == "\n" for text in (a, b))


def _common_length(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (halving, with C-speed slice compares)."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while high - low > 1:  # a[:low] == b[:low] and a[:high] != b[:high]
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


def _identity_changes(previous: Prompt, current: Prompt) -> tuple[str, ...]:
    """What differs between two prompts' cache identities and budgets, named for a reader."""
    before, now = previous.identity, current.identity
    changes: list[str] = []
    if before.working_memory_revision != now.working_memory_revision:
        changes.append(f"revision {before.working_memory_revision}→{now.working_memory_revision}")
    if before.compression_epoch != now.compression_epoch:
        changes.append(f"epoch {before.compression_epoch}→{now.compression_epoch}")
    if before.prompt_cache_key != now.prompt_cache_key:
        changes.append(f"cache key {before.prompt_cache_key!r}→{now.prompt_cache_key!r}")
    if previous.plan.budget != current.plan.budget:
        changes.append(f"budget {previous.plan.budget:,}→{current.plan.budget:,}")
    if previous.estimator != current.estimator:
        changes.append(f"estimator {previous.estimator}→{current.estimator}")
    return tuple(changes)


class _Checker:
    """Renders each recorded prompt from the state before it and compares it with the last one."""

    def __init__(self, agent_id: str, from_turn: int | None, until_turn: int | None) -> None:
        self.agent_id = agent_id
        self.from_turn = from_turn
        self.until_turn = until_turn
        self.previous: tuple[int | None, Prompt | None] | None = None  # turn and prompt of the last one
        self.calls: tuple[int | None, int] = (None, 0)

    def wanted(self, turn: int | None) -> bool:
        if turn is None:
            return self.from_turn is None and self.until_turn is None
        return (self.from_turn is None or turn >= self.from_turn) and (
            self.until_turn is None or turn <= self.until_turn
        )

    def check(
        self, state: ProjectionState, record: r.Record, body: r.PromptRendered, evidence: EvidenceView
    ) -> PromptCheck:
        turn = record.turn
        call = self.calls[1] + 1 if self.calls[0] == turn else 1
        self.calls = (turn, call)
        first = self.previous is None or self.previous[0] != turn
        head = PromptCheck(
            seq=record.seq,
            turn=turn,
            call=call,
            status="unconfigured",
            recorded_hash=body.prompt_hash,
            first_in_turn=first,
        )
        if not body.render_config:
            self.previous = (turn, None)
            return msgspec.structs.replace(
                head, reasons=("recorded without a render_config: its budget and config are unknown",)
            )
        budget, config = config_from_recorded(body.render_config, where=f"seq {record.seq}")
        reasons = version_changes(body.render_config)
        try:
            get_estimator(config.estimator)
        except ValueError:  # named in ``reasons``: a tokenizer extra missing here, or a newer holon's
            self.previous = (turn, None)
            return msgspec.structs.replace(head, status="not_comparable", reasons=reasons)
        prompt = build_context(state, budget, config, agent_id=self.agent_id, history=evidence)
        rendered = prompt.prompt_hash
        status: PromptStatus = "reproduced" if rendered == body.prompt_hash else "differs"
        if status == "differs" and reasons:
            status = "not_comparable"
        shared: int | None = None
        place: str | None = None
        changed: tuple[str, ...] = ()
        if self.previous is not None and self.previous[1] is not None:
            shared, place = shared_prefix(self.previous[1], prompt)
            changed = _identity_changes(self.previous[1], prompt)
        self.previous = (turn, prompt)
        return msgspec.structs.replace(
            head,
            status=status,
            reasons=reasons if status != "reproduced" else (),
            rendered_hash=rendered,
            tokens=prompt.plan.total_tokens,
            shared=shared,
            breaks_at=place,
            changed=changed,
        )


def check_prompts_of(
    read: Reader,
    *,
    agent_id: str,
    projection: ProjectionConfig | None = None,
    from_turn: int | None = None,
    until_turn: int | None = None,
    blobs: Callable[[str], bytes] | None = None,
    older: Callable[[int, int], Iterable[r.Record]] | None = None,
) -> Iterator[PromptCheck]:
    """:func:`check_prompts` of the records ``read()`` gives, read in passes rather than held.

    ``blobs`` reads a blob's bytes (the ledger's ``get_blob``), so a history shows the outputs
    stored there as the agent's prompts did; ``older(from_seq, to_seq)`` reads records by seq
    (the ledger's ``read``) for a history reaching back past the evidence the fold keeps
    (by default ``read()`` is scanned for them).

    A first pass learns the projection config the ledger's prompts record (unless
    ``projection`` is given) and, when ``from_turn`` or ``until_turn`` is given, the
    ledger's first and last turn; the second folds and renders. A range that selects no
    turn of the ledger (``from_turn`` after its last turn, ``until_turn`` before its first,
    ``from_turn`` after ``until_turn``, any range in a ledger of no turns) is a UsageError
    naming the turns it holds: a mistyped number would otherwise read as "nothing to
    check". Raised here, by the call, before the first check is yielded: a caller that
    prints as it iterates has printed nothing yet.
    """
    if from_turn is not None and until_turn is not None and from_turn > until_turn:
        raise UsageError(f"--from-turn {from_turn} is after --until-turn {until_turn}: nothing to check")
    ranged = from_turn is not None or until_turn is not None
    # The lowest and highest turn the ledger's turn_started records name, when a range is checked.
    held: list[int] = []

    def turns_seen() -> Iterator[r.Record]:
        for record in read():
            turn = record.turn
            if turn is not None and type(record.body) is r.TurnStarted:
                held[:] = [min(held[0], turn), max(held[1], turn)] if held else [turn, turn]
            yield record

    if projection is not None and not ranged:
        config = projection
    else:
        records = turns_seen() if ranged else read()
        if projection is None:
            config = projection_config_of(records)
        else:
            config = projection
            for _ in records:
                pass
    if ranged:
        _check_range(from_turn, until_turn, (held[0], held[1]) if held else None)
    if older is None:
        older = records_by_scan(read)
    return _checks(
        read, _Checker(agent_id, from_turn, until_turn), config, until_turn, blobs=blobs, older=older
    )


def _check_range(from_turn: int | None, until_turn: int | None, held: tuple[int, int] | None) -> None:
    """Refuse a turn range that selects none of the turns ``held`` (the first and last; ``None``: none)."""
    named = (("from-turn", from_turn), ("until-turn", until_turn))
    asked = " ".join(f"--{name} {turn}" for name, turn in named if turn is not None)
    if held is None:
        raise UsageError(f"{asked}: this ledger has no turns yet, so no prompt of a turn to check")
    first, last = held
    if from_turn is not None and from_turn > last:
        raise UsageError(
            f"--from-turn {from_turn} is after the ledger's last turn: it holds turns {first}..{last}; "
            "nothing to check"
        )
    if until_turn is not None and until_turn < first:
        raise UsageError(
            f"--until-turn {until_turn} is before the ledger's first turn: it holds turns {first}..{last}; "
            "nothing to check"
        )


#: Evidence the check keeps in memory for the histories it renders again (older records
#: are read back by range), so its memory stays flat however long the ledger.
_CHECK_CHARS: Final = 1 << 20


def _checks(
    read: Reader,
    checker: _Checker,
    config: ProjectionConfig,
    until_turn: int | None,
    *,
    blobs: Callable[[str], bytes] | None,
    older: Callable[[int, int], Iterable[r.Record]],
) -> Iterator[PromptCheck]:
    """The fold of :func:`check_prompts_of`: each wanted prompt, rendered again and checked."""
    state = initial_state(config)
    # The evidence the histories are read from, as the agent kept it (each render reads only
    # the records before its own position).
    evidence = EvidenceBuffer(blob=blobs, older=older, max_chars=_CHECK_CHARS)
    # The newest prompt before the range, with the state it renders from: rendered when the
    # range's first prompt comes, so that one is compared with what came before it as well.
    before: tuple[ProjectionState, r.Record, r.PromptRendered] | None = None
    for record in read():
        body = record.body
        if isinstance(body, r.PromptRendered):
            if checker.wanted(record.turn):
                if before is not None:
                    checker.check(*before, evidence)
                    before = None
                yield checker.check(state, record, body, evidence)
            elif checker.previous is None:
                before = (state, record, body)
            elif until_turn is not None and record.turn is not None and record.turn > until_turn:
                return
        state = apply(state, record)
        evidence.add(record)


def check_prompts(
    records: Sequence[r.Record],
    *,
    agent_id: str,
    projection: ProjectionConfig | None = None,
    from_turn: int | None = None,
    until_turn: int | None = None,
) -> Iterator[PromptCheck]:
    """Every recorded prompt of ``records`` (from seq 0, in order), rendered again and checked.

    Each ``prompt_rendered`` record is rendered from the state the records before it fold
    to, with the budget and render config it records — exactly as ``holon render
    --at-turn`` renders one — and yields a :class:`PromptCheck`; feed them to a
    :class:`PromptsSummary` for totals. ``from_turn`` / ``until_turn`` limit the prompts
    checked (the fold still starts at seq 0). Folded under ``projection``, or (by default)
    the projection config the records' prompts record.
    """
    return check_prompts_of(
        lambda: records, agent_id=agent_id, projection=projection, from_turn=from_turn, until_turn=until_turn
    )
