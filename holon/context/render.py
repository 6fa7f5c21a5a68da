"""`build_context`: the pure, budgeted renderer from projection state to a prompt.

Algorithm (docs/context-rendering.md has the long form):

1. ``available = context_window - output_reserve`` (the output reserve comes off first),
   minus one token per section separator.
2. The current input is reserved next (in full, with the other pinned TurnScoped
   sections at their minimum); the cacheable prefix (Stable + AgentScoped: system, tools,
   working memory or the legacy summary, selected episodes) is planned on its own share
   of ``available`` — less only when the reserved room would not fit beside it — so its
   form depends on this turn only when the input is exceptionally long.
3. The TurnScoped sections are planned in what is left: current input, active work +
   plan and pending delta get their minimum first (pinned), then everything is admitted
   by priority, full → compact → truncated → omitted.
4. If the TurnScoped pinned minimum does not fit beside the prefix, the whole prompt is
   planned jointly (``plan.degraded``); if even all pinned minimums together do not fit,
   :class:`~holon.errors.BudgetExceeded` is raised with the numbers.
5. Recent history fills the remainder: it starts where the previous prompt's history
   started and grows at its end, and moves (clearing old tool results, starting later)
   only when it must — see :mod:`holon.context.history`.
6. With an estimator whose counts do not add up over joins (exact BPE), the assembled
   prompt is counted whole and, while it is over the budget, planned again in a room
   smaller by the excess.

Episode selection is recomputed only when the working-memory revision or the
compression epoch moved (or the render config changed) since the previous
``PromptRendered``; otherwise the previous selection is reused, so the prefix stays
byte-identical while the recent window slides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import blake3
import msgspec

import holon.records as r
from holon.context.budget import Budget, Candidate, Form, plan_budget
from holon.context.episodes import select_episodes, sticky_selection
from holon.context.estimator import get_estimator
from holon.context.evidence import EvidenceView, window_view
from holon.context.history import HistoryPlan, HistoryRules, UnitsMemo, plan_history
from holon.context.inputs import ContextInputs, inputs_from_state
from holon.context.prompt import AssemblyPlan, CacheIdentity, Prompt, PromptSection
from holon.context.recall import Recall, recalled_form
from holon.context.recorded import projection_stated, recorded_projection
from holon.context.refs import ledger_ref
from holon.context.search import EpisodeIndex
from holon.context.sections import (
    SECTION_ORDER,
    Counter,
    Layout,
    active_work_candidate,
    context_summary_candidate,
    current_input_candidate,
    episodes_candidate,
    mandate_candidate,
    pending_delta_candidate,
    queue_candidate,
    section_order,
    section_stability,
    system_candidate,
    tools_candidate,
    working_memory_candidate,
)
from holon.errors import BudgetExceeded
from holon.projections import DEFAULT_CONFIG, ProjectionConfig, ProjectionState, task_job
from holon.projections.config import describe_projection

__all__ = [
    "RENDER_VERSION",
    "RenderConfig",
    "build_context",
    "clear_count_cache",
    "describe_projection",
    "projection_stated",
    "recorded_projection",
    "select_episodes",
    "token_counter",
]

#: Version of the rendered text format. Bump it when the same inputs would render
#: different bytes, so a recorded prompt names the renderer that can reproduce it.
RENDER_VERSION: Final = 16


# Token counts by estimator, memoized across calls: consecutive turns render mostly the
# same history items and sections. A count is a pure function of the text, so the
# cache changes speed only, never the bytes.
_COUNT_CACHE_SIZE: Final = 4096
# Longer texts are counted each time rather than kept alive by the cache.
_MEMO_CHARS: Final = 1 << 20
# The most characters a memo keeps as keys, all texts together. By count alone, a daemon
# whose tool outputs run to hundreds of KB kept thousands of them alive (one 500 KB output
# per turn: 136 Mi characters after 300 turns; 4096 texts of up to 1 Mi each could hold
# 4 Gi). 16 Mi still holds several renders' worth of a 200k-token window's texts.
_MEMO_TOTAL_CHARS: Final = 1 << 24
_COUNTS: dict[tuple[str, str], dict[str, int]] = {}
# Characters of the texts each memo of _COUNTS holds, by the same key.
_MEMO_HELD: dict[tuple[str, str], int] = {}


def clear_count_cache() -> None:
    """Forget memoized token counts (benchmarks use it to measure a cold render)."""
    # Emptied in place: a counter made before this call keeps its memo, whose size
    # _MEMO_HELD must go on stating.
    for memo in _COUNTS.values():
        memo.clear()
    _MEMO_HELD.clear()


def token_counter(estimator_name: str) -> Callable[[str], int]:
    """The named estimator's ``count``, memoized across renders (and with the runtime's rounds)."""
    estimator = get_estimator(estimator_name)
    key = (estimator.name, estimator.version)
    memo = _COUNTS.setdefault(key, {})

    def count(text: str) -> int:
        if len(text) > _MEMO_CHARS:
            # Kept as a key, a 50 MB tool output stayed alive for the next 4096 counts.
            return estimator.count(text)
        n = memo.get(text)
        if n is None:
            n = estimator.count(text)
            held = _MEMO_HELD.get(key, 0) + len(text)
            while memo and (len(memo) >= _COUNT_CACHE_SIZE or held > _MEMO_TOTAL_CHARS):
                # Oldest first (dicts keep insertion order): consecutive turns share
                # most texts, so the recent ones are the ones worth keeping.
                oldest = next(iter(memo))
                held -= len(oldest)
                del memo[oldest]
            memo[text] = n
            _MEMO_HELD[key] = held
        return n

    return count


class RenderConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every knob that changes the rendered bytes; recorded in ``PromptRendered.render_config``.

    - ``estimator``: token estimator name (its version is recorded next to it).
    - ``prompt_cache_key``: the caller's cache namespace (part of the cache identity).
    - The recent history is filled by tokens and moves only when it no longer fits its
      room (docs/context-rendering.md, *Recent history*). A move frees at least
      ``clear_at_least`` tokens and at least ``1 - history_refill`` of the room (the rest
      of the room is what the history grows into before the next move; each move
      rewrites the provider's cache from where the history changed). It caps the history's
      units (``tool_result_max_tokens`` shows a larger result as its preview;
      ``message_max_tokens`` cuts longer messages and arguments), then clears tool
      results oldest first — never one of the newest ``keep_tool_results`` (K), one of
      the ``protected_tools`` (Anthropic's ``exclude_tools``), or one its placeholder
      would not shorten —, then starts the history later. ``message_max_tokens`` also
      bounds the current input's minimum.
    - ``preview_chars``: head kept of a truncated item.
    - ``episode_limit``: most episodes selected; ``max_postings``: postings a selection
      reads, all query terms together (rarest first), and how many of the newest
      episodes it looks at for structural matches (keeps selection flat as the archive
      grows).
    - ``rounds_reserve``: a history that is not sent whole leaves the turn's rounds, which
      come after the prompt, as much room as the newest finished turn took, up to this
      share of the available tokens. Without it the history filled the budget, the first
      large round no longer fitted, and the prompt was rendered again within the turn,
      re-sending everything after the history's start (docs/context-rendering.md,
      *Recent history*, has the figures that chose 0.3).
    - ``mandate_share``: the share of the room the operator's requests may take (their
      section's sub-budget); beyond it they are shown shortened, each naming its record.
    - ``recall_share``: the most of the room the recalled section may take — older
      evidence the current input's words match, from the ``recall_window`` seqs before
      the history's start, in room the history left (:mod:`holon.context.recall`; 0
      turns it off).
    - ``layout``: the order of the sections (:data:`~holon.context.sections.LAYOUTS`):
      ``"recitation"`` (the default) puts working memory after the history, with
      everything that changes with the revision or the turn; ``"rfc"`` puts it before,
      in the cacheable prefix (docs/context-rendering.md, *Layouts*, has the figures
      that chose the default).
    """

    estimator: str = "holon-heuristic"
    prompt_cache_key: str = "default"
    keep_tool_results: int = 4
    tool_result_max_tokens: int = 2000
    clear_at_least: int = 1500
    protected_tools: tuple[str, ...] = ()
    message_max_tokens: int = 2000
    preview_chars: int = 300
    episode_limit: int = 6
    max_postings: int = 256
    history_refill: float = 0.5
    rounds_reserve: float = 0.3
    mandate_share: float = 0.2
    recall_share: float = 0.1
    recall_window: int = 4096
    layout: Layout = "recitation"
    version: int = RENDER_VERSION

    def __post_init__(self) -> None:
        for name in ("keep_tool_results", "clear_at_least", "preview_chars", "max_postings", "recall_window"):
            if getattr(self, name) < 0:
                raise ValueError(f"RenderConfig.{name} must not be negative")
        if self.tool_result_max_tokens < 1 or self.message_max_tokens < 1 or self.episode_limit < 0:
            raise ValueError("RenderConfig: token caps must be positive and episode_limit non-negative")
        if not 0.0 < self.history_refill <= 1.0:
            raise ValueError(f"RenderConfig.history_refill must be in (0, 1], got {self.history_refill}")
        if not 0.0 <= self.rounds_reserve < 1.0:
            raise ValueError(f"RenderConfig.rounds_reserve must be in [0, 1), got {self.rounds_reserve}")
        if not 0.0 < self.mandate_share <= 1.0:
            raise ValueError(f"RenderConfig.mandate_share must be in (0, 1], got {self.mandate_share}")
        if not 0.0 <= self.recall_share < 1.0:
            raise ValueError(f"RenderConfig.recall_share must be in [0, 1), got {self.recall_share}")

    @property
    def history_rules(self) -> HistoryRules:
        """The knobs the recent history depends on."""
        return HistoryRules(
            keep_tool_results=self.keep_tool_results,
            tool_result_max_tokens=self.tool_result_max_tokens,
            clear_at_least=self.clear_at_least,
            protected_tools=frozenset(self.protected_tools),
            message_max_tokens=self.message_max_tokens,
            preview_chars=self.preview_chars,
            history_refill=self.history_refill,
        )


