"""The run report as one self-contained HTML page: charts as inline SVG, nothing fetched.

The page has no script to run and a Content-Security-Policy that forbids fetching
anything, so it reads the same offline, from a mail attachment or a CI artifact. Its
headline figures are also embedded as JSON (``<script type="application/json"
id="holon-report-data">``), for scripts and for the test that checks them against
``holon audit``. The same :class:`~holon.report.data.RunData` gives the same bytes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from html import escape
from typing import Final

import msgspec

from holon.audit.reports import CACHE_READ_PRICE, CACHE_WRITE_PRICE
from holon.report.data import CallRow, CostSeries, RunData, ToolSummary
from holon.report.svg import PALETTE, Chart, nice_ticks, number

__all__ = ["MAX_CALL_POINTS", "report_html"]

#: Most points a per-call chart draws; a longer run is drawn as this many buckets of
#: consecutive calls (means per bucket), and the page says so.
MAX_CALL_POINTS: Final = 1500
#: Most turns the evictions chart draws one by one; beyond, buckets of turns (sums).
MAX_TURN_POINTS: Final = 1500
#: Most episodes drawn as spans; beyond, every k-th (said on the page).
MAX_EPISODES: Final = 2000
#: Prefix breaks listed one by one under the cached-share chart.
LISTED_BREAKS: Final = 30

_WIDTH: Final = 960
#: A run whose first record is stamped this early is on an importer's synthetic clock,
#: which starts at 0 (holon.importers: a transcript without timestamps), not on a real one.
_SYNTHETIC_BEFORE_MS: Final = 86_400_000
_STATUS_COLOURS: Final = {"ok": "#009e73", "error": "#d55e00", "interrupted": "#e69f00", "unknown": "#999999"}
_BREAK_COLOUR: Final = "#d55e00"

_CSS: Final = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 24px auto;
       max-width: 1000px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ddd; }
.sub { color: #555; margin-top: 0; } .note { color: #555; font-size: 13px; }
.notice { border: 1px solid #e69f00; background: #fff8e6; padding: 10px 14px; border-radius: 4px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { padding: 3px 10px; border-bottom: 1px solid #eee; }
th { text-align: left; font-weight: 600; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f3f3f3; padding: 1px 4px; border-radius: 3px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 4px 0 2px; font-size: 13px; }
.legend span::before { content: ""; display: inline-block; width: 12px; height: 12px; margin-right: 5px;
                       vertical-align: -2px; background: var(--c); }
svg .tick { font-size: 11px; fill: #444; } svg .unit { font-size: 12px; fill: #222; }
"""


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def _legend(items: Sequence[tuple[str, str]]) -> str:
    spans = "".join(f'<span style="--c:{colour}">{escape(name)}</span>' for name, colour in items)
    return f'<div class="legend">{spans}</div>'


