"""``holon simulate``: a ledger replayed under holon, written as a new ledger beside a comparison.

:func:`simulate_ledger` reads a ledger's evidence (an imported transcript's, or a holon
run's), finds its model calls (:func:`~holon.simulate.call_positions`) and runs two
policies over them with one token counter:

- **holon** (:class:`~holon.simulate.HolonSimulation`): the prompt the runtime would have
  rendered for each call. Its records — the evidence, the post-turn refresh's derived
  records, the refresh the runtime owes before a prompt, and one ``prompt_rendered`` per
  rendered prompt — are written to a new ledger, so every reader works on it:
  ``holon prompts --check`` renders each prompt again, ``holon stats`` and
  ``holon audit --report tokens`` read their tokens.
- **tool** (:class:`~holon.simulate.FullHistory`): the stand-in for what the transcript's
  own tool sent — its whole chat history, truncated oldest-first at the window.

Both series go through the same cache models (:mod:`holon.simulate.cache`); each call's
tokens, cached and written tokens are kept in :class:`Simulation`, stored as
``simulation.json`` in the new ledger's directory (:data:`SIMULATION_FILE`, read back by
:func:`read_simulation`). docs/simulate.md describes the file. The source ledger is only
read.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import msgspec

from holon.context import Budget, RenderConfig
from holon.errors import BudgetExceeded, UsageError
from holon.ledger.files import write_atomic
from holon.ledger.store import Ledger
from holon.replay import projection_config_of
from holon.simulate.cache import (
    READ_PRICE,
    WRITE_PRICE,
    BreakpointCache,
    CacheTotals,
    PrefixCache,
    PrefixHashes,
    cumulative,
)
from holon.simulate.model_calls import RecordedRun, inline_outputs, recorded_run
from holon.simulate.prompts import CallPrompt, TokenCounter
from holon.simulate.renderer import HolonSimulation
from holon.simulate.transcript import FullHistory

__all__ = [
    "SIMULATION_FILE",
    "SIMULATION_VERSION",
    "CallCost",
    "SeriesTotals",
    "SimulatedCall",
    "Simulation",
    "read_simulation",
    "simulate_ledger",
    "simulation_budget",
]

#: The comparison's file, in the directory of the ledger ``holon simulate`` writes.
SIMULATION_FILE: Final = "simulation.json"
#: The version of its layout; a reader refuses another one.
SIMULATION_VERSION: Final = 1
#: The name of the series that stands in for what the transcript's tool sent.
TOOL_STAND_IN: Final = FullHistory.name


def simulation_budget(window: int, output_reserve: int | None = None) -> Budget:
    """The budget of a simulated call: the window, and by default an eighth of it kept for the answer.

    The evaluation gives every policy this budget (benchmarks/eval/run.py ``budget_for``).
    """
    reserve = window // 8 if output_reserve is None else output_reserve
    if window < 1 or reserve < 0:
        raise UsageError(
            f"a budget of {window:,} tokens with {reserve:,} kept for the answer is not a budget"
        )
    if reserve >= window:
        raise UsageError(
            f"an output reserve of {reserve:,} tokens leaves nothing of a {window:,}-token window for the "
            "prompt; give a smaller reserve or a larger window"
        )
    return Budget(context_window=window, output_reserve=reserve)


class CallCost(msgspec.Struct, frozen=True, kw_only=True):
    """One series' prompt at one call, under both cache models.

    ``tokens``: the whole prompt; ``cached_prefix`` / ``written_prefix``: read from and
    added to an automatic prefix cache (OpenAI-style, 1,024-token minimum, 128-token
    steps); ``cached_breakpoints`` / ``written_breakpoints``: the same under Anthropic's
    explicit breakpoints (:mod:`holon.simulate.cache`).
    """

    tokens: int
    cached_prefix: int
    written_prefix: int
    cached_breakpoints: int
    written_breakpoints: int


class SimulatedCall(msgspec.Struct, frozen=True, kw_only=True):
    """One model call of the source run, as holon and as the tool's stand-in would have sent it.

    ``call`` counts the run's model calls from 1. ``source_seq`` is the seq, in the source
    ledger, of the model output the call made (its first record); ``turn`` its turn.
    ``prompt_seq`` is the seq, in the simulated ledger, of the ``prompt_rendered`` record
    holon's prompt starts with; ``rendered`` is false when the call re-sends that prompt
    with the turn's rounds after it (``Turn.context()`` returning the same prompt).
    """

    call: int
    source_seq: int
    turn: int | None
    prompt_seq: int
    rendered: bool
    holon: CallCost
    tool: CallCost


class SeriesTotals(msgspec.Struct, frozen=True, kw_only=True):
    """One series summed over every call; ``cost_*`` in uncached-token equivalents
    (reads at :data:`~holon.simulate.READ_PRICE`, writes at :data:`~holon.simulate.WRITE_PRICE`)."""

    calls: int
    tokens: int
    max_tokens: int
    cached_prefix: int
    written_prefix: int
    cost_prefix: float
    cached_breakpoints: int
    written_breakpoints: int
    cost_breakpoints: float


class Simulation(msgspec.Struct, frozen=True, kw_only=True):
    """What ``holon simulate`` found: its settings, both series' totals and every call."""

    version: int = SIMULATION_VERSION
    source: str
    source_head_seq: int
    source_head_hash: str
    agent_id: str
    context_window: int
    output_reserve: int
    estimator: str
    layout: str
    tool_stand_in: str = TOOL_STAND_IN
    read_price: float = READ_PRICE
    write_price: float = WRITE_PRICE
    prompts_rendered: int
    holon: SeriesTotals
    tool: SeriesTotals
    calls: tuple[SimulatedCall, ...]