def _recorded_config(
    config: RenderConfig, budget: Budget, estimator_version: str, projection: ProjectionConfig
) -> dict[str, Any]:
    recorded: dict[str, Any] = msgspec.to_builtins(config)
    recorded["estimator_version"] = estimator_version
    recorded["budget"] = msgspec.to_builtins(budget)
    if projection != DEFAULT_CONFIG:
        # The derived records (deltas, episodes) depend on it: replay must fold the ledger
        # under it to re-derive them. Absent for the default, so ledgers and prompts
        # written before it was recorded keep the same bytes.
        recorded["projection"] = msgspec.to_builtins(projection)
    # In the form a PromptRendered read back from a ledger holds (tuples decode as
    # lists): the sticky episode selection compares it with the previous record's
    # render_config, and ``() != []`` would make selection never sticky after a replay.
    normalized: dict[str, Any] = _CONFIG_DECODER.decode(_CONFIG_ENCODER.encode(recorded))
    return normalized


_CONFIG_ENCODER: Final = msgspec.msgpack.Encoder()
_CONFIG_DECODER: Final = msgspec.msgpack.Decoder(dict[str, Any])


def _history_moved(inputs: ContextInputs, prompt: Prompt) -> bool:
    """Whether ``prompt``'s history starts elsewhere than the previous prompt's did."""
    prev = inputs.previous
    before = prev.history.from_seq if prev is not None and prev.history is not None else None
    now = prompt.plan.history.from_seq if prompt.plan.history is not None else None
    return before != now


