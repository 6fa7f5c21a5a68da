"""Output of the evaluation: a terminal table, docs/evaluation.md and an SVG chart.

The SVG is written by hand (no plotting library): per budget, prompt tokens per call and
the cached-token share over the run, one line per policy, averaged over buckets of calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Final

from benchmarks.eval.metrics import PolicyRun
from benchmarks.eval.scenario import LIVE_KINDS, STALE_KINDS

__all__ = [
    "COLORS",
    "Verdict",
    "breaks_table",
    "ceiling_table",
    "evidence_table",
    "markdown_tables",
    "svg_chart",
    "terminal_table",
    "verdicts",
]

COLORS: Final = {
    "full-history": "#d1495b",
    "rolling-window": "#edae49",
    "tool-clearing": "#6a4c93",
    "holon": "#00798c",
    "holon-rfc": "#8cc5cf",
}


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _ratio(run: PolicyRun, base: PolicyRun, model: str) -> float:
    ours = run.prefix.cost if model == "prefix" else run.breakpoints.cost
    theirs = base.prefix.cost if model == "prefix" else base.breakpoints.cost
    return ours / theirs if theirs else 0.0


def _groups(runs: Sequence[PolicyRun]) -> list[list[PolicyRun]]:
    """Runs grouped by (scenario, window), in the order they were made."""
    out: dict[tuple[str, int], list[PolicyRun]] = {}
    for run in runs:
        out.setdefault((run.scenario, run.window), []).append(run)
    return list(out.values())


def _restored(run: PolicyRun) -> str:
    done = run.restores.get("restored", 0)
    return f"{done}/{run.evictions}"


_HEAD: Final = (
    "policy",
    "calls",
    "tok max",
    "tok med",
    "live facts",
    "constraint",
    "plan",
    "stale carried",
    "evidence",
    "cached (prefix)",
    "cost (prefix)",
    "cached (bp)",
    "cost (bp)",
    "evict/100",
    "restored",
)


def _row(run: PolicyRun, base: PolicyRun) -> tuple[str, ...]:
    return (
        run.policy,
        f"{run.calls:,}",
        f"{run.max_tokens:,}",
        f"{run.median_tokens:,.0f}",
        _pct(run.retention()),
        _pct(run.retention("constraint")),
        _pct(run.retention("plan")),
        _pct(run.carry_over),
        _pct(run.evidence_share),
        _pct(run.prefix.share),
        f"{_ratio(run, base, 'prefix'):.2f}x",
        _pct(run.breakpoints.share),
        f"{_ratio(run, base, 'bp'):.2f}x",
        f"{run.evictions_per_100:.1f}",
        _restored(run),
    )


_FACT_COLUMNS: Final = ("live facts", "constraint", "plan", "stale carried")


def _has_facts(group: Sequence[PolicyRun]) -> bool:
    return any(sum(run.required.values()) + sum(run.avoid.values()) for run in group)


def _head(group: Sequence[PolicyRun]) -> tuple[str, ...]:
    """The columns a group's table shows: fact and evidence columns only where it has them."""
    facts = _has_facts(group)
    evidence = any(run.evidence_required for run in group)
    return tuple(h for h in _HEAD if (facts or h not in _FACT_COLUMNS) and (evidence or h != "evidence"))


def _cells(run: PolicyRun, base: PolicyRun, head: Sequence[str]) -> tuple[str, ...]:
    return tuple(c for h, c in zip(_HEAD, _row(run, base), strict=True) if h in head)


def _kinds(group: Sequence[PolicyRun]) -> tuple[list[str], list[str]]:
    """The live and stale fact kinds a group's scenario has."""
    live: list[str] = [k for k in LIVE_KINDS if any(run.required.get(k) for run in group)]
    stale: list[str] = [k for k in STALE_KINDS if any(run.avoid.get(k) for run in group)]
    return live, stale


