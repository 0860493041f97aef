"""How decisions' numbers are written on the pages that list and show them."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

# Scores print with at least this many decimals, and with more only where fewer would hide which
# side of the cutoff a score is on (0.6999 beside a cutoff of 0.7 must not read 0.700 | 0.700).
MIN_DIGITS = 3
MAX_DIGITS = 12


def separating_digits(score: float, cutoff: float, minimum: int = MIN_DIGITS) -> int:
    """The fewest decimals (at least ``minimum``) at which ``score`` and ``cutoff`` print
    differently, or ``minimum`` when they are equal."""
    if score == cutoff:
        return minimum
    for digits in range(minimum, MAX_DIGITS + 1):
        if f"{score:.{digits}f}" != f"{cutoff:.{digits}f}":
            return digits
    return MAX_DIGITS


def _beside(value: Any, other: Any, minimum: int) -> str:
    if value is None:
        return "—"
    digits = minimum if other is None else separating_digits(float(value), float(other), minimum)
    return f"{float(value):.{digits}f}"


@register.filter
def beside(value: Any, other: Any) -> str:
    """``value`` with enough decimals to tell it from ``other`` (a score beside its cutoff, or the
    cutoff beside the score); both sides of the pair use the same count, so they line up."""
    return _beside(value, other, MIN_DIGITS)


@register.filter
def beside_precise(value: Any, other: Any) -> str:
    """As ``beside`` with at least four decimals, for the page about one decision."""
    return _beside(value, other, 4)
