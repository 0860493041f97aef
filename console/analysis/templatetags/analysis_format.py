"""Numbers with intervals, written the same way everywhere on the operating-points page."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()
DASH = "—"


def _parts(cell: Any) -> tuple[float | None, float | None, float | None] | None:
    if not isinstance(cell, dict):
        return None
    return cell.get("value"), cell.get("low"), cell.get("high")


@register.filter
def share(cell: Any, digits: int = 1) -> str:
    """``{value, low, high}`` of a share as percentages: ``16.5% (16.4–16.6)``."""
    parts = _parts(cell)
    if parts is None or parts[0] is None:
        return DASH
    value, low, high = (None if x is None else 100 * x for x in parts)
    return f"{value:.{digits}f}% ({low:.{digits}f}–{high:.{digits}f})"


@register.filter
def per_thousand(cell: Any) -> str:
    """``{value, low, high}`` per 1,000 questions: ``16.6 (15.4–17.9)``."""
    parts = _parts(cell)
    if parts is None or parts[0] is None:
        return DASH
    value, low, high = parts
    return f"{value:.1f} ({low:.1f}–{high:.1f})"


@register.filter
def odds(cell: Any) -> str:
    """An exchange rate; ``None`` inside the cell means unbounded (a band with no wrong answer)."""
    parts = _parts(cell)
    if parts is None:
        return DASH

    def number(x: float | None) -> str:
        return "∞" if x is None else f"{x:.2f}" if x < 10 else f"{x:.1f}"

    value, low, high = parts
    return f"{number(value)} ({number(low)}–{number(high)})"


@register.filter
def number(value: Any, digits: int = 3) -> str:
    if value is None:
        return DASH
    return f"{value:.{digits}f}"


@register.filter
def percent(value: Any, digits: int = 1) -> str:
    if value is None:
        return DASH
    return f"{100 * value:.{digits}f}%"