def terminal_table(runs: Sequence[PolicyRun]) -> str:
    """All runs as aligned text, one block per scenario and budget."""
    out: list[str] = []
    for group in _groups(runs):
        first = group[0]
        out.append(f"\n{first.scenario} — window {first.window:,} (prompt budget {first.available:,} tokens)")
        head = _head(group)
        rows = [head, *(_cells(run, group[0], head) for run in group)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        for row in rows:
            out.append(
                "  "
                + "  ".join(
                    cell.rjust(w) if i else cell.ljust(w)
                    for i, (cell, w) in enumerate(zip(row, widths, strict=True))
                )
            )
    return "\n".join(out)


def markdown_tables(runs: Sequence[PolicyRun], *, facts: bool) -> str:
    """Markdown tables; with ``facts``, also retention per fact kind and carry-over per stale kind.

    Fact and evidence columns, and the kinds of the per-kind table, are those the group's
    scenario has.
    """
    out: list[str] = []
    for group in _groups(runs):
        first = group[0]
        out.append(f"\n#### {first.scenario}, window {first.window:,} (prompt budget {first.available:,})\n")
        head = _head(group) if facts else tuple(h for h in _head(group) if h not in _FACT_COLUMNS)
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|")
        for run in group:
            out.append("| " + " | ".join(_cells(run, group[0], head)) + " |")
        live, stale = _kinds(group)
        if facts and (live or stale):
            out.append(
                "\nPer kind: share of (call, live fact) pairs kept; for stale kinds, (call, fact) "
                "pairs carried over; and the first call that lost a live fact of each kind.\n"
            )
            kinds = [*live, *stale]
            out.append("| policy | " + " | ".join(f"{k}" for k in kinds) + " | first loss (call) |")
            out.append("|---|" + "---:|" * len(kinds) + "---|")
            for run in group:
                cells = [_pct(run.retention(k)) for k in live]
                cells += [f"{run.carried.get(k, 0):,}" for k in stale]
                loss = ", ".join(
                    f"{k} {c:,}" for k, c in sorted(run.first_loss.items(), key=lambda kv: kv[1])
                )
                out.append(f"| {run.policy} | " + " | ".join(cells) + f" | {loss or '—'} |")
    return "\n".join(out)


def _layout_of(run: PolicyRun) -> str:
    """The layout a holon run names beside its scenario: none for the default one."""
    return "" if run.policy == "holon" else f" ({run.policy.removeprefix('holon-')})"


def breaks_table(runs: Sequence[PolicyRun]) -> str:
    """For each sectioned (holon) run: where the prefix shared with the previous call ends.

    Two rows per run — a turn's first call, and its later calls — and per section the
    share of those calls / the prompt tokens from the break on as a share of *all* the
    run's prompt tokens, so a row's token shares add up to what it leaves uncached.
    """
    sectioned = [run for run in runs if run.breaks]
    if not sectioned:
        return ""
    names = sorted({name for run in sectioned for name, _ in run.breaks})
    out = [
        "| run | calls | " + " | ".join(names) + " | all |",
        "|---|---|" + "---:|" * (len(names) + 1),
    ]
    for run in sectioned:
        total = sum(run.tokens)
        for first, label in ((True, "a turn's first"), (False, "later in a turn")):
            row = {name: run.breaks.get((name, first), [0, 0]) for name in names}
            calls = sum(n for n, _ in row.values())
            if not calls:
                continue
            cells = [f"{n / calls:.0%} / {t / total:.1%}" if n else "—" for n, t in row.values()]
            lost = sum(t for _, t in row.values())
            out.append(
                f"| {run.scenario} @ {run.window // 1000}k{_layout_of(run)} | {label} ({calls:,}) | "
                + " | ".join(cells)
                + f" | {lost / total:.1%} |"
            )
    return "\n".join(out)


def evidence_table(runs: Sequence[PolicyRun]) -> str:
    """For each run with questions: the share of answer evidence in the prompt, policy by policy."""
    groups = [g for g in _groups(runs) if any(run.evidence_required for run in g)]
    if not groups:
        return ""
    names = list(dict.fromkeys(run.policy for g in groups for run in g))
    out = [
        "| run | questions | " + " | ".join(names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    for group in groups:
        by = {run.policy: run for run in group}
        asked = max(run.evidence_required for run in group)
        cells = [
            f"{_pct(by[n].evidence_share)} ({by[n].evidence_found}/{by[n].evidence_required})"
            if n in by
            else "—"
            for n in names
        ]
        first = group[0]
        out.append(f"| {first.scenario} @ {first.window // 1000}k | {asked} | " + " | ".join(cells) + " |")
    return "\n".join(out)


@dataclass(frozen=True)
class Verdict:
    """One "done when" target checked on the measured figures."""

    target: str
    met: bool
    detail: str


def ceiling_table(runs: Sequence[PolicyRun]) -> str:
    """Each holon run's cached share beside the ceiling of a layout with its head (markdown)."""
    rows = ["| scenario @ window | policy | cached share (prefix blocks) | ceiling | share of the ceiling |"]
    rows.append("|---|---|---:|---:|---:|")
    for run in runs:
        if run.ceiling is None:
            continue
        near = run.prefix.share / run.ceiling if run.ceiling else 0.0
        rows.append(
            f"| {run.scenario} @ {run.window // 1000}k | {run.policy} | {_pct(run.prefix.share)} | "
            f"{_pct(run.ceiling)} | {_pct(near)} |"
        )
    return "\n".join(rows) if len(rows) > 2 else ""


def verdicts(runs: Sequence[PolicyRun]) -> list[Verdict]:
    """The issue's targets, checked on the generated scenarios (runs with planted facts).

    Which targets depend on the scenario's family: the structured run's set; on the
    unstructured coding session and the tasks run, every live fact kept with no false
    carry-over; on the conversation, more answer evidence than ``rolling-window``.
    """
    out: list[Verdict] = []
    for group in _groups(runs):
        by = {run.policy: run for run in group}
        holon = by.get("holon")
        if holon is None:
            continue
        where = f"{holon.scenario} @ {holon.window // 1000}k"
        if holon.family in ("coding-unstructured", "tasks-subagents"):
            out.append(_kept_and_not_carried(holon, where, _kinds(group)))
            continue
        if holon.family == "conversation-sessions":
            out.append(_more_evidence(by, where))
            continue
        if holon.family != "generated" or not _has_facts(group):
            continue
        kept = holon.retention()
        out.append(
            Verdict(
                f"{where}: holon retains every live fact in every call",
                kept == 1.0,
                ", ".join(
                    f"{k} {_pct(holon.retention(k))}" for k in LIVE_KINDS if holon.retention(k) is not None
                ),
            )
        )
        for name in ("full-history", "rolling-window"):
            base = by[name]
            lost = [k for k in ("constraint", "plan") if k in base.first_loss]
            out.append(
                Verdict(
                    f"{where}: {name} loses the turn-1 constraint and the plan after truncation",
                    len(lost) == 2,
                    ", ".join(f"{k} first lost at call {base.first_loss[k]:,}" for k in lost)
                    or "nothing lost",
                )
            )
        out.append(
            Verdict(
                f"{where}: holon false carry-over is 0",
                holon.carried_calls == 0,
                f"{holon.carried_calls} of {holon.stale_calls:,} calls carried a stale fact "
                "((call, fact) pairs: "
                + ", ".join(f"{k} {holon.carried.get(k, 0)}" for k in _kinds(group)[1])
                + ")",
            )
        )
        for model, label in (("prefix", "prefix blocks"), ("bp", "breakpoints")):
            # Against the baselines: holon in another layout is holon, not a rival.
            costs = {
                n: (r.prefix.cost if model == "prefix" else r.breakpoints.cost)
                for n, r in by.items()
                if n == "holon" or not n.startswith("holon")
            }
            cheapest = min(costs, key=lambda n: costs[n])
            out.append(
                Verdict(
                    f"{where}: holon's input cost is the lowest ({label})",
                    cheapest == "holon",
                    ", ".join(f"{n} {c / 1e6:.2f}M" for n, c in costs.items()),
                )
            )
        ceiling = f"; the ceiling of any layout with its head at this budget is {_pct(holon.ceiling)}"
        out.append(
            Verdict(
                f"{where}: holon cached-token share ≥ 90% (prefix blocks)",
                holon.prefix.share >= 0.9,
                f"{_pct(holon.prefix.share)} (breakpoints {_pct(holon.breakpoints.share)})"
                + (ceiling if holon.ceiling is not None else ""),
            )
        )
        out.append(
            Verdict(
                f"{where}: every holon eviction restores",
                holon.restores.get("restored", 0) == holon.evictions,
                f"{_restored(holon)} restored",
            )
        )
    return out


def _kept_and_not_carried(holon: PolicyRun, where: str, kinds: tuple[list[str], list[str]]) -> Verdict:
    live, stale = kinds
    return Verdict(
        f"{where}: holon keeps 100% of live facts in every call with 0 false carry-over",
        holon.retention() == 1.0 and holon.carried_calls == 0,
        f"live facts {_pct(holon.retention())} ("
        + ", ".join(f"{k} {_pct(holon.retention(k))}" for k in live)
        + f"); {holon.carried_calls:,} of {holon.stale_calls:,} calls carried a stale fact "
        + "((call, fact) pairs: "
        + ", ".join(f"{k} {holon.carried.get(k, 0):,} of {holon.avoid.get(k, 0):,}" for k in stale)
        + ")",
    )


def _more_evidence(by: dict[str, PolicyRun], where: str) -> Verdict:
    holon, rolling = by["holon"], by["rolling-window"]
    return Verdict(
        f"{where}: holon's prompts hold more answer evidence than rolling-window",
        (holon.evidence_share or 0.0) > (rolling.evidence_share or 0.0),
        ", ".join(f"{n} {_pct(run.evidence_share)}" for n, run in by.items())
        + f" of the evidence asked about at {holon.evidence_required:,} calls",
    )


# --------------------------------------------------------------------------- chart

_W: Final = 520
_H: Final = 200
_PAD: Final = 46


def _buckets(values: Sequence[float], n: int) -> list[float]:
    if len(values) <= n:
        return list(values)
    size = len(values) / n
    out = []
    for i in range(n):
        chunk = values[int(i * size) : max(int((i + 1) * size), int(i * size) + 1)]
        out.append(sum(chunk) / len(chunk))
    return out


def _panel(
    x0: int, y0: int, title: str, series: dict[str, list[float]], *, y_max: float, y_fmt: str
) -> list[str]:
    out = [
        f'<g transform="translate({x0},{y0})">',
        f'<text x="{_PAD}" y="-8" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<rect x="{_PAD}" y="0" width="{_W - _PAD}" height="{_H}" fill="#fafafa" stroke="#ccc"/>',
    ]
    for i in range(5):
        value = y_max * i / 4
        y = _H - _H * i / 4
        out.append(f'<line x1="{_PAD}" x2="{_W}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        label = y_fmt.format(value)
        out.append(f'<text x="{_PAD - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{label}</text>')
    for name, values in series.items():
        if not values:
            continue
        n = len(values)
        points = " ".join(
            f"{_PAD + (_W - _PAD) * (i / max(n - 1, 1)):.1f},{_H - _H * min(v / y_max, 1.0):.1f}"
            for i, v in enumerate(values)
        )
        out.append(
            f'<polyline fill="none" stroke="{COLORS.get(name, "#333")}" stroke-width="1.6" '
            f'points="{points}"/>'
        )
    out.append(f'<text x="{_W}" y="{_H + 14}" font-size="10" text-anchor="end">model calls →</text>')
    out.append("</g>")
    return out


def svg_chart(runs: Sequence[PolicyRun], scenario: str, *, points: int = 240) -> str:
    """Tokens per call and cached share (prefix model) over the run, per policy, per budget."""
    groups = [g for g in _groups(runs) if g[0].scenario == scenario]
    width = 2 * (_W + 30) + 20
    height = len(groups) * (_H + 70) + 60
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    x = 20
    for name, color in COLORS.items():
        out.append(f'<rect x="{x}" y="12" width="14" height="4" fill="{color}"/>')
        out.append(f'<text x="{x + 18}" y="18" font-size="12">{escape(name)}</text>')
        x += 30 + 8 * len(name)
    for row, group in enumerate(groups):
        y0 = 60 + row * (_H + 70)
        window = group[0].window
        tokens = {run.policy: _buckets([float(t) for t in run.tokens], points) for run in group}
        top = max(group[0].available, *(max(v) for v in tokens.values() if v))
        out += _panel(
            10,
            y0,
            f"{scenario}, window {window:,}: prompt tokens per call",
            tokens,
            y_max=top,
            y_fmt="{:,.0f}",
        )
        shares = {
            run.policy: _buckets(
                [c / t if t else 0.0 for c, t in zip(run.prefix.per_call, run.tokens, strict=True)], points
            )
            for run in group
        }
        out += _panel(_W + 40, y0, "cached share per call (prefix blocks)", shares, y_max=1.0, y_fmt="{:.0%}")
    out.append("</svg>")
    return "\n".join(out) + "\n"
