"""A small plotting layer: charts as inline SVG text, with axes, ticks, units and hover titles.

holon's report draws a handful of chart kinds (stacked areas, lines, markers, spans,
bars, points) over linear axes; a plotting library would bring a browser runtime or a
build step for that, and the page must open offline with nothing fetched. Every number
is formatted here, in one way, so the same data gives the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Final

__all__ = ["PALETTE", "Chart", "LinearScale", "nice_ticks", "number"]

#: Colours for series in order (colour-blind safe: Okabe-Ito, then Tol's muted set).
PALETTE: Final = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#f0e442",
    "#332288",
    "#88ccee",
    "#44aa99",
    "#999933",
    "#aa4499",
    "#882255",
)


def number(value: float) -> str:
    """``value`` as an axis or table label: thousands separated, at most two decimals."""
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _coordinate(value: float) -> str:
    return f"{value:.1f}"


def nice_ticks(low: float, high: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """About ``count`` round tick values (steps of 1, 2 or 5 times a power of ten) covering low..high.

    ``integer``: steps of at least 1, for what only comes in whole numbers (turns, calls, items).
    """
    if high <= low:
        high = low + 1
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if integer:
        step = max(step, 1)
    first = math.floor(low / step) * step
    ticks: list[float] = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 10))
    return ticks


class LinearScale:
    """Maps a domain (data units) onto a range (pixels), linearly."""

    def __init__(self, domain: tuple[float, float], pixels: tuple[float, float]) -> None:
        low, high = domain
        self.domain = (low, high if high > low else low + 1)
        self.pixels = pixels

    def __call__(self, value: float) -> float:
        (d0, d1), (p0, p1) = self.domain, self.pixels
        return p0 + (value - d0) * (p1 - p0) / (d1 - d0)


class Chart:
    """One chart: a plot area with an x and a y axis, and the marks drawn on it.

    Marks are added in drawing order; :meth:`svg` returns the whole ``<svg>`` element.
    ``x_ticks`` / ``y_ticks`` are the tick values (their extremes are the axes' domains);
    ``x_labels`` / ``y_labels`` name ticks by text instead of numbers (a categorical axis); ``x_domain`` /
    ``y_domain`` set an axis's extent where it is not its ticks' (a categorical axis, or
    one without ticks).
    """

    RIGHT: Final = 16
    TOP: Final = 14
    BOTTOM: Final = 42

    def __init__(
        self,
        *,
        title: str,
        width: int,
        height: int,
        x_ticks: Sequence[float],
        y_ticks: Sequence[float],
        x_unit: str,
        y_unit: str,
        y_format: str = "number",
        x_labels: Sequence[str] | None = None,
        y_labels: Sequence[str] | None = None,
        x_domain: tuple[float, float] | None = None,
        y_domain: tuple[float, float] | None = None,
        left: int = 64,
    ) -> None:
        self.title = title
        #: Room left of the plot for the y ticks' labels and the y unit.
        self.left = left
        self.width = width
        self.height = height
        self.x_ticks = list(x_ticks)
        self.y_ticks = list(y_ticks)
        self.x_unit = x_unit
        self.y_unit = y_unit
        self.y_format = y_format
        self.x_labels = list(x_labels) if x_labels is not None else None
        self.y_labels = list(y_labels) if y_labels is not None else None
        x_extent = x_domain or (self.x_ticks[0], self.x_ticks[-1])
        self.x = LinearScale(x_extent, (self.left, width - self.RIGHT))
        self.y = LinearScale(
            y_domain or (self.y_ticks[0], self.y_ticks[-1]), (height - self.BOTTOM, self.TOP)
        )
        self._marks: list[str] = []

    # ------------------------------------------------------------------ marks

    def stacked_areas(self, xs: Sequence[float], layers: Sequence[tuple[str, str, Sequence[float]]]) -> None:
        """Layers (name, colour, values at ``xs``) stacked from the bottom, drawn as steps."""
        base = [0.0] * len(xs)
        half = (xs[1] - xs[0]) / 2 if len(xs) > 1 else 0.5
        for name, colour, values in layers:
            top = [b + v for b, v in zip(base, values, strict=True)]
            upper: list[str] = []
            lower: list[str] = []
            for x, t, b in zip(xs, top, base, strict=True):
                left, right = self.x(x - half), self.x(x + half)
                upper += [
                    f"{_coordinate(left)},{_coordinate(self.y(t))}",
                    f"{_coordinate(right)},{_coordinate(self.y(t))}",
                ]
                lower += [
                    f"{_coordinate(left)},{_coordinate(self.y(b))}",
                    f"{_coordinate(right)},{_coordinate(self.y(b))}",
                ]
            points = " ".join(upper + lower[::-1])
            self._marks.append(
                f'<polygon points="{points}" fill="{colour}" fill-opacity="0.85" stroke="none">'
                f"<title>{escape(name)}</title></polygon>"
            )
            base = top

    def line(
        self, xs: Sequence[float], ys: Sequence[float | None], *, colour: str, name: str, dash: bool = False
    ) -> None:
        """A polyline through the points; a ``None`` value breaks the line."""
        runs: list[list[str]] = [[]]
        for x, y in zip(xs, ys, strict=True):
            if y is None:
                runs.append([])
            else:
                runs[-1].append(f"{_coordinate(self.x(x))},{_coordinate(self.y(y))}")
        style = ' stroke-dasharray="5 3"' if dash else ""
        for run in runs:
            if run:
                self._marks.append(
                    f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" '
                    f'stroke-width="1.5"{style}>'
                    f"<title>{escape(name)}</title></polyline>"
                )

    #: Most markers drawn with a guide line down the plot: more would hide the plot.
    GUIDES: Final = 60

    def markers(self, items: Sequence[tuple[float, str]], *, colour: str) -> None:
        """A downward triangle above the plot area at each x, with a hover text (and a guide line
        down the plot while there are at most :attr:`GUIDES` of them)."""
        top = self.TOP
        guides = len(items) <= self.GUIDES
        for x, text in items:
            px = self.x(x)
            self._marks.append(
                f'<path d="M{_coordinate(px - 4)},{top - 8} L{_coordinate(px + 4)},{top - 8} '
                f'L{_coordinate(px)},{top - 1} Z" fill="{colour}"><title>{escape(text)}</title></path>'
            )
            if guides:
                self._marks.append(
                    f'<line x1="{_coordinate(px)}" x2="{_coordinate(px)}" y1="{top}" '
                    f'y2="{self.height - self.BOTTOM}" '
                    f'stroke="{colour}" stroke-opacity="0.25"/>'
                )

    def bars(self, items: Sequence[tuple[float, float, float, str, str]]) -> None:
        """Rectangles (x, width in x units, height in y units from ``bottom``), each colour and title."""
        for x, width, height, colour, text in items:
            left, right = self.x(x), self.x(x + width)
            self._marks.append(
                f'<rect x="{_coordinate(left)}" y="{_coordinate(self.y(height))}" '
                f'width="{_coordinate(max(right - left, 0.6))}" '
                f'height="{_coordinate(max(self.y(0) - self.y(height), 0.0))}" fill="{colour}">'
                f"<title>{escape(text)}</title></rect>"
            )

    def stacked_bars(self, items: Sequence[tuple[float, float, Sequence[tuple[float, str, str]]]]) -> None:
        """Bars (x, width, [(value, colour, title), ...]) whose parts stack from zero."""
        for x, width, parts in items:
            base = 0.0
            left, right = self.x(x), self.x(x + width)
            for value, colour, text in parts:
                if value <= 0:
                    continue
                top, bottom = self.y(base + value), self.y(base)
                self._marks.append(
                    f'<rect x="{_coordinate(left)}" y="{_coordinate(top)}" '
                    f'width="{_coordinate(max(right - left, 0.6))}" height="{_coordinate(bottom - top)}" '
                    f'fill="{colour}"><title>{escape(text)}</title></rect>'
                )
                base += value

    def spans(self, items: Sequence[tuple[float, float, float, str, str]]) -> None:
        """Horizontal bands (x from, x to, row in y units, colour, title), each 0.8 of a row high."""
        for x0, x1, row, colour, text in items:
            left, right = self.x(x0), self.x(x1)
            top, bottom = self.y(row + 0.9), self.y(row + 0.1)
            self._marks.append(
                f'<rect x="{_coordinate(left)}" y="{_coordinate(top)}" '
                f'width="{_coordinate(max(right - left, 2.0))}" '
                f'height="{_coordinate(bottom - top)}" fill="{colour}" stroke="white" stroke-width="0.5">'
                f"<title>{escape(text)}</title></rect>"
            )

    def points(self, items: Sequence[tuple[float, float, str, str]]) -> None:
        """Dots (x, y, colour, title)."""
        for x, y, colour, text in items:
            self._marks.append(
                f'<circle cx="{_coordinate(self.x(x))}" cy="{_coordinate(self.y(y))}" r="2.2" '
                f'fill="{colour}" '
                f'fill-opacity="0.7"><title>{escape(text)}</title></circle>'
            )

    # ------------------------------------------------------------------ output

    def _y_text(self, index: int, value: float) -> str:
        """The label of the ``index``-th y tick, ``value``: its name, else its number."""
        return escape(self.y_labels[index]) if self.y_labels is not None else self._y_label(value)

    def _y_label(self, value: float) -> str:
        return f"{value:.0%}" if self.y_format == "percent" else number(value)

    def _axes(self) -> list[str]:
        left, right = self.left, self.width - self.RIGHT
        top, bottom = self.TOP, self.height - self.BOTTOM
        out = [
            f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
            'fill="#fbfbfb" stroke="#bbb"/>'
        ]
        for index, value in enumerate(self.y_ticks):
            y = _coordinate(self.y(value))
            out.append(f'<line x1="{left}" x2="{right}" y1="{y}" y2="{y}" stroke="#e6e6e6"/>')
            out.append(
                f'<text x="{left - 6}" y="{y}" dy="0.32em" text-anchor="end" class="tick">'
                f"{self._y_text(index, value)}</text>"
            )
        for index, value in enumerate(self.x_ticks):
            x = _coordinate(self.x(value))
            label = self.x_labels[index] if self.x_labels is not None else number(value)
            out.append(f'<line x1="{x}" x2="{x}" y1="{bottom}" y2="{bottom + 5}" stroke="#555"/>')
            out.append(
                f'<text x="{x}" y="{bottom + 16}" text-anchor="middle" class="tick">{escape(label)}</text>'
            )
        out.append(
            f'<text x="{(left + right) / 2:.1f}" y="{self.height - 6}" text-anchor="middle" class="unit">'
            f"{escape(self.x_unit)}</text>"
        )
        out.append(
            f'<text transform="translate(14,{(top + bottom) / 2:.1f}) rotate(-90)" text-anchor="middle" '
            f'class="unit">{escape(self.y_unit)}</text>'
        )
        return out

    def svg(self) -> str:
        """The chart as an ``<svg>`` element (the title is its accessible name)."""
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" role="img" aria-label="{escape(self.title)}">'
        )
        axes = self._axes()
        # The grid first, the marks over it, the frame's ticks last.
        return "\n".join([head, *axes[:1], *axes[1:], *self._marks, "</svg>"])