def _start_left_the_view(inputs: ContextInputs, view: EvidenceView) -> bool:
    """Whether the previous prompt's history starts before the evidence ``view`` holds.

    The history then cannot keep that start (:func:`~holon.context.history.plan_history`
    keeps one only within the view): whatever room it gets, it starts at or after the
    view's first seq, or is not shown, so it moves (:func:`_history_moved`). That is a
    render from the inputs' own windows (the default view) once they have slid past
    where the previous history started.
    """
    prev = inputs.previous
    return prev is not None and prev.history is not None and prev.history.from_seq < view.first_seq


def _yielded(candidate: Candidate) -> Form:
    """The omitted form of a confirmed delta that gave its room to the history."""
    reason = "working-memory delta already shown; its room went to the history"
    omissions = tuple(msgspec.structs.replace(o, reason=reason) for o in candidate.contents)
    return Form(kind="omitted", text="", tokens=0, omissions=omissions)


def _section(name: str, form: Form, layout: Layout) -> PromptSection:
    return PromptSection(
        name=name,
        stability=section_stability(name, layout),
        text=form.text,
        tokens=form.tokens,
        form=form.kind,
        cuts=form.cuts,
        calls=form.calls,
    )


class _Render(msgspec.Struct, frozen=True, kw_only=True):
    """What every planning pass of one :func:`build_context` call shares, made once per call."""

    inputs: ContextInputs
    budget: Budget
    config: RenderConfig
    count: Counter
    recorded: dict[str, Any]
    #: Where every history planned below is read (one of the inputs' own windows is made
    #: once, not once per plan).
    view: EvidenceView
    #: The room the prefix's share is of: the first pass's, whatever a refit takes off it.
    share_of: int
    #: Every pass reads the same evidence: its units are read and counted once.
    units: UnitsMemo
    #: The turn sections but the mandate, the current input last.
    fixed_turn: list[Candidate]
    mandate_budget: int
    #: Where the previous prompt's history started, if it showed one.
    guess: int | None


