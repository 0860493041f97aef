"""Server-side plots as inline SVG: pure functions from numbers to markup, no JavaScript.

Each function returns a complete ``<svg>`` element with a ``<title>`` and ``<desc>`` (read by
screen readers), axes with ticks, and the data. Text is escaped; numbers are rounded to 0.1 px.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

WRONG_COLOUR = "#b42318"
WITHHELD_COLOUR = "#2f5bd3"
INK = "#1d2430"
MUTED = "#667085"
GRID = "#e3e7ee"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]: steps of 1, 2 or 5 times a power of ten."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw_step = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw_step))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw_step)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _label(value: float) -> str:
    return f"{value:g}" if abs(value) >= 1 or value == 0 else f"{value:.2f}".rstrip("0")


@dataclass
class Plot:
    """A rectangle of data coordinates drawn into an SVG canvas with margins for the axes."""

    x_range: tuple[float, float]
    y_range: tuple[float, float]
    width: int = 720
    height: int = 320
    margin: tuple[int, int, int, int] = (16, 20, 46, 58)  # top, right, bottom, left
    parts: list[str] = field(default_factory=list)

    @property
    def left(self) -> float:
        return self.margin[3]

    @property
    def right(self) -> float:
        return self.width - self.margin[1]

    @property
    def top(self) -> float:
        return self.margin[0]

    @property
    def bottom(self) -> float:
        return self.height - self.margin[2]

    def x(self, value: float) -> float:
        low, high = self.x_range
        return self.left + (value - low) / (high - low) * (self.right - self.left)

    def y(self, value: float) -> float:
        low, high = self.y_range
        clipped = min(max(value, low), high)
        return self.bottom - (clipped - low) / (high - low) * (self.bottom - self.top)

    def point(self, x: float, y: float) -> str:
        return f"{_fmt(self.x(x))},{_fmt(self.y(y))}"

    def axes(
        self,
        x_label: str,
        y_label: str,
        *,
        x_ticks: Sequence[float] | None = None,
        y_ticks: Sequence[float] | None = None,
    ) -> None:
        for value in y_ticks if y_ticks is not None else nice_ticks(*self.y_range):
            y = _fmt(self.y(value))
            self.parts.append(
                f'<line x1="{_fmt(self.left)}" x2="{_fmt(self.right)}" y1="{y}" y2="{y}" '
                f'stroke="{GRID}" class="gridline"/>'
            )
            self.parts.append(
                f'<text x="{_fmt(self.left - 8)}" y="{y}" dy="0.32em" text-anchor="end" '
                f'class="tick">{escape(_label(value))}</text>'
            )
        for value in x_ticks if x_ticks is not None else nice_ticks(*self.x_range):
            x = _fmt(self.x(value))
            self.parts.append(
                f'<line x1="{x}" x2="{x}" y1="{_fmt(self.bottom)}" y2="{_fmt(self.bottom + 5)}" '
                f'stroke="{MUTED}" class="axis"/>'
            )
            self.parts.append(
                f'<text x="{x}" y="{_fmt(self.bottom + 18)}" text-anchor="middle" '
                f'class="tick">{escape(_label(value))}</text>'
            )
        self.parts.append(
            f'<line x1="{_fmt(self.left)}" x2="{_fmt(self.right)}" y1="{_fmt(self.bottom)}" '
            f'y2="{_fmt(self.bottom)}" stroke="{MUTED}" class="axis"/>'
        )
        self.parts.append(
            f'<text x="{_fmt((self.left + self.right) / 2)}" y="{self.height - 6}" '
            f'text-anchor="middle" class="axis-label">{escape(x_label)}</text>'
        )
        middle = _fmt((self.top + self.bottom) / 2)
        self.parts.append(
            f'<text transform="translate(14,{middle}) rotate(-90)" text-anchor="middle" '
            f'class="axis-label">{escape(y_label)}</text>'
        )

    def band(self, xs: Sequence[float], lows: Sequence[float], highs: Sequence[float], colour: str) -> None:
        if len(xs) < 2:
            return
        upper = [self.point(x, h) for x, h in zip(xs, highs, strict=True)]
        lower = [self.point(x, lo) for x, lo in zip(xs, lows, strict=True)]
        self.parts.append(
            f'<polygon points="{" ".join(upper + lower[::-1])}" fill="{colour}" fill-opacity="0.14" stroke="none"/>'
        )

    def line(
        self, xs: Sequence[float], ys: Sequence[float], colour: str, *, dashed: bool = False, width: float = 2.2
    ) -> None:
        if not xs:
            return
        points = [self.point(x, y) for x, y in zip(xs, ys, strict=True)]
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        self.parts.append(
            f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" '
            f'stroke-width="{width}" stroke-linejoin="round"{dash}/>'
        )

    def dot(self, x: float, y: float, colour: str, *, radius: float = 4.0, title: str = "") -> None:
        tooltip = f"<title>{escape(title)}</title>" if title else ""
        self.parts.append(
            f'<circle cx="{_fmt(self.x(x))}" cy="{_fmt(self.y(y))}" r="{_fmt(radius)}" '
            f'fill="{colour}" stroke="#fff" stroke-width="1.5">{tooltip}</circle>'
        )

    def text(
        self,
        x: float,
        y: float,
        content: str,
        *,
        anchor: str = "start",
        css: str = "note",
        dx: float = 0,
        dy: float = 0,
    ) -> None:
        self.parts.append(
            f'<text x="{_fmt(self.x(x) + dx)}" y="{_fmt(self.y(y) + dy)}" text-anchor="{anchor}" '
            f'class="{css}">{escape(content)}</text>'
        )

    def legend(self, entries: Sequence[tuple[str, str]]) -> None:
        x = self.left + 12
        for name, colour in entries:
            y = self.top + 10
            self.parts.append(f'<rect x="{_fmt(x)}" y="{_fmt(y - 5)}" width="14" height="4" fill="{colour}"/>')
            self.parts.append(f'<text x="{_fmt(x + 19)}" y="{_fmt(y)}" dy="0.1em" class="legend">{escape(name)}</text>')
            x += 26 + 7.2 * len(name)

    def svg(self, title: str, description: str, css_class: str) -> str:
        body = "".join(self.parts)
        return (
            f'<svg class="{css_class}" viewBox="0 0 {self.width} {self.height}" role="img" '
            f'xmlns="http://www.w3.org/2000/svg" aria-labelledby="{css_class}-title {css_class}-desc">'
            f'<title id="{css_class}-title">{escape(title)}</title>'
            f'<desc id="{css_class}-desc">{escape(description)}</desc>{body}</svg>'
        )


def _value(cell: dict[str, Any] | None, key: str = "value") -> float | None:
    if not cell:
        return None
    value = cell.get(key)
    return None if value is None else float(value)


def tradeoff_chart(
    curve: Sequence[dict[str, Any]], marked: Sequence[float] = (), recommended: float | None = None
) -> str:
    """Correct answers withheld and wrong answers served per 1,000 questions against the cutoff,
    each with its interval as a shaded band; the table's cutoffs are marked on both lines.

    ``curve`` holds operating-point rows as the API returns them (``cutoff``,
    ``correct_withheld_per_1000`` and ``wrong_served_per_1000`` as ``{value, low, high}``);
    a row whose estimate is missing (no graded data at that cutoff) breaks that line: no
    segment is drawn across it, and an estimate with no neighbour is a lone point. Every point
    shows its value and interval on hover.
    """
    # Each line is a list of segments: a cutoff whose estimate is missing (no graded data there)
    # ends the segment, so no line is drawn across it.
    series: dict[str, list[list[tuple]]] = {"wrong_served_per_1000": [[]], "correct_withheld_per_1000": [[]]}
    for row in curve:
        if row.get("cutoff") is None:
            continue
        for key, segments in series.items():
            value = _value(row.get(key))
            if value is None:
                if segments[-1]:
                    segments.append([])
                continue
            segments[-1].append((row["cutoff"], value, _value(row[key], "low"), _value(row[key], "high")))
    highs = [p[3] for segments in series.values() for segment in segments for p in segment if p[3] is not None]
    top = max(highs, default=1.0) or 1.0
    cutoffs = [row["cutoff"] for row in curve if row.get("cutoff") is not None]
    x_range = (min(cutoffs + list(marked), default=0.0), max(cutoffs + list(marked), default=1.0))
    if x_range[1] <= x_range[0]:
        x_range = (x_range[0] - 0.5, x_range[0] + 0.5)
    y_ticks = nice_ticks(0.0, top * 1.05)
    plot = Plot(x_range=x_range, y_range=(0.0, max(y_ticks[-1], top)), height=340, margin=(34, 20, 46, 58))
    plot.axes("cutoff (served when gate score ≥ cutoff)", "per 1,000 questions", y_ticks=y_ticks)
    colours = {"wrong_served_per_1000": WRONG_COLOUR, "correct_withheld_per_1000": WITHHELD_COLOUR}
    names = {"wrong_served_per_1000": "wrong served", "correct_withheld_per_1000": "correct withheld"}
    for key, segments in series.items():
        for segment in segments:
            banded = [p for p in segment if p[2] is not None and p[3] is not None]
            plot.band([p[0] for p in banded], [p[2] for p in banded], [p[3] for p in banded], colours[key])
            if len(segment) > 1:
                plot.line([p[0] for p in segment], [p[1] for p in segment], colours[key])
            # Every estimate is a point with its value on hover; a lone one is the only mark there.
            for cutoff, value, low, high in segment:
                interval = f" ({low:.1f}–{high:.1f})" if low is not None and high is not None else ""
                plot.dot(
                    cutoff,
                    value,
                    colours[key],
                    radius=2.6,
                    title=f"cutoff {cutoff:g}: {value:.1f}{interval} {names[key]} per 1,000",
                )
    if recommended is not None:
        x = _fmt(plot.x(recommended))
        plot.parts.append(
            f'<line x1="{x}" x2="{x}" y1="{_fmt(plot.top)}" y2="{_fmt(plot.bottom)}" '
            f'stroke="{INK}" stroke-dasharray="4 4" class="recommended-line"/>'
        )
        # Keep the label inside the canvas near either edge.
        share = (recommended - plot.x_range[0]) / (plot.x_range[1] - plot.x_range[0])
        anchor = "end" if share > 0.85 else "start" if share < 0.15 else "middle"
        plot.text(recommended, plot.y_range[1], f"recommended {recommended:g}", anchor=anchor, dy=-8)
    points = {key: [p for segment in segments for p in segment] for key, segments in series.items()}
    for key in series:
        by_cutoff = {p[0]: p[1] for p in points[key]}
        for cutoff in marked:
            if cutoff in by_cutoff:
                plot.dot(
                    cutoff,
                    by_cutoff[cutoff],
                    colours[key],
                    title=f"cutoff {cutoff:g}: {by_cutoff[cutoff]:.1f} {names[key]} per 1,000",
                )
    plot.legend([("wrong answers served", WRONG_COLOUR), ("correct answers withheld", WITHHELD_COLOUR)])
    description = "; ".join(
        f"cutoff {p[0]:g}: {p[1]:.1f} {names[key]}" for key in series for p in points[key] if p[0] in set(marked)
    )
    return plot.svg(
        "Correct withheld and wrong served per 1,000 questions by cutoff",
        description or "No graded data yet.",
        "tradeoff-chart",
    )


def reliability_diagram(bins: Sequence[dict[str, Any]]) -> str:
    """Observed accuracy per score bin against the bin's mean score, with the diagonal of perfect
    calibration; each bin is a bar over its score range and a dot at its mean score, and its
    item count is written under the axis."""
    plot = Plot(x_range=(0.0, 1.0), y_range=(0.0, 1.0), width=420, height=380, margin=(16, 16, 62, 52))
    plot.axes("gate score (bin mean)", "share correct", x_ticks=nice_ticks(0.0, 1.0), y_ticks=nice_ticks(0.0, 1.0))
    plot.parts.append(
        f'<line x1="{_fmt(plot.x(0))}" y1="{_fmt(plot.y(0))}" x2="{_fmt(plot.x(1))}" '
        f'y2="{_fmt(plot.y(1))}" stroke="{MUTED}" stroke-dasharray="5 4" class="axis"/>'
    )
    described = []
    for b in bins:
        if not b.get("count") or b.get("accuracy") is None:
            continue
        x0, x1 = plot.x(b["low"]), plot.x(b["high"])
        y = plot.y(b["accuracy"])
        plot.parts.append(
            f'<rect x="{_fmt(x0 + 1)}" y="{_fmt(y)}" width="{_fmt(max(x1 - x0 - 2, 1))}" '
            f'height="{_fmt(plot.bottom - y)}" fill="{WITHHELD_COLOUR}" fill-opacity="0.18"/>'
        )
        plot.dot(
            b["mean_score"],
            b["accuracy"],
            WITHHELD_COLOUR,
            title=f"[{b['low']:g}, {b['high']:g}]: {b['count']} items, mean score {b['mean_score']:.3f}, "
            f"{b['accuracy']:.1%} correct",
        )
        plot.parts.append(
            f'<text x="{_fmt((x0 + x1) / 2)}" y="{_fmt(plot.bottom + 32)}" text-anchor="middle" '
            f'class="count">{b["count"]}</text>'
        )
        described.append(f"{b['low']:g}–{b['high']:g}: {b['accuracy']:.0%} correct of {b['count']}")
    plot.parts.append(
        f'<text x="{_fmt(plot.left)}" y="{_fmt(plot.bottom + 32)}" dx="-8" text-anchor="end" class="count">n</text>'
    )
    return plot.svg("Reliability diagram", "; ".join(described) or "No graded data yet.", "reliability-chart")


def risk_coverage_chart(points: Sequence[dict[str, Any]], aurc: float | None) -> str:
    """Risk (share wrong among served) against coverage (share served) as the cutoff falls
    through every distinct score; the area under it is the AURC."""
    ordered = sorted(points, key=lambda p: p["coverage"])
    top = max((p["risk"] for p in ordered), default=1.0)
    y_ticks = nice_ticks(0.0, max(top * 1.1, 0.05))
    plot = Plot(x_range=(0.0, 1.0), y_range=(0.0, y_ticks[-1]), width=420, height=380, margin=(16, 16, 46, 52))
    plot.axes("coverage (share served)", "risk (share wrong among served)", y_ticks=y_ticks)
    # Risk is a step function of coverage: on (previous coverage, coverage] it takes the value
    # reached at that point's cutoff, which is how the AURC integrates it.
    xs, ys, previous = [], [], 0.0
    for p in ordered:
        xs += [previous, p["coverage"]]
        ys += [p["risk"], p["risk"]]
        previous = p["coverage"]
    if ordered:
        area = [plot.point(0, 0)] + [plot.point(x, y) for x, y in zip(xs, ys, strict=True)] + [plot.point(xs[-1], 0)]
        plot.parts.append(f'<polygon points="{" ".join(area)}" fill="{WRONG_COLOUR}" fill-opacity="0.1"/>')
        plot.line(xs, ys, WRONG_COLOUR, width=2)
        # A hover value on each point while they stay few enough to be told apart.
        if len(ordered) <= 200:
            for p in ordered:
                plot.dot(
                    p["coverage"],
                    p["risk"],
                    WRONG_COLOUR,
                    radius=2.2,
                    title=f"coverage {p['coverage']:.1%}: risk {p['risk']:.1%}",
                )
        if aurc is not None:
            plot.text(0.98, y_ticks[-1], f"AURC {aurc:.4f}", anchor="end", dy=16)
    description = (
        f"{len(ordered)} points; risk at full coverage {ordered[-1]['risk']:.3f}" if ordered else "No graded data yet."
    )
    return plot.svg("Risk-coverage curve", description, "risk-coverage-chart")