def _table(head: Sequence[str], rows: Sequence[Sequence[object]], *, numeric: Sequence[int] = ()) -> str:
    cells = ["<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for row in rows:
        tds = []
        for i, value in enumerate(row):
            text = (
                number(value)
                if isinstance(value, int | float) and not isinstance(value, bool)
                else str(value)
            )
            cls = ' class="n"' if i in numeric else ""
            tds.append(f"<td{cls}>{escape(text)}</td>")
        cells.append("<tr>" + "".join(tds) + "</tr>")
    cells.append("</tbody></table>")
    return "".join(cells)


def _buckets(n: int, most: int) -> list[tuple[int, int]]:
    """``n`` items as at most ``most`` consecutive [start, end) ranges of equal size (the last shorter)."""
    size = max(1, -(-n // most))
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def _x_ticks(low: float, high: float) -> list[float]:
    """Whole round ticks inside low..high (a run's calls or turns; the axis spans exactly that)."""
    return [t for t in nice_ticks(low, high, 8, integer=True) if low <= t <= high] or [low, high]


def _turn_axis(data: RunData, *more: int) -> tuple[float, float]:
    """The extent of a turn axis: the run's turns (and ``more``), half a turn beyond either end."""
    turns = [t for t in (data.first_turn, data.last_turn, *more) if t is not None] or [0]
    return min(turns) - 0.5, max(turns) + 0.5


class _Binned:
    """The calls drawn as points: each a call, or the mean of a bucket of consecutive calls."""

    def __init__(self, calls: Sequence[CallRow]) -> None:
        self.ranges = _buckets(len(calls), MAX_CALL_POINTS)
        self.size = self.ranges[0][1] - self.ranges[0][0] if self.ranges else 1
        self.calls = calls
        # x of a point: the number of its bucket's middle call (calls count from 1)
        self.xs = [(start + end + 1) / 2 for start, end in self.ranges]

    def mean(self, value: Callable[[CallRow], float]) -> list[float]:
        """The mean of ``value`` over each bucket's calls."""
        return [sum(value(c) for c in self.calls[s:e]) / (e - s) for s, e in self.ranges]

    def means_of(self, values: Sequence[int]) -> list[float | None]:
        """Another series over the same calls (a stand-in policy's), averaged over the same buckets
        (None for a bucket past its end)."""
        out: list[float | None] = []
        for s, e in self.ranges:
            part = values[s:e]
            out.append(sum(part) / len(part) if part else None)
        return out

    def shares_of(self, cached: Sequence[int], tokens: Sequence[int]) -> list[float | None]:
        """Each bucket's cached share: its cached tokens over its tokens (None without tokens)."""
        out: list[float | None] = []
        for s, e in self.ranges:
            total = sum(tokens[s:e])
            out.append(sum(cached[s:e]) / total if total else None)
        return out


def _section_tokens(name: str) -> Callable[[CallRow], float]:
    """A call's tokens in section ``name`` (0 where it has none)."""
    return lambda call: call.sections.get(name, 0)


def _tokens_chart(data: RunData, binned: _Binned, others: Sequence[CostSeries]) -> str:
    sections = list(data.section_order)
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sections)}
    layers = [(name, colours[name], binned.mean(_section_tokens(name))) for name in sections]
    tops = [sum(values) for values in zip(*(layer[2] for layer in layers), strict=True)] if layers else [0.0]
    lines = [(s.name, binned.means_of(s.tokens)) for s in others]
    drawn = [v for _, values in lines for v in values if v is not None]
    high = max([*tops, *drawn, 1.0])
    chart = Chart(
        title="prompt tokens per model call, by section",
        width=_WIDTH,
        height=300,
        x_ticks=_x_ticks(1, max(len(data.calls), 2)),
        x_domain=(1, max(len(data.calls), 2)),
        y_ticks=nice_ticks(0, high),
        x_unit="model call (in order)",
        y_unit="tokens per call",
    )
    chart.stacked_areas(binned.xs, layers)
    legend = [(name, colours[name]) for name in sections]
    for i, (name, values) in enumerate(lines):
        colour = "#222222" if i == 0 else PALETTE[-1 - i]
        chart.line(binned.xs, values, colour=colour, name=f"{name}: tokens per call", dash=True)
        legend.append((f"{name} (total, dashed)", colour))
    return _legend(legend) + chart.svg()


def _share_chart(data: RunData, binned: _Binned, others: Sequence[CostSeries]) -> str:
    calls = data.calls
    recorded = data.recorded
    shares = binned.shares_of(recorded.cached, recorded.tokens)
    marks: list[tuple[float, str]] = []
    for (s, e), x in zip(binned.ranges, binned.xs, strict=True):
        part = calls[s:e]
        broke = [c for c in part if c.prefix_break]
        if broke:
            first = broke[0]
            text = (
                f"call {first.call} (turn {first.turn}): prefix broke at {first.break_section} "
                f"({first.break_why}; changed: {', '.join(first.changed) or 'nothing recorded'})"
            )
            if len(broke) > 1:
                text += f"; {len(broke)} breaks in calls {part[0].call}-{part[-1].call}"
            marks.append((x, text))
    chart = Chart(
        title="cached share per model call",
        width=_WIDTH,
        height=240,
        x_ticks=_x_ticks(1, max(len(calls), 2)),
        x_domain=(1, max(len(calls), 2)),
        y_ticks=[0, 0.25, 0.5, 0.75, 1.0],
        x_unit="model call (in order)",
        y_unit="cached share of the prompt",
        y_format="percent",
    )
    chart.line(binned.xs, shares, colour=PALETTE[0], name="cached share")
    legend = [
        ("cached share (section-prefix model)", PALETTE[0]),
        ("prefix break (hover for why)", _BREAK_COLOUR),
    ]
    for i, other in enumerate(others):
        colour = "#222222" if i == 0 else PALETTE[-1 - i]
        chart.line(
            binned.xs, binned.shares_of(other.cached, other.tokens), colour=colour, name=other.name, dash=True
        )
        legend.append((f"{other.name} (dashed)", colour))
    chart.markers(marks, colour=_BREAK_COLOUR)
    return _legend(legend) + chart.svg()


def _activity_chart(data: RunData) -> str:
    low, high_turn = _turn_axis(data, *(a.turn for a in data.activity))
    by_turn = {a.turn: a for a in data.activity}
    turns = list(range(int(low + 0.5), int(high_turn - 0.5) + 1))
    ranges = _buckets(len(turns), MAX_TURN_POINTS)
    evictions: list[tuple[float, float, float, str, str]] = []
    restores: list[tuple[float, float, float, str, str]] = []
    high = 1.0
    for s, e in ranges:
        span = turns[s:e]
        ev = sum(by_turn[t].evictions for t in span if t in by_turn)
        tok = sum(by_turn[t].evicted_tokens for t in span if t in by_turn)
        rs = sum(by_turn[t].restores for t in span if t in by_turn)
        where = f"turn {span[0]}" if len(span) == 1 else f"turns {span[0]}-{span[-1]}"
        width = len(span) * 0.45
        if ev:
            evictions.append(
                (span[0] - 0.45, width, ev, PALETTE[5], f"{where}: {ev:,} items left out ({tok:,} tokens)")
            )
        if rs:
            restores.append((span[0], width, rs, PALETTE[0], f"{where}: {rs:,} restored with holon_get"))
        high = max(high, ev, rs)
    chart = Chart(
        title="evictions and restores per turn",
        width=_WIDTH,
        height=220,
        x_ticks=_x_ticks(low, high_turn),
        x_domain=(low, high_turn),
        y_ticks=nice_ticks(0, high, integer=True),
        x_unit="turn",
        y_unit="items per turn"
        if len(ranges) == len(turns)
        else f"items per {ranges[0][1] - ranges[0][0]} turns",
    )
    if not evictions and not restores:
        return "<p>No prompt left anything out, and nothing was restored.</p>"
    chart.bars(evictions)
    chart.bars(restores)
    legend = _legend(
        [
            ("evicted: items prompts left out or shortened", PALETTE[5]),
            ("restored: holon_get calls", PALETTE[0]),
        ]
    )
    return legend + chart.svg()


#: Most tools drawn as bars of their own; the rest are one bar (the table lists each).
_BARS: Final = 15


def _others(tools: Sequence[ToolSummary]) -> ToolSummary:
    """The tools past the first :data:`_BARS` as one bar's figures."""
    return ToolSummary(
        tool=f"{len(tools)} others",
        calls=sum(t.calls for t in tools),
        errors=sum(t.errors for t in tools),
        interrupted=sum(t.interrupted for t in tools),
        unknown=sum(t.unknown for t in tools),
        p50_ms=None,
        p95_ms=None,
        max_ms=None,
    )


def _tools_charts(data: RunData) -> str:
    tools = list(data.tools)
    if not tools:
        return "<p>No tool calls recorded.</p>"
    drawn = tools[:_BARS] if len(tools) <= _BARS + 1 else [*tools[:_BARS], _others(tools[_BARS:])]
    names = [t.tool for t in drawn]
    most = max(t.calls for t in drawn)
    chart = Chart(
        title="tool calls by tool and outcome",
        width=_WIDTH,
        height=240,
        x_ticks=list(range(len(names))),
        y_ticks=nice_ticks(0, most, integer=True),
        x_unit="tool",
        y_unit="calls",
        x_labels=[name if len(name) <= 16 else name[:15] + "…" for name in names],
        x_domain=(-0.6, len(names) - 0.4),
    )
    # Each bar is centred on its tool's tick.
    bars = []
    for i, t in enumerate(drawn):
        ok = t.calls - t.errors - t.interrupted - t.unknown
        parts = [
            (ok, _STATUS_COLOURS["ok"], f"{t.tool}: {ok:,} ok"),
            (t.errors, _STATUS_COLOURS["error"], f"{t.tool}: {t.errors:,} error"),
            (t.interrupted, _STATUS_COLOURS["interrupted"], f"{t.tool}: {t.interrupted:,} interrupted"),
            (t.unknown, _STATUS_COLOURS["unknown"], f"{t.tool}: {t.unknown:,} unknown outcome"),
        ]
        bars.append((i - 0.3, 0.6, [(float(v), c, text) for v, c, text in parts]))
    chart.stacked_bars(bars)
    out = _legend([(status, colour) for status, colour in _STATUS_COLOURS.items()]) + chart.svg()
    if data.tool_calls and data.first_ts is not None:
        out += _timeline(data, names)
    out += _table(
        ["tool", "calls", "errors", "interrupted", "unknown", "p50 ms", "p95 ms", "max ms"],
        [
            [t.tool, t.calls, t.errors, t.interrupted, t.unknown]
            + ["-" if v is None else v for v in (t.p50_ms, t.p95_ms, t.max_ms)]
            for t in tools
        ],
        numeric=range(1, 8),
    )
    return out


#: Time units of a time axis, the first whose span fits the run: (name, milliseconds, most).
_TIME_UNITS: Final = (("seconds", 1000, 180), ("minutes", 60_000, 180), ("hours", 3_600_000, 96))
_DAY_MS: Final = 86_400_000


def _time_unit(span_ms: int) -> tuple[str, int]:
    """The unit a time axis spanning ``span_ms`` reads best in."""
    for name, ms, most in _TIME_UNITS:
        if span_ms <= ms * most:
            return name, ms
    return "days", _DAY_MS


def _timeline(data: RunData, names: Sequence[str]) -> str:
    """Each tool call as a bar on its tool's row, from its start for its duration, coloured by outcome."""
    assert data.first_ts is not None
    start = data.first_ts
    ends = [p.start_ts + (p.duration_ms or 0) for p in data.tool_calls]
    span = max([*ends, data.last_ts or start, start + 1]) - start
    unit, ms = _time_unit(span)
    rows = list(names)
    row_of = {name: i for i, name in enumerate(rows)}
    # The tools past the drawn bars share the "others" row, the last one.
    other = len(rows) - 1 if len(rows) > _BARS else None
    chart = Chart(
        title="tool calls over time: duration and outcome",
        width=_WIDTH,
        height=max(140, 60 + 22 * len(rows)),
        x_ticks=[t for t in nice_ticks(0, span / ms, 8) if t <= span / ms],
        x_domain=(0, span / ms),
        y_ticks=[len(rows) - 1 - i + 0.5 for i in range(len(rows))],
        y_labels=[name if len(name) <= 12 else name[:11] + "…" for name in rows],
        y_domain=(0, len(rows)),
        x_unit=f"{unit} since the run's first record",
        y_unit="tool",
        left=96,
    )
    bars = []
    for p in data.tool_calls:
        row = row_of.get(p.tool, other)
        if row is None:
            continue
        x0 = (p.start_ts - start) / ms
        duration = "unknown duration" if p.duration_ms is None else f"{p.duration_ms:,} ms"
        bars.append(
            (
                x0,
                x0 + (p.duration_ms or 0) / ms,
                float(len(rows) - 1 - row),
                _STATUS_COLOURS.get(p.status, "#555555"),
                f"{p.tool} {p.status}, {duration}, from {number(round(x0, 2))} {unit}",
            )
        )
    chart.spans(bars)
    out = chart.svg()
    if len(data.tool_calls) < data.tool_call_count:
        out += (
            f'<p class="note">{len(data.tool_calls):,} of {data.tool_call_count:,} calls drawn '
            "(every k-th in call order); the table counts them all.</p>"
        )
    return out


def _episodes_chart(data: RunData) -> str:
    episodes = list(data.episodes)
    if not episodes:
        return "<p>No finalized episodes recorded.</p>"
    step = max(1, -(-len(episodes) // MAX_EPISODES))
    drawn = episodes[::step]
    reasons = sorted({e.boundary_reason for e in episodes})
    colours = {reason: PALETTE[i % len(PALETTE)] for i, reason in enumerate(reasons)}
    low, high = _turn_axis(data, *(e.first_turn for e in episodes), *(e.last_turn for e in episodes))
    chart = Chart(
        title="episodes over the run",
        width=_WIDTH,
        height=140,
        x_ticks=_x_ticks(low, high),
        x_domain=(low, high),
        y_ticks=[],
        x_unit="turn",
        y_unit="episodes",
        y_domain=(0, 2),
    )
    chart.spans(
        [
            (
                e.first_turn - 0.5,
                e.last_turn + 0.5,
                float(i % 2),
                colours[e.boundary_reason],
                f"episode {e.episode_id}: turns {e.first_turn}-{e.last_turn}, closed by {e.boundary_reason}"
                + (f"; objective: {e.objective}" if e.objective else ""),
            )
            for i, e in enumerate(drawn)
        ]
    )
    out = _legend([(f"closed by {reason}", colours[reason]) for reason in reasons]) + chart.svg()
    if step > 1:
        out += f'<p class="note">{len(drawn):,} of {len(episodes):,} episodes drawn (every {step}th).</p>'
    return out


def _breaks(data: RunData) -> str:
    broke = [c for c in data.calls if c.prefix_break]
    if not broke:
        return "<p>No prefix break: each call kept the previous call's prefix through its history.</p>"
    out = "<p>Prefix breaks by where the shared prefix ended and why:</p>" + _table(
        ["section", "why", "breaks", "tokens not cached"],
        [[s, why, n, tokens] for s, why, n, tokens in data.break_causes],
        numeric=(2, 3),
    )
    rows = [
        [
            c.call,
            "-" if c.turn is None else c.turn,
            c.break_section or "-",
            c.break_why or "-",
            ", ".join(c.changed) or "-",
            c.total_tokens - c.cached_tokens,
        ]
        for c in broke[:LISTED_BREAKS]
    ]
    out += f"<p>The first {len(rows):,} of {len(broke):,} prefix breaks:</p>" + _table(
        ["call", "turn", "section", "why", "changed since the previous call", "tokens not cached"],
        rows,
        numeric=(0, 1, 5),
    )
    return out


def _cost(series: Sequence[CostSeries]) -> str:
    rows = []
    for s in series:
        rows.append(
            [
                s.name,
                len(s.tokens),
                s.total,
                s.cached_total,
                _pct(s.cached_total, s.total),
                sum(s.written),
                round(s.cost, 1),
                _pct(s.cost, s.total),
            ]
        )
    return _table(
        ["prompts", "calls", "prompt tokens", "cached", "cached share", "written", "cost", "cost / uncached"],
        rows,
        numeric=range(1, 8),
    )


def _summary(data: RunData) -> dict[str, object]:
    """The headline figures, as the JSON the page embeds (each one an audit query's)."""
    tokens = sum(c.total_tokens for c in data.calls)
    cached = sum(c.cached_tokens for c in data.calls)
    return {
        "agent_id": data.agent_id,
        "records": data.records,
        "turns": data.turns,
        "calls": len(data.calls),
        "tokens": tokens,
        "cached_tokens": cached,
        "cached_share": round(cached / tokens, 4) if tokens else None,
        "prefix_breaks": sum(1 for c in data.calls if c.prefix_break),
        "evictions": data.evictions,
        "evicted_tokens": data.evicted_tokens,
        "restores": data.restores,
        "tool_calls": data.tool_call_count,
        "episodes": len(data.episodes),
    }


def report_html(data: RunData, *, comparisons: Sequence[CostSeries] = ()) -> str:
    """The page for ``data``. ``comparisons`` are other ways to price the same calls (stand-in policies).

    Each comparison is a row of the cost summary and a dashed line of the tokens chart.
    """
    summary = _summary(data)
    parts = [
        *_page_head(data),
        _figures(data, summary),
        *_call_charts(data, comparisons),
        *_page_tail(data, summary),
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _page_head(data: RunData) -> list[str]:
    """The document's head, and the page's title with the run's span and counts under it."""
    if data.first_ts is None or data.last_ts is None:
        when = "no records"
    elif data.first_ts < _SYNTHETIC_BEFORE_MS:
        when = "no real times (the imported transcript had none: a synthetic clock from 0)"
    else:
        when = f"{_utc(data.first_ts)} to {_utc(data.last_ts)}"
    title = f"holon report: {data.agent_id}"
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # Nothing is fetched: no script, style or image from anywhere, not even this page's origin.
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{escape(when)} · {data.turns:,} turns · {len(data.calls):,} model calls · '
        f"{data.records:,} records · {data.tool_call_count:,} tool calls</p>",
    ]


def _figures(data: RunData, summary: dict[str, object]) -> str:
    """The table of the run's headline figures."""
    calls = data.calls
    tokens = int(str(summary["tokens"]))
    cached = int(str(summary["cached_tokens"]))
    return _table(
        ["figure", "value"],
        [
            ["model calls (rendered prompts)", len(calls)],
            ["prompt tokens, all calls", tokens],
            ["mean tokens per call", round(tokens / len(calls), 1) if calls else "-"],
            ["cached tokens (section-prefix model)", f"{cached:,} ({_pct(cached, tokens)})"],
            ["prefix breaks", int(str(summary["prefix_breaks"]))],
            [
                "evictions (items left out or shortened)",
                f"{data.evictions:,} ({data.evicted_tokens:,} tokens)",
            ],
            ["restores (holon_get calls)", data.restores],
            ["tool calls", data.tool_call_count],
            ["episodes", len(data.episodes)],
        ],
        numeric=(1,),
    )


def _call_charts(data: RunData, comparisons: Sequence[CostSeries]) -> list[str]:
    """The charts of the model calls (tokens, cached share, breaks, cost), or why there are none."""
    calls = data.calls
    if not calls:
        return [
            '<div class="notice"><p><strong>This ledger records no prompts</strong> (no '
            "<code>prompt_rendered</code> record): it is an imported transcript, or holon never rendered "
            "a prompt for it. So there are no tokens per call, cached shares or prefix breaks to draw.</p>"
            "<p>To see them, render holon's prompt for each model call of the run into a new ledger, "
            "then report that one:<br><code>holon simulate LEDGER --budget N -o OUT</code> then "
            "<code>holon report OUT</code>.</p></div>"
        ]
    binned = _Binned(calls)
    note = (
        ""
        if binned.size == 1
        else f'<p class="note">{len(calls):,} calls drawn as {len(binned.ranges):,} buckets of '
        f"{binned.size:,} consecutive calls: each point is a bucket's mean.</p>"
    )
    return [
        "<h2>Tokens per model call</h2>",
        "<p>Each call's prompt, stacked by section in prompt order (estimated tokens, as recorded).</p>",
        _tokens_chart(data, binned, comparisons),
        note,
        "<h2>Cached share and prefix breaks</h2>",
        f"<p>Share of each call's prompt a provider serves from its cache, under the section-prefix "
        f"model of <code>holon audit --report calls</code>: the sections a call shares with the previous "
        f"call, in order, up to the first its record says changed (none under "
        f"{data.cache_minimum:,} tokens). A prefix break (▼) is a call that re-sends something the "
        "previous call had before the end of its history; hover a mark for the section and the cause."
        "</p>",
        _share_chart(data, binned, comparisons),
        note,
        _breaks(data),
        "<h2>Cost under the cache model</h2>",
        f"<p>Prompt tokens priced in uncached-token equivalents: cache reads {CACHE_READ_PRICE}x, "
        f"cache writes {CACHE_WRITE_PRICE}x (each call stores its prompt for the next), the rest 1x.</p>",
        _cost([data.recorded, *comparisons]),
    ]


def _page_tail(data: RunData, summary: dict[str, object]) -> list[str]:
    """The activity, tool and episode charts, and the summary as JSON for scripts."""
    return [
        "<h3>Recorded provider usage</h3>",
        "<p>None recorded: holon's ledger holds no record of the token usage a provider reported, so "
        "the figures above are holon's estimates under the cache model.</p>",
        "<h2>Evictions and restores</h2>",
        _activity_chart(data),
        "<h2>Tool calls</h2>",
        _tools_charts(data),
        "<h2>Episodes</h2>",
        _episodes_chart(data),
        '<p class="note">Every figure on this page is a query over the ledger\'s audit tables '
        "(<code>holon audit</code>, docs/audit.md); docs/report.md says how the page is drawn.</p>",
        '<script type="application/json" id="holon-report-data">'
        + msgspec.json.encode(summary).decode().replace("</", "<\\/")
        + "</script>",
        "</body></html>",
    ]