def _inputs_of(
    source: ContextInputs | ProjectionState, agent_id: str | None, index: EpisodeIndex | None
) -> ContextInputs:
    if not isinstance(source, ProjectionState):
        return source
    if agent_id is None:
        raise ValueError("build_context: agent_id is required when rendering from a ProjectionState")
    return inputs_from_state(source, agent_id=agent_id, include_episodes=index is None)


def _room(budget: Budget) -> int:
    """The tokens the sections may take: the budget's, less one per separator between
    sections, reserved up front; raises BudgetExceeded when that leaves none."""
    available = budget.available - len(SECTION_ORDER)
    if available <= 0 and budget.context_window <= len(SECTION_ORDER):
        # No output reserve would help: do not tell the caller to lower it.
        raise BudgetExceeded(
            f"a context window of {budget.context_window:,} token{'' if budget.context_window == 1 else 's'} "
            "leaves no room for a prompt: the "
            f"{len(SECTION_ORDER)} section separators alone take {len(SECTION_ORDER)} tokens",
            available=0,
            required=1,
            fix="raise the context window",
        )
    if available <= 0:
        raise BudgetExceeded(
            f"the output reserve ({budget.output_reserve:,} tokens) leaves no room for a prompt in a context "
            f"window of {budget.context_window:,} tokens",
            available=max(available, 0),
            required=1,
            fix="lower the output reserve or raise the context window",
        )
    return available


class _Prefix:
    """The cacheable prefix's candidates (Stable + AgentScoped) for a selection of episodes.

    The sections before the episodes do not depend on the selection: made once, also when
    the episodes are selected again.
    """

    def __init__(self, inputs: ContextInputs, budget: Budget, count: Counter, index: EpisodeIndex) -> None:
        self._count = count
        self._index = index
        self._episode_budget = int(budget.available * budget.episode_share)
        # What each decision says now: the latest archived text, overridden by working memory.
        # Both change only with the epoch or the revision, so the prefix stays stable.
        self._decisions = index.decisions
        self._decisions.update((d.id, d.text) for d in inputs.snapshot.decisions)
        # Each job's newest result working memory shows, over the archive's newest run.
        self._live_runs = {
            task_job(t.description): t.id
            for t in inputs.snapshot.tasks
            if t.result_seq is not None and t.description
        }
        self._before_episodes = [
            c
            for c in (
                system_candidate(inputs.policy, count),
                tools_candidate(inputs.policy, count),
                working_memory_candidate(inputs, count),
                context_summary_candidate(inputs, count),
            )
            if c is not None
        ]

    def of(self, episodes: list[r.ContextEpisodeRecord]) -> list[Candidate]:
        shown = episodes_candidate(
            episodes, self._episode_budget, self._count, self._decisions, self._superseded_run
        )
        return self._before_episodes if shown is None else [*self._before_episodes, shown]

    def _superseded_run(self, task_id: str) -> bool:
        return self._index.superseded_run(task_id, self._live_runs)


def _turn_candidates(inputs: ContextInputs, count: Counter, config: RenderConfig) -> list[Candidate]:
    """The TurnScoped sections but the mandate (which depends on the history's start)."""
    return [
        c
        for c in (
            pending_delta_candidate(inputs, count),
            active_work_candidate(inputs, count),
            queue_candidate(inputs, count),
            current_input_candidate(inputs, count, max_tokens=config.message_max_tokens),
        )
        if c is not None
    ]