class _Series:
    """Both cache models over one series' prompts, fed call by call."""

    def __init__(self) -> None:
        self.hashes = PrefixHashes()
        self.prefix = PrefixCache()
        self.breakpoints = BreakpointCache()
        self.max_tokens = 0

    def call(self, prompt: CallPrompt) -> CallCost:
        cum = cumulative(prompt.costs)
        chain = self.hashes.of(prompt.lines)
        prefix_before = self.prefix.totals.written
        breakpoints_before = self.breakpoints.totals.written
        cached_prefix = self.prefix.call(prompt, cum, chain)
        cached_breakpoints = self.breakpoints.call(prompt, cum, chain)
        self.max_tokens = max(self.max_tokens, cum[-1])
        return CallCost(
            tokens=cum[-1],
            cached_prefix=cached_prefix,
            written_prefix=self.prefix.totals.written - prefix_before,
            cached_breakpoints=cached_breakpoints,
            written_breakpoints=self.breakpoints.totals.written - breakpoints_before,
        )

    def totals(self) -> SeriesTotals:
        prefix: CacheTotals = self.prefix.totals
        marks: CacheTotals = self.breakpoints.totals
        return SeriesTotals(
            calls=len(prefix.per_call),
            tokens=prefix.total,
            max_tokens=self.max_tokens,
            cached_prefix=prefix.cached,
            written_prefix=prefix.written,
            cost_prefix=prefix.cost,
            cached_breakpoints=marks.cached,
            written_breakpoints=marks.written,
            cost_breakpoints=marks.cost,
        )


