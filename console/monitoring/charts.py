"""SVG charts of the monitoring page, drawn with the operating-points page's Plot."""

from __future__ import annotations

from collections.abc import Sequence

from console.analysis.charts import GRID, WITHHELD_COLOUR, WRONG_COLOUR, Plot

SIGNED_COLOUR = "#475467"


def abstention_chart(
    days: Sequence[str],
    rates: Sequence[float],
    lower: Sequence[float],
    upper: Sequence[float],
    baseline: float,
    alarm_days: Sequence[str] = (),
) -> str:
    """Daily abstention at the signed cutoff with its 3-sigma control band; outside days and alarm days marked."""
    if not days:
        return ""
    xs = list(range(len(days)))
    top = max([*rates, *upper, baseline]) if rates else 1.0
    plot = Plot(x_range=(-0.5, max(len(days) - 0.5, 0.5)), y_range=(0.0, min(1.0, top * 1.15 + 0.01)))
    step = max(1, len(days) // 8)
    plot.axes("day (UTC)", "abstention at the signed cutoff", x_ticks=[])
    for i in range(0, len(days), step):
        plot.text(i, 0.0, days[i][5:], anchor="middle", css="tick", dy=18)
    plot.band(xs, lower, upper, SIGNED_COLOUR)
    plot.line([xs[0], xs[-1]], [baseline, baseline], SIGNED_COLOUR, dashed=True, width=1.5)
    plot.line(xs, rates, WITHHELD_COLOUR)
    marked = set(alarm_days)
    for x, day, rate, low, high in zip(xs, days, rates, lower, upper, strict=True):
        outside = rate < low or rate > high
        colour = WRONG_COLOUR if outside or day in marked else WITHHELD_COLOUR
        plot.dot(
            x,
            rate,
            colour,
            radius=5.0 if day in marked else 3.5,
            title=f"{day}: {rate:.1%} (limits {low:.1%} to {high:.1%}){' - alarm' if day in marked else ''}",
        )
    plot.legend(
        [
            ("daily rate", WITHHELD_COLOUR),
            ("signed rate and 3-sigma band", SIGNED_COLOUR),
            ("outside / alarm", WRONG_COLOUR),
        ]
    )
    return plot.svg(
        "Daily abstention at the signed cutoff",
        f"{len(days)} days after signing against the signing window's rate {baseline:.1%}",
        "monitor-abstention",
    )


def histogram_chart(signed: Sequence[float], recent: Sequence[float]) -> str:
    """Score shares per 0.1 bin: the signing window against the last 7 days."""

    def shares(counts: Sequence[float]) -> list[float]:
        total = sum(counts)
        return [c / total if total else 0.0 for c in counts]

    a, b = shares(signed), shares(recent)
    plot = Plot(x_range=(0.0, 1.0), y_range=(0.0, max([*a, *b, 0.05]) * 1.15))
    plot.axes("gate score", "share of decisions")
    for i, (left, right) in enumerate(zip(a, b, strict=True)):
        x0 = i / 10
        for offset, share, colour in ((0.01, left, SIGNED_COLOUR), (0.05, right, WITHHELD_COLOUR)):
            x1, x2 = plot.x(x0 + offset), plot.x(x0 + offset + 0.04)
            y1, y0 = plot.y(share), plot.y(0.0)
            plot.parts.append(
                f'<rect x="{x1:.1f}" y="{y1:.1f}" width="{x2 - x1:.1f}" height="{y0 - y1:.1f}" '
                f'fill="{colour}" stroke="{GRID}"><title>{x0:.1f}-{x0 + 0.1:.1f}: '
                f"{share:.1%}</title></rect>"
            )
    plot.legend([("signing window", SIGNED_COLOUR), ("last 7 days", WITHHELD_COLOUR)])
    return plot.svg(
        "Score distribution",
        "Share of decisions per 0.1 score bin, signing window against the last 7 days",
        "monitor-scores",
    )