def _history_guess(inputs: ContextInputs) -> int | None:
    previous = inputs.previous
    if (
        previous is not None
        and previous.history is not None
        and any(t.section == "history" and t.form != "omitted" for t in previous.sections)
    ):
        return previous.history.from_seq
    return None


def _selection(
    inputs: ContextInputs,
    index: EpisodeIndex,
    config: RenderConfig,
    recorded: dict[str, Any],
    view: EvidenceView,
) -> tuple[list[r.ContextEpisodeRecord], bool]:
    """The episodes a render plans with first, and whether they are the previous prompt's."""
    sticky = sticky_selection(inputs, index, recorded)
    if sticky is not None and config.layout == "recitation" and _start_left_the_view(inputs, view):
        # The history moves whatever the room (below): selected anew now, as that move
        # would, rather than planned with the kept selection first and again with this one.
        sticky = None
    if sticky is None:
        return select_episodes(
            inputs, index, limit=config.episode_limit, max_postings=config.max_postings
        ), False
    return sticky, True


def build_context(
    source: ContextInputs | ProjectionState,
    budget: Budget,
    config: RenderConfig | None = None,
    *,
    agent_id: str | None = None,
    index: EpisodeIndex | None = None,
    history: EvidenceView | None = None,
) -> Prompt:
    """Render the prompt for the next model call.

    ``source`` is a :class:`ContextInputs` or a projection state (then ``agent_id`` is
    required). ``index``, when given, is the caller's incremental episode index and
    replaces ``inputs.episodes`` (so selection cost does not grow with the archive).
    ``history`` is the view of the ledger the recent history is read from (default: the
    state's own recent windows, which hold only the last few dozen items).
    Raises :class:`BudgetExceeded` when the pinned sections cannot fit.
    """
    config = config or RenderConfig()
    inputs = _inputs_of(source, agent_id, index)
    estimator = get_estimator(config.estimator)
    count = token_counter(config.estimator)
    recorded = _recorded_config(config, budget, estimator.version, inputs.projection)
    available = _room(budget)

    # -- prefix (Stable + AgentScoped)
    if index is None:
        index = EpisodeIndex(inputs.episodes)
    view = history if history is not None else window_view(inputs)
    selected, kept = _selection(inputs, index, config, recorded, view)
    prefix_of = _Prefix(inputs, budget, count, index)
    prefix = prefix_of.of(selected)
    render = _Render(
        inputs=inputs,
        budget=budget,
        config=config,
        count=count,
        recorded=recorded,
        view=view,
        share_of=available,
        units={},
        fixed_turn=_turn_candidates(inputs, count, config),
        mandate_budget=int(available * config.mandate_share),
        guess=_history_guess(inputs),
    )
    prompt = _planned(render, selected, prefix, available)
    if kept and config.layout == "recitation" and _history_moved(inputs, prompt):
        # The history moves its start: everything after the episodes is sent again anyway,
        # so they are selected again for this input (sticky, they would never change). The
        # same selection plans the same prompt: it is planned again only when it differs.
        fresh = select_episodes(inputs, index, limit=config.episode_limit, max_postings=config.max_postings)
        if [e.episode_id for e in fresh] != [e.episode_id for e in selected]:
            selected = fresh
            prefix = prefix_of.of(selected)
            prompt = _planned(render, selected, prefix, available)
    if estimator.joins_add_up:
        return prompt
    # An exact BPE can count the joined prompt higher than its parts (a run of line breaks
    # merges across a join): count the whole text, and while it is over, plan again in a
    # room smaller by the excess. Each pass takes at least one token off the room, so
    # this ends — at the latest when the pinned sections no longer fit and BudgetExceeded
    # is raised; in practice the second pass fits, since the excess is one token per
    # unlucky join. The prefix keeps the share of the first pass's room: the excess comes
    # off the turn sections and the history, so a refit (which depends on this turn's
    # history) never changes the cacheable prefix at an unchanged revision and epoch.
    while (exact := estimator.count(prompt.text)) > budget.available:
        available -= exact - budget.available
        prompt = _planned(render, selected, prefix, available)
    # The plan reports what the prompt costs, not the sum of its parts.
    return msgspec.structs.replace(prompt, plan=msgspec.structs.replace(prompt.plan, total_tokens=exact))