def simulate_ledger(
    source: Ledger,
    out: Path,
    budget: Budget,
    config: RenderConfig | None = None,
    *,
    agent_id: str | None = None,
    source_name: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Simulation:
    """Replay ``source`` under holon into a new ledger at ``out``; returns the comparison it stored.

    ``config`` is the render config (default: the default one with its estimator);
    ``agent_id`` the agent of ``out``, whose prompts are rendered for it (default: the
    source's; another lets one audit load both ledgers); ``source_name`` how
    :attr:`Simulation.source` names the source (default its path); ``progress(done,
    calls)`` is called after each call. Every prompt is rendered before ``out`` is
    created: a budget its pinned sections do not fit (BudgetExceeded), a ledger without
    model calls, an agent id a ledger cannot have or an ``out`` that exists is refused
    with nothing written.
    """
    config = config or RenderConfig()
    agent = source.agent_id if agent_id is None else agent_id
    out = _check_target(agent, out)
    records = list(source.read())
    run = recorded_run(records)
    if not run.calls:
        raise UsageError(
            f"{source.path} holds no model calls ({len(records):,} records, none of them an assistant's "
            "message, tool call or other model output): there is nothing to simulate"
        )
    counter = TokenCounter(config.estimator)
    holon = HolonSimulation(
        run,
        budget,
        counter,
        config,
        agent_id=agent,
        blob_threshold=source.header.blob_threshold,
        blob=source.get_blob,
        projection=projection_config_of(records),
    )
    # The tool sent whole outputs where the ledger keeps a blob ref and a preview.
    tool = FullHistory(inline_outputs(run, source.get_blob), budget, counter)
    ours, theirs = _Series(), _Series()
    calls = _compare_calls(holon, tool, run, (ours, theirs), progress)
    holon.finish()
    head_seq, head_hash = source.head()
    simulation = Simulation(
        source=source_name if source_name is not None else str(source.path),
        source_head_seq=head_seq,
        source_head_hash=head_hash,
        agent_id=agent,
        context_window=budget.context_window,
        output_reserve=budget.output_reserve,
        estimator=holon.config.estimator,
        layout=holon.config.layout,
        prompts_rendered=len(holon.prompt_tokens),
        holon=ours.totals(),
        tool=theirs.totals(),
        calls=tuple(calls),
    )
    _write(holon, source, out, simulation)
    return simulation


def _check_target(agent: str, target: Path) -> Path:
    """``target`` as a path, once the agent id is one a ledger can have and nothing is there."""
    if not agent or len(agent) > 256 or not agent.isprintable():
        # Ledger.create's rule, checked before the run is rendered rather than after.
        raise UsageError(f"agent id {agent!r} must be 1-256 printable characters")
    out = Path(target)
    if out.exists() or out.is_symlink():
        raise UsageError(
            f"{out} exists: holon simulate writes a new ledger there; remove it or choose another path"
        )
    return out


def _compare_calls(
    holon: HolonSimulation,
    tool: FullHistory,
    run: RecordedRun,
    series: tuple[_Series, _Series],
    progress: Callable[[int, int], None] | None,
) -> list[SimulatedCall]:
    """Each model call of ``run`` as holon and the tool sent it, counted into ``series``
    (holon's, the tool's)."""
    ours, theirs = series
    calls: list[SimulatedCall] = []
    rendered_before = 0
    for number, (prompt, sent) in enumerate(_each_call(holon, tool, run.calls), 1):
        position = run.calls[number - 1]
        evidence = run.records[position]
        calls.append(
            SimulatedCall(
                call=number,
                source_seq=evidence.seq,
                turn=evidence.turn,
                prompt_seq=holon.served_by[-1],
                rendered=len(holon.prompt_tokens) > rendered_before,
                holon=ours.call(prompt),
                tool=theirs.call(sent),
            )
        )
        rendered_before = len(holon.prompt_tokens)
        if progress is not None:
            progress(number, len(run.calls))
    return calls


def _each_call(
    holon: HolonSimulation, tool: FullHistory, calls: tuple[int, ...]
) -> Iterator[tuple[CallPrompt, CallPrompt]]:
    """Both series' prompts call by call; a budget holon cannot render into names the call."""
    prompts = holon.prompts()
    sent = tool.prompts()
    for number in range(1, len(calls) + 1):
        try:
            prompt = next(prompts)
        except BudgetExceeded as exc:
            seq = holon.run.records[calls[number - 1]].seq
            raise BudgetExceeded(
                f"model call {number} of {len(calls)} (before ledger:{seq} of the source): {exc}",
                available=exc.available,
                required=exc.required,
                fix="pass a larger --budget (or a smaller --output-reserve)",
            ) from None
        yield prompt, next(sent)


def _write(holon: HolonSimulation, source: Ledger, out: Path, simulation: Simulation) -> None:
    """Write the simulated ledger and its comparison file; on any failure, nothing is left at ``out``."""
    try:
        with Ledger.create(
            out,
            agent_id=simulation.agent_id,
            fsync="never",
            segment_bytes=source.header.segment_bytes,
            blob_threshold=source.header.blob_threshold,
        ) as ledger:
            for data in holon.blobs.values():
                ledger.put_blob(data)
            ledger.append_many(holon.records)
            ledger.flush()
        data = msgspec.json.encode(simulation)
        write_atomic(out / SIMULATION_FILE, data, what="the simulation's comparison file")
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise


def read_simulation(path: Path) -> Simulation:
    """The comparison ``holon simulate`` stored with the ledger at ``path`` (``simulation.json``)."""
    file = Path(path) / SIMULATION_FILE
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise UsageError(
            f"{path} has no {SIMULATION_FILE}: it is not a ledger `holon simulate` wrote "
            "(run `holon simulate LEDGER -o OUT` and read OUT)"
        ) from None
    try:
        version = msgspec.json.decode(data, type=dict[str, object]).get("version")
        if version != SIMULATION_VERSION:
            raise UsageError(
                f"{file} is simulation version {version!r}; this holon reads version {SIMULATION_VERSION}: "
                "run `holon simulate` again"
            )
        return msgspec.json.decode(data, type=Simulation)
    except msgspec.DecodeError as exc:
        raise UsageError(f"{file} is not a simulation file holon wrote: {exc}") from None
