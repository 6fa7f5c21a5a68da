"""Evaluation metrics on a hand-made trace with known retention, carry-over and cache hits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import accumulate

import pytest

from benchmarks.eval.metrics import (
    BreakpointCache,
    CacheTotals,
    PolicyRun,
    PrefixCache,
    block_floor,
    carried,
    common_prefix,
    evaluate,
    suffix_ceiling,
    suffix_share,
)
from benchmarks.eval.policies import POLICIES, HolonPolicy, RestoreOutcome, new_content
from benchmarks.eval.report import breaks_table, evidence_table, verdicts
from benchmarks.eval.run import fingerprint
from benchmarks.eval.scenario import LIVE_KINDS, STALE_KINDS, Fact, Scenario, generate
from benchmarks.eval.trace import CallPrompt, TokenCounter
from holon import records as r
from holon.context import Budget

# Three calls; each line is given an exact token cost.
#   call 0: SYS RULE-A STEP-B        600 + 500 + 100 = 1,200   breakpoint after 3 lines
#   call 1: the same + NEW           + 300          = 1,500   breakpoints after 2 and 4 lines
#   call 2: SYS OTHER                600 + 900      = 1,500   breakpoint after 2 lines
TRACE = (
    CallPrompt(lines=["SYS", "RULE-A", "STEP-B"], costs=[600, 500, 100], breakpoints=(3,)),
    CallPrompt(
        lines=["SYS", "RULE-A", "STEP-B", "NEW OLD-C"],
        costs=[600, 500, 100, 300],
        breakpoints=(2, 4),
        evicted=("k1",),
    ),
    CallPrompt(lines=["SYS", "OTHER"], costs=[600, 900], breakpoints=(2,), evicted=("k2", "k3")),
)
FACTS = (Fact(0, "constraint", "RULE-A"), Fact(1, "plan", "STEP-B"), Fact(2, "abandoned", "OLD-C"))


class _Scripted:
    """A policy that replays TRACE; k3 does not restore."""

    name = "scripted"

    def prompts(self) -> Iterator[CallPrompt]:
        yield from TRACE

    def restore(self, key: str) -> RestoreOutcome:
        return "mismatch" if key == "k3" else "restored"


def _scenario() -> Scenario:
    return Scenario(
        name="tiny",
        description="hand-made",
        records=(),
        calls=(0, 1, 2),
        facts=FACTS,
        live=(frozenset({0, 1}), frozenset({0, 1}), frozenset({0, 1})),
        stale=(frozenset(), frozenset({2}), frozenset({2})),
    )


def test_block_floor_counts_whole_blocks_from_the_minimum() -> None:
    assert block_floor(1023) == 0
    assert block_floor(1024) == 1024
    assert block_floor(1151) == 1024
    assert block_floor(1152) == 1152
    assert block_floor(5000, minimum=2048, step=256) == 2048 + 11 * 256


def test_common_prefix_counts_leading_equal_lines() -> None:
    assert common_prefix(["a", "b", "c"], ["a", "b", "x"]) == 2
    assert common_prefix(["a", "b"], ["a", "b", "c"]) == 2
    assert common_prefix([], ["a"]) == 0
    assert common_prefix(["x"], ["a"]) == 0


def test_prefix_cache_reads_the_shared_prefix_in_blocks() -> None:
    cache = PrefixCache()
    assert [cache.call(p) for p in TRACE] == [0, 1152, 0]
    # Writes: what each call adds to the cache, rounded down to blocks.
    assert (cache.totals.total, cache.totals.cached, cache.totals.written) == (4200, 1152, 1152 + 256 + 1408)
    assert cache.totals.cost == pytest.approx(0.1 * 1152 + 1.25 * 2816 + (4200 - 1152 - 2816))


def test_breakpoint_cache_reads_only_prefixes_written_at_earlier_breakpoints() -> None:
    cache = BreakpointCache()
    # Call 1 reads call 0's 3-line prefix (its breakpoint), not its own 2-line mark.
    assert [cache.call(p) for p in TRACE] == [0, 1200, 0]
    assert (cache.totals.total, cache.totals.cached, cache.totals.written) == (4200, 1200, 1200 + 300 + 1500)


def test_breakpoint_cache_never_caches_below_the_minimum() -> None:
    cache = BreakpointCache()
    small = CallPrompt(lines=["a", "b"], costs=[500, 400], breakpoints=(2,))
    assert [cache.call(small), cache.call(small)] == [0, 0]
    assert cache.totals.written == 0


def test_breakpoint_cache_reads_only_at_a_block_boundary_of_the_call() -> None:
    # Call 0 writes its whole prompt (a system block, then one block of history). Call 1
    # extends that history inside the same block: the prefix call 0 wrote ends inside
    # call 1's history block, where Anthropic does not look a prefix up, so call 1 reads
    # only the system block, which call 0 wrote too.
    first = CallPrompt(["SYS", "H1", "H2"], [1100, 200, 300], breakpoints=(1, 3), blocks=(1, 3))
    longer = CallPrompt(["SYS", "H1", "H2", "H3"], [1100, 200, 300, 400], breakpoints=(1, 4), blocks=(1, 4))
    cache = BreakpointCache()
    assert [cache.call(first), cache.call(longer)] == [0, 1100]
    assert cache.totals.written == 1600 + 900
    # With the history in blocks of its own, the same prefix is read.
    split = CallPrompt(["SYS", "H1", "H2", "H3"], [1100, 200, 300, 400], breakpoints=(1, 4), blocks=(1, 3, 4))
    cache = BreakpointCache()
    assert [cache.call(first), cache.call(split)] == [0, 1600]


def test_evaluate_counts_retention_carry_over_and_restorations() -> None:
    run = evaluate(_Scripted(), _scenario(), window=2000, available=1400)
    assert run.tokens == [1200, 1500, 1500]
    assert run.over_budget == 2
    # constraint kept in calls 0 and 1, lost in call 2; the plan likewise.
    assert run.required == {**dict.fromkeys(LIVE_KINDS, 0), "constraint": 3, "plan": 3}
    assert run.retained["constraint"] == 2 and run.retained["plan"] == 2
    assert run.retention() == pytest.approx(4 / 6)
    assert run.retention("objective") is None
    assert run.first_loss == {"constraint": 2, "plan": 2}
    # OLD-C is stale in calls 1 and 2 and only call 1 carries it.
    assert (run.stale_calls, run.carried_calls, run.carried["abandoned"]) == (2, 1, 1)
    assert run.avoid == {**dict.fromkeys(STALE_KINDS, 0), "abandoned": 2}
    assert run.carry_over == pytest.approx(0.5)
    assert run.evictions == 3 and run.restores == {"restored": 2, "mismatch": 1, "no ref": 0}
    assert run.evictions_per_100 == pytest.approx(100.0)
    assert run.prefix.per_call == [0, 1152, 0] and run.breakpoints.per_call == [0, 1200, 0]


class _Sectioned:
    """A sectioned policy over two turns: render, append a round, re-render at a turn start."""

    name = "holon"

    def prompts(self) -> Iterator[CallPrompt]:
        yield CallPrompt(["S", "H1"], [1000, 200], (1,), sections=(("system", 1), ("history", 2)))
        appended = (("system", 1), ("history", 2), ("rounds", 3))
        yield CallPrompt(["S", "H1", "R1"], [1000, 200, 300], (1, 3), sections=appended)
        yield CallPrompt(["S", "H1", "H2"], [1000, 200, 500], (1,), sections=(("system", 1), ("history", 3)))

    def restore(self, key: str) -> RestoreOutcome:
        return "restored"


def test_breaks_are_split_by_the_turn_of_the_call_and_add_up_to_what_was_not_shared() -> None:
    records = tuple(
        r.Record(body=r.Message(role="assistant", text=str(i)), ts=i, seq=i, turn=turn)
        for i, turn in enumerate((1, 1, 2))
    )
    scenario = Scenario(name="two-turns", description="hand-made", records=records, calls=(0, 1, 2))
    run = evaluate(_Sectioned(), scenario, window=4000, available=3000)
    # Call 1 (turn 1) only appended R1; call 2 starts turn 2 and differs from line 2 on.
    assert run.breaks == {("rounds", False): [1, 300], ("history", True): [1, 500]}
    table = breaks_table([run])
    first, later = f"{500 / 4400:.1%}", f"{300 / 4400:.1%}"  # of all 1,200 + 1,500 + 1,700 tokens
    assert f"| two-turns @ 4k | a turn's first (1) | 100% / {first} | — | {first} |" in table
    assert f"| two-turns @ 4k | later in a turn (1) | — | 100% / {later} | {later} |" in table


def test_both_models_read_a_prefix_an_older_call_stored() -> None:
    # Call 1 differs after SYS; call 2 returns to call 0's prefix. A provider serves it
    # from call 0's entry, although the previous call does not share it.
    calls = (
        CallPrompt(lines=["SYS", "RULE-A", "STEP-B"], costs=[600, 500, 100], breakpoints=(3,)),
        CallPrompt(lines=["SYS", "OTHER"], costs=[600, 900], breakpoints=(2,)),
        CallPrompt(lines=["SYS", "RULE-A", "STEP-B", "NEW"], costs=[600, 500, 100, 300], breakpoints=(3, 4)),
    )
    prefix, breakpoints = PrefixCache(), BreakpointCache()
    assert [prefix.call(p) for p in calls] == [0, 0, 1152]
    assert [breakpoints.call(p) for p in calls] == [0, 0, 1200]


def test_token_counter_assembles_blocks_to_their_whole_counts() -> None:
    counter = TokenCounter()
    first, second = "alpha beta\ngamma", "delta"
    lines, costs = counter.assemble(
        [(first.split("\n"), counter.count(first)), (["delta"], counter.count(second))]
    )
    assert lines == ["alpha beta", "gamma", "delta"]
    # Each block counts whole, plus one token for the line break joining them.
    assert sum(costs) == counter.count(first) + 1 + counter.count(second)
    assert sum(costs[:2]) == counter.count(first) + 1


def test_block_costs_sum_to_the_block_and_never_go_back() -> None:
    counter = TokenCounter()
    lines = ["alpha beta gamma", "delta", "epsilon zeta"]
    raw = [counter.count(line) + 1 for line in lines]
    # A block counted below its lines' sum (the estimator is not additive): the surplus
    # comes off the last lines without making any of them negative.
    costs = counter.block_costs(lines, raw[0] - 1)
    assert sum(costs) == raw[0] - 1 and min(costs) >= 0
    assert counter.block_costs(lines, sum(raw) + 3) == [*raw[:-1], raw[-1] + 3]


def test_a_record_costs_the_same_as_a_round_and_inside_a_section() -> None:
    # A prompt rendered again within a turn shows the turn's records in a section; the
    # calls before it had them as rounds. The same text must sit at the same positions,
    # or the cache models would disagree about a prefix both calls share.
    counter = TokenCounter()
    call = ['[ledger:5] call c1 bash {"command": "pytest -x"}']
    result = ["[ledger:6] result c1 error, exit 1:", "FAILED test_cart.py::test_total", "1 failed in 0.4s"]
    section = ["## Current input (user)", "Fix the cart.", "work on this input so far (oldest first):"]
    lines = [*section, *call, *result, "[ledger:7] assistant: looking at the rounding"]
    tokens = counter.count("\n".join(lines)) + 3  # the renderer's count is an upper bound
    costs = counter.unit_costs(lines, tokens)
    assert sum(costs) == tokens and min(costs) >= 0
    as_round = [counter.block_costs(unit, counter.count("\n".join(unit)) + 1) for unit in (call, result)]
    assert costs[3:7] == [*as_round[0], *as_round[1]]


def _reference_breakpoint_reads(prompts: list[CallPrompt], minimum: int = 1024) -> list[int]:
    """Brute force: a store of every written prefix (as a tuple of lines), searched in full."""
    store: set[tuple[str, ...]] = set()
    reads = []
    for prompt in prompts:
        cum = [0, *accumulate(prompt.costs)]
        marks = [k for k in prompt.breakpoints if cum[k] >= minimum]
        read = 0
        if marks:
            ends = prompt.blocks or range(1, marks[-1] + 1)
            read = max(
                (k for k in ends if k <= marks[-1] and tuple(prompt.lines[:k]) in store),
                default=0,
            )
            store.update(tuple(prompt.lines[:k]) for k in marks if k > read)
        reads.append(cum[read])
    return reads


def _reference_prefix_reads(prompts: list[CallPrompt], minimum: int = 1024, step: int = 128) -> list[int]:
    """Brute force: each call against every earlier call's stored prefix, line by line.

    The lines two calls share hold the tokens both calls count for them (the last shared
    line may end a block in one call and not in the other, which moves its count).
    """
    seen: list[tuple[list[str], list[int]]] = []  # lines and cumulative costs of each earlier call
    reads = []
    for prompt in prompts:
        cum = [0, *accumulate(prompt.costs)]
        best = 0
        for lines, old in seen:
            shared = common_prefix(lines, prompt.lines)
            held = min(cum[shared], old[shared])
            best = max(best, min(block_floor(held, minimum, step), block_floor(old[-1], minimum, step)))
        reads.append(best)
        seen.append((prompt.lines, cum))
    return reads


@pytest.mark.parametrize(
    ("model", "reference"),
    [(BreakpointCache, _reference_breakpoint_reads), (PrefixCache, _reference_prefix_reads)],
    ids=["breakpoints", "prefix"],
)
def test_cache_models_match_a_brute_force_store(
    model: type[BreakpointCache | PrefixCache], reference: Callable[[list[CallPrompt]], list[int]]
) -> None:
    scenario = generate("small", 20, seed=9)
    budget = Budget(context_window=8_000, output_reserve=1_000)
    for policy in POLICIES:
        prompts = list(policy(scenario, budget, TokenCounter()).prompts())
        cache = model()
        assert [cache.call(p) for p in prompts] == reference(prompts), policy.name


def test_the_fingerprint_covers_every_published_figure() -> None:
    # Costs depend on the tokens written as well as read; the stale-carried share on
    # calls, not pairs; the first loss and the break table are published too. A change
    # to any of them must change the fingerprint.
    def run(**changes: object) -> PolicyRun:
        base = PolicyRun(policy="p", scenario="s", window=8_000, available=7_000, tokens=[10])
        for name, value in changes.items():
            setattr(base, name, value)
        return base

    same = fingerprint([run()])
    assert fingerprint([run()]) == same
    for changed in (
        run(prefix=CacheTotals(written=5)),
        run(breakpoints=CacheTotals(total=3)),
        run(stale_calls=2, carried_calls=1),
        run(first_loss={"plan": 4}),
        run(required={"plan": 3}),
        run(over_budget=1),
        run(breaks={("history", True): [1, 9]}),
        run(avoid={"superseded_task": 2}),
        run(evidence_required=3, evidence_found=1),
    ):
        assert fingerprint([changed]) != same, changed


def test_a_superseded_instruction_is_carried_only_when_its_correction_does_not_follow_it() -> None:
    facts = (
        Fact(0, "correction", "format with ruff"),
        Fact(1, "superseded_instruction", "format with black", superseded_by=0),
        Fact(2, "abandoned", "OLD-C"),
    )
    corrected, old = facts[1], facts[2]
    # Read as a thread: the instruction, then its correction.
    assert not carried(corrected, "format with black\nlater: format with ruff", facts)
    # The correction was lost, or comes before the instruction's last occurrence.
    assert carried(corrected, "format with black", facts)
    assert carried(corrected, "format with ruff\nformat with black", facts)
    assert carried(corrected, "format with black\nformat with ruff\nformat with black", facts)
    assert not carried(corrected, "format with ruff", facts)
    # The other stale kinds keep their rule: present is carried, whatever follows.
    assert carried(old, "OLD-C\nformat with ruff", facts) and not carried(old, "NEW", facts)


class _Replay:
    """A policy that replays the given prompts."""

    name = "replay"

    def __init__(self, *texts: str) -> None:
        self.texts = texts

    def prompts(self) -> Iterator[CallPrompt]:
        for text in self.texts:
            lines = text.split("\n")
            yield CallPrompt(lines=lines, costs=[1] * len(lines), breakpoints=())

    def restore(self, key: str) -> RestoreOutcome:
        return "no ref"


def test_evaluate_scores_superseded_facts_and_answer_evidence_at_their_calls() -> None:
    facts = (
        Fact(0, "correction", "format with ruff"),
        Fact(1, "superseded_instruction", "format with black", superseded_by=0),
        Fact(2, "evidence", "the dog is called Biscuit"),
    )
    scenario = Scenario(
        name="thread",
        description="hand-made",
        records=(),
        calls=(0, 1, 2),
        facts=facts,
        live=(frozenset(), frozenset({0}), frozenset({0})),
        stale=(frozenset(), frozenset({1}), frozenset({1})),
        evidence=(frozenset({2}), frozenset(), frozenset({2})),
        family="coding-unstructured",
    )
    policy = _Replay(
        "the dog is called Biscuit\nformat with black",  # nothing stale yet; evidence asked and there
        "format with black\nformat with ruff",  # corrected: not carried
        "format with black\nthe dog is called Biscuit",  # the correction lost: carried; evidence there
    )
    run = evaluate(policy, scenario, window=100, available=90)
    assert run.family == "coding-unstructured"
    assert (run.stale_calls, run.carried_calls) == (2, 1)
    assert run.carried["superseded_instruction"] == 1 and run.avoid["superseded_instruction"] == 2
    assert run.retention("correction") == pytest.approx(0.5)
    # Evidence is asked about at calls 0 and 2 only; the text at call 1 does not count.
    assert (run.evidence_required, run.evidence_found) == (2, 2)
    assert run.evidence_share == 1.0
    run = evaluate(_Replay("x", "y", "z"), scenario, window=100, available=90)
    assert (run.evidence_required, run.evidence_found, run.evidence_share) == (2, 0, 0.0)
    assert PolicyRun("p", "s", 1, 1).evidence_share is None


def _family_run(policy: str, family: str, **figures: object) -> PolicyRun:
    run = PolicyRun(policy=policy, scenario=family, window=8_000, available=7_000, family=family, tokens=[1])
    for name, value in figures.items():
        setattr(run, name, value)
    return run


def test_verdicts_check_each_familys_own_targets() -> None:
    kept = {"required": {"constraint": 4, "last_edit": 2}, "retained": {"constraint": 4, "last_edit": 2}}
    stale = {"avoid": {"superseded_instruction": 3}, "stale_calls": 3}
    coding = [
        _family_run(p, "coding-unstructured", **kept, **stale)
        for p in ("full-history", "rolling-window", "tool-clearing")
    ]
    met = verdicts([*coding, _family_run("holon", "coding-unstructured", **kept, **stale)])
    assert [(v.met, v.target) for v in met] == [
        (
            True,
            "coding-unstructured @ 8k: holon keeps 100% of live facts in every call with 0 false carry-over",
        )
    ]
    assert "superseded_instruction 0 of 3" in met[0].detail and "last_edit 100.0%" in met[0].detail
    carried_one = _family_run("holon", "coding-unstructured", **kept, **stale, carried_calls=1)
    lost_one = _family_run(
        "holon", "coding-unstructured", **stale, required=kept["required"], retained={"constraint": 4}
    )
    assert [v.met for v in verdicts([*coding, carried_one])] == [False]
    assert [v.met for v in verdicts([*coding, lost_one])] == [False]

    def conversation(holon_found: int, rolling_found: int) -> list[PolicyRun]:
        found = {"full-history": 1, "rolling-window": rolling_found, "tool-clearing": 1, "holon": holon_found}
        return [
            _family_run(p, "conversation-sessions", evidence_required=4, evidence_found=n)
            for p, n in found.items()
        ]

    (more,) = verdicts(conversation(2, 1))
    assert more.met and more.target.endswith("holon's prompts hold more answer evidence than rolling-window")
    assert "rolling-window 25.0%" in more.detail and "holon 50.0%" in more.detail
    assert [v.met for v in verdicts(conversation(1, 1))] == [False]
    table = evidence_table(conversation(2, 1))
    assert (
        "| conversation-sessions @ 8k | 4 | 25.0% (1/4) | 25.0% (1/4) | 25.0% (1/4) | 50.0% (2/4) |" in table
    )


def test_the_structured_verdicts_name_only_the_stale_kinds_the_run_has() -> None:
    figures = {
        "required": {"constraint": 5, "plan": 5},
        "retained": {"constraint": 5, "plan": 5},
        "avoid": {"abandoned": 2, "superseded_plan": 1},
        "stale_calls": 2,
        "first_loss": {"constraint": 3, "plan": 4},
    }
    group = [
        _family_run(p, "generated", **figures) for p in ("full-history", "rolling-window", "tool-clearing")
    ]
    checks = verdicts([*group, _family_run("holon", "generated", **figures)])
    (carry,) = [v for v in checks if "false carry-over" in v.target]
    assert carry.met and carry.detail.endswith("((call, fact) pairs: abandoned 0, superseded_plan 0)")


# --------------------------------------------------------------------------- the cached share's ceiling


def test_the_ceiling_drops_the_whole_history_when_the_window_fills() -> None:
    # Head 1,100 (cacheable: over the 1,024 minimum), 700 new tokens a call, 3,000 available:
    # the prompt grows 1,800 -> 2,500, then the next call would need 3,200, so the history
    # is dropped: 1,100 + 700 again.
    new, heads = [700, 700, 700, 700], [1_100] * 4
    sizes = [1_800, 2_500, 1_800, 2_500]
    cached = [0, block_floor(1_800), block_floor(1_100), block_floor(1_800)]
    assert suffix_ceiling(new, heads, 3_000) == pytest.approx(sum(cached) / sum(sizes))
    # A head under the cache's minimum is never read; only the grown prompts are.
    assert suffix_ceiling(new, [100] * 4, 3_000) < suffix_ceiling(new, heads, 3_000)
    assert suffix_ceiling([], [], 3_000) == 0.0


def test_at_the_eval_budgets_keeping_history_at_a_move_caches_less() -> None:
    # A move re-sends what it keeps and brings the next move closer: in a window with a
    # cacheable head and a call's new evidence a tenth of it, the best is to keep nothing.
    new, heads = [600] * 200, [1_700] * 200
    shares = [suffix_share(new, heads, 7_000, keep) for keep in (0.0, 0.3, 0.6, 0.9)]
    assert shares == sorted(shares, reverse=True) and shares[0] > shares[-1]
    assert suffix_ceiling(new, heads, 7_000) == shares[0]
    # ... and a larger window, with more calls between moves, caches more.
    assert suffix_ceiling(new, heads, 28_000) > suffix_ceiling(new, heads, 7_000) + 0.05


def test_holons_cached_share_is_under_its_ceiling() -> None:
    scenario = generate("ceiling", 40, seed=8, max_rounds=4)
    budget = Budget(context_window=8_000, output_reserve=1_000)
    counter = TokenCounter()
    run = evaluate(HolonPolicy(scenario, budget, counter), scenario, window=8_000, available=budget.available)
    assert run.policy == "holon" and len(run.heads) == run.calls
    ceiling = suffix_ceiling(new_content(scenario, budget, counter), run.heads, budget.available)
    assert 0 < run.prefix.share <= ceiling < 1