def _turn_with(render: _Render, before: int | None) -> list[Candidate]:
    """The turn sections, the mandate showing the requests before seq ``before``."""
    mandate = mandate_candidate(render.inputs, render.count, sub_budget=render.mandate_budget, before=before)
    fixed = render.fixed_turn
    return fixed if mandate is None else [*fixed[:-1], mandate, fixed[-1]]


def _planned(
    render: _Render, selected: list[r.ContextEpisodeRecord], prefix: list[Candidate], room: int
) -> Prompt:
    """The prompt in ``room`` tokens, its mandate and its history's start agreeing.

    The mandate shows the requests the history does not — those before its start —
    and the start depends on the room the mandate leaves. Planned from where the
    previous history started (it mostly still does: one pass), and again from where
    this one starts until the two agree. A history that starts later than assumed
    would hide the requests between, so that always plans again: the assumed start
    only grows, and ends. One that starts earlier only shows some requests twice:
    planned again once, to give their room back, then taken as it is. The pinned
    minimum is the one with no history (every request in the section): a pass over
    the budget with a history assumed is planned again without one, and that one
    raises, or is taken as it is — so BudgetExceeded names the same minimum whatever
    the previous prompt was.
    """
    before, lowered = render.guess, False
    turn = _turn_with(render, before)
    while True:
        try:
            prompt = _assemble(render, selected, prefix, turn, room)
        except BudgetExceeded:
            if before is None:
                raise
            before, lowered = None, True
            turn = _turn_with(render, before)
            continue
        shown = prompt.plan.history is not None and prompt.section("history") is not None
        now = prompt.plan.history.from_seq if shown and prompt.plan.history is not None else None
        if now == before:
            return prompt
        earlier = now is not None and (before is None or now < before)
        if earlier and lowered:
            return prompt
        lowered = lowered or earlier
        before = now
        following = _turn_with(render, before)
        if following == turn:
            # No request lies between the two starts: the next pass would plan this
            # same prompt, whose history starts where that pass assumes, and end.
            return prompt
        turn = following


def _pinned_over_budget(exc: BudgetExceeded, candidates: list[Candidate], budget: Budget) -> BudgetExceeded:
    """``exc`` with what the caller needs to fix it: each pinned section's smallest size,
    and how the room it was measured against comes from the caller's budget."""
    pinned = sorted(
        ((c.name, c.forms[-1].tokens) for c in candidates if c.pinned), key=lambda item: (-item[1], item[0])
    )
    sizes = ", ".join(f"{name} {tokens:,}" for name, tokens in pinned)
    largest = pinned[0][0] if pinned else "current_input"
    return BudgetExceeded(
        f"pinned sections over budget ({sizes} tokens at their smallest; the room is the budget's "
        f"{budget.available:,} tokens — a window of {budget.context_window:,} less an output reserve of "
        f"{budget.output_reserve:,} — less one token per section separator)",
        available=exc.available,
        required=exc.required,
        fix=(
            f"pinned sections need {exc.required} tokens but only {exc.available} are available; raise "
            f"the context window, lower the output reserve, or {_SHORTEN.get(largest, f'shorten {largest}')}"
        ),
    )


#: What the caller can shorten when a pinned section is the largest: the advice of a
#: BudgetExceeded names the section that takes the room, not always the current input.
_SHORTEN: Final = {
    "current_input": "shorten the current input (the largest pinned section)",
    "active_work": (
        "shorten the active work item (the largest pinned section: its objective, delivery target, "
        "scope constraints or this turn's decisions)"
    ),
    "working_memory": (
        "shorten working memory (the largest pinned section: the active work item's objective, scope "
        "constraints or plan steps)"
    ),
    "system": "shorten the system policy (the largest pinned section)",
    "tools": "offer fewer or shorter tool definitions (the largest pinned section)",
    "pending_delta": "shorten this turn's working-memory changes (the largest pinned section)",
}


def _assemble(
    render: _Render,
    selected: list[r.ContextEpisodeRecord],
    prefix: list[Candidate],
    turn: list[Candidate],
    available: int,
) -> Prompt:
    """Plan the sections and the history in ``available`` tokens and assemble the prompt.

    The prefix's share is ``budget.prefix_share`` of ``render.share_of`` (the room before any
    refit), or what the reserved turn sections leave of ``available`` if that is less.
    """
    chosen, degraded = _plan_sections(render, prefix, turn, available)
    used = sum(f.tokens for f in chosen.values())
    # -- recent history fills what is left
    # The turn's rounds come after the prompt: a history not sent whole leaves them room.
    reserve = int(available * render.config.rounds_reserve)
    history, used = _plan_the_history(render, chosen, turn, available=available, used=used, reserve=reserve)
    recall = _recall(render, chosen, history, available=available, used=used, reserve=reserve)
    if history.turn_work is not None and "current_input" in chosen:
        chosen["current_input"] = _with_turn_work(chosen["current_input"], history.turn_work)
    sections, tokens, omitted = _laid_out(chosen, history, render.config.layout)
    _mark_breakpoints(sections)
    inputs, config = render.inputs, render.config
    block_names = {s.name for s in sections}
    total = sum(s.tokens for s in sections) + max(0, len(sections) - 1)
    identity = CacheIdentity(
        agent_id=inputs.agent_id,
        prompt_cache_key=config.prompt_cache_key,
        working_memory_revision=inputs.working_memory_revision,
        compression_epoch=inputs.compression_epoch,
        block_hashes=_block_hashes(sections),
        layout=config.layout,
    )
    plan = AssemblyPlan(
        budget=render.budget.context_window,
        available=render.budget.available,
        total_tokens=total,
        sections=tuple(tokens),
        omitted=tuple(omitted),
        # The whole selection, shown or not (its omissions say which were left out): the
        # next turn at this revision and epoch re-renders exactly this selection.
        episodes=tuple(e.episode_id for e in selected) if "episodes" in chosen else (),
        degraded=degraded,
        history=history.anchor,
        recalled=tuple(ledger_ref(seq) for seq in recall.seqs) if recall is not None else (),
    )
    return Prompt(
        sections=tuple(sections),
        identity=identity,
        plan=plan,
        estimator=config.estimator,
        render_config=render.recorded,
        tools=inputs.policy.tools if inputs.policy is not None and "tools" in block_names else (),
    )


def _plan_sections(
    render: _Render, prefix: list[Candidate], turn: list[Candidate], available: int
) -> tuple[dict[str, Form], bool]:
    """The form of each section but the history and the recalled one; and whether the
    prefix and the turn sections had to be planned jointly (``plan.degraded``)."""
    # The current input is reserved before the prefix is planned: the prefix keeps its own
    # share (its forms then do not depend on this turn), unless the input in full and the
    # other pinned turn sections at their minimum would not fit beside it — a long input
    # is worth more than a full working memory.
    reserved = sum(
        c.forms[0].tokens if c.name == "current_input" else c.forms[-1].tokens for c in turn if c.pinned
    )
    prefix_room = min(int(render.share_of * render.budget.prefix_share), available - reserved)
    try:
        chosen = plan_budget(prefix, prefix_room, what="cacheable prefix")
        used = sum(f.tokens for f in chosen.values())
        chosen.update(plan_budget(turn, available - used, what="turn sections"))
    except BudgetExceeded:
        try:
            return plan_budget([*prefix, *turn], available, what="pinned sections"), True
        except BudgetExceeded as exc:
            raise _pinned_over_budget(exc, [*prefix, *turn], render.budget) from None
    return chosen, False


def _plan_the_history(
    render: _Render,
    chosen: dict[str, Form],
    turn: list[Candidate],
    *,
    available: int,
    used: int,
    reserve: int,
) -> tuple[HistoryPlan, int]:
    """The history in the room the sections leave, put in ``chosen``; and the tokens the
    sections take beside it (less a confirmed delta's, when it gave its room back)."""
    inputs = render.inputs

    def history_in(allowance: int) -> HistoryPlan:
        return plan_history(
            inputs,
            render.count,
            render.config.history_rules,
            allowance=allowance,
            reserve=reserve,
            view=render.view,
            memo=render.units,
        )

    history = history_in(available - used)
    kept_delta = chosen.get("pending_delta")
    if (
        kept_delta is not None
        and kept_delta.kind != "omitted"
        and inputs.pending_delta is None
        and inputs.previous is not None
        and inputs.previous.history is not None
        and (history.anchor is None or history.anchor.from_seq != inputs.previous.history.from_seq)
    ):
        # A confirmed delta is shown again only to keep the prompt before the history
        # unchanged; when the history starts elsewhere anyway (not merely a first history
        # after none, nor a clearing cut, which changes the history further in), it gives
        # its room back — and stays out until the next revision: the next render sees it
        # omitted here.
        chosen["pending_delta"] = _yielded(next(c for c in turn if c.name == "pending_delta"))
        used -= kept_delta.tokens
        history = history_in(available - used)
    if history.form is not None:
        chosen["history"] = history.form
    return history, used


def _recall(
    render: _Render,
    chosen: dict[str, Form],
    history: HistoryPlan,
    *,
    available: int,
    used: int,
    reserve: int,
) -> Recall | None:
    """The recalled section, put in ``chosen`` when it shows anything."""
    config, inputs = render.config, render.inputs
    if not (config.recall_share > 0 and "current_input" in chosen):
        return None
    # Only room the history left (less the rounds' reserve): the section never moves
    # the history, so a turn that recalls costs its own tokens and nothing more.
    history_tokens = (history.form.tokens if history.form is not None else 0) + (
        history.turn_work.tokens if history.turn_work is not None else 0
    )
    room = min(int(available * config.recall_share), available - used - history_tokens - reserve)
    current = inputs.current_input
    before = (
        history.anchor.from_seq
        if history.anchor is not None
        else (current.seq if current is not None and current.seq is not None else 0)
    )
    recall = recalled_form(
        inputs,
        render.view,
        render.count,
        config.history_rules,
        before=before,
        window=config.recall_window,
        room=room,
        shown=[form.text for name, form in chosen.items() if name != "current_input"],
    )
    if recall is not None:
        chosen["recalled"] = recall.form
    return recall


def _with_turn_work(given: Form, work: Form) -> Form:
    """The current input with the turn's own work after it, in the order it happened (a
    prompt rendered again within a turn; its tokens were fitted with the history's)."""
    shift = len(given.text) + 1
    return msgspec.structs.replace(
        given,
        text=f"{given.text}\n{work.text}",
        tokens=given.tokens + work.tokens,
        calls=(*given.calls, *(call.shifted(shift) for call in work.calls)),
    )


def _laid_out(
    chosen: dict[str, Form], history: HistoryPlan, layout: Layout
) -> tuple[list[PromptSection], list[r.SectionTokens], list[r.Omission]]:
    """The sections shown, in ``layout``'s order; every section's tokens and form; and every
    omission, the history's where the history goes."""
    sections: list[PromptSection] = []
    omitted: list[r.Omission] = []
    tokens: list[r.SectionTokens] = []
    for name in section_order(layout):
        form = chosen.get(name)
        if name == "history":
            omitted.extend(history.omissions)
        if form is None:
            continue
        tokens.append(r.SectionTokens(section=name, tokens=form.tokens, form=form.kind))
        omitted.extend(form.omissions)
        if form.kind == "omitted":
            continue
        sections.append(_section(name, form, layout))
    return sections, tokens, omitted


def _mark_breakpoints(sections: list[PromptSection]) -> None:
    """Mark cache breakpoints (four at most, Anthropic's limit): after the last Stable and
    the last AgentScoped section (they change with the revision and the epoch), after
    the history (the next turn's prompt extends it while its anchor holds) and at the
    end (the turn's next model call appends its rounds after it)."""
    marked = {
        max((i for i, s in enumerate(sections) if s.stability == stability), default=None)
        for stability in ("stable", "agent")
    }
    marked.update(i for i, s in enumerate(sections) if s.name == "history")
    if sections:
        marked.add(len(sections) - 1)
    for i in sorted(m for m in marked if m is not None):
        sections[i] = msgspec.structs.replace(sections[i], breakpoint=True)


def _block_hashes(sections: list[PromptSection]) -> dict[str, str]:
    """The hash of each stability class's block: the text of its sections, joined."""
    block_hashes = {}
    for stability in ("stable", "agent", "turn"):
        text = "\n\n".join(s.text for s in sections if s.stability == stability)
        if text:
            block_hashes[stability] = _hash(text)
    return block_hashes


def _hash(text: str) -> str:
    return blake3.blake3(text.encode()).hexdigest()
