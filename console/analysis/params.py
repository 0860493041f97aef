"""Query parameters of the statistics endpoints and the operating-points page, parsed once.

Every parameter is checked; all problems are reported together as
``InvalidInput(details=[{"field", "code", "message"}, ...])`` (each also naming its ``parameter``, the
key these details had first) (400 in the API, messages beside the
form on the page). Unknown parameters are refused too, so a misspelt filter
(``segments.language``) cannot silently widen the population.

Filters (all optional): ``from`` and ``to`` are dates (YYYY-MM-DD, UTC days, both inclusive, as
on the refusals page); ``version.<key>=<value>`` and ``segment.<key>=<value>`` keep decisions
whose versions / segments hold that key with that (string) value. Several keys combine with AND.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from console.core.params import PAIR_KEY, QueryReader, raise_for, to_float
from console.ledger.selectors import DecisionFilters
from console.stats.certification import DEFAULT_GRID
from console.stats.intervals import INTERVAL_METHODS

DEFAULT_CUTOFFS: tuple[float, ...] = (0.5, 0.7, 0.85, 0.9, 0.95)
MAX_CUTOFFS = 50
# The cost calculator's defaults (c_w, c_a), which a long route's utility column uses unless given.
DEFAULT_COSTS: tuple[float, float] = (20.0, 0.5)
MAX_COST = 1e6
MAX_GRID = 1001
MAX_BINS = 100
FILTER_PARAMETERS = ("from", "to")
FILTER_PREFIXES = ("version.", "segment.")


@dataclass(frozen=True)
class Window:
    """Which decisions of the route count: a date window and version / segment equalities."""

    date_from: date | None = None
    date_to: date | None = None
    versions: tuple[tuple[str, str], ...] = ()
    segments: tuple[tuple[str, str], ...] = ()

    def decision_filters(self) -> DecisionFilters:
        return DecisionFilters(
            outcome=None,
            date_from=self.date_from,
            date_to=self.date_to,
            versions=dict(self.versions) or None,
            segments=dict(self.segments) or None,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.date_from.isoformat() if self.date_from else None,
            "to": self.date_to.isoformat() if self.date_to else None,
            "versions": dict(self.versions),
            "segments": dict(self.segments),
        }

    def query_items(self) -> list[tuple[str, str]]:
        """The window as query-string pairs, for links that keep it."""
        items = [("from", self.date_from.isoformat())] if self.date_from else []
        items += [("to", self.date_to.isoformat())] if self.date_to else []
        items += [(f"version.{k}", v) for k, v in self.versions]
        items += [(f"segment.{k}", v) for k, v in self.segments]
        return items

    def describe(self) -> str:
        """In words, for statements: "decisions from 2026-10-01 to 2026-10-31, language=de"."""
        if self.date_from and self.date_to:
            when = f"decisions from {self.date_from} to {self.date_to}"
        elif self.date_from:
            when = f"decisions from {self.date_from} on"
        elif self.date_to:
            when = f"decisions up to {self.date_to}"
        else:
            when = "all decisions to date"
        if self.segments:
            when += " with " + ", ".join(f"{k}={v}" for k, v in self.segments)
        return when


@dataclass(frozen=True)
class OperatingPointsQuery:
    window: Window = field(default_factory=Window)
    cutoffs: tuple[float, ...] = DEFAULT_CUTOFFS
    confidence: float = 0.95
    interval: str = "wilson"
    costs: tuple[float, float] = DEFAULT_COSTS
    """(c_w, c_a) for a long route's utility column; the cost calculator's defaults."""

    def cache_params(self) -> dict[str, Any]:
        return {
            "window": self.window.as_dict(),
            "cutoffs": sorted(self.cutoffs),
            "confidence": self.confidence,
            "interval": self.interval,
            "costs": list(self.costs),
        }


@dataclass(frozen=True)
class CertifiedCutoffQuery:
    window: Window = field(default_factory=Window)
    alpha: float = 0.1
    delta: float = 0.05
    grid: tuple[float, ...] = DEFAULT_GRID

    def cache_params(self) -> dict[str, Any]:
        return {
            "window": self.window.as_dict(),
            "alpha": self.alpha,
            "delta": self.delta,
            "grid": sorted(set(self.grid)),
        }


@dataclass(frozen=True)
class CalibrationQuery:
    window: Window = field(default_factory=Window)
    bins: int = 10
    by: tuple[str, str] | None = None
    """("segment" | "version", key) to report per value of that segment or version."""
    points: int | None = None
    """Thin the risk-coverage curve to at most this many points (AURC always uses all)."""

    def cache_params(self) -> dict[str, Any]:
        return {
            "window": self.window.as_dict(),
            "bins": self.bins,
            "by": list(self.by) if self.by else None,
            "points": self.points,
        }


class _Reader(QueryReader):
    """The generic reader, plus the statistics' own shapes: lists of cutoffs and the window."""

    def number_list(
        self, name: str, default: tuple[float, ...], limit: int, *, ranges: bool = False
    ) -> tuple[float, ...]:
        """Comma-separated numbers; with `ranges`, a part may also be `start:stop:step` (see _range)."""
        raw = self.raw(name)
        if raw is None:
            return default
        parts = [part.strip() for part in raw.split(",") if part.strip()]
        if not parts:
            self.error(name, "needs at least one number (comma-separated).")
            return default
        if len(parts) > limit:
            self.error(name, f"takes at most {limit} numbers; got {len(parts)}.")
            return default
        numbers = [_range(part) if ranges and ":" in part else to_float(part) for part in parts]
        bad = [part for part, value in zip(parts, numbers, strict=True) if value is None]
        if bad:
            shape = "finite numbers or start:stop:step ranges (start <= stop, step > 0)" if ranges else "finite numbers"
            self.error(name, f"must be {shape}; not {', '.join(repr(b[:20]) for b in bad[:3])}.")
            return default
        total = sum(value.count if isinstance(value, _Range) else 1 for value in numbers)
        if total > limit:
            self.error(name, f"takes at most {limit} numbers; got {total if total < 10**9 else 'over a billion'}.")
            return default
        values = [v for value in numbers for v in (value.values() if isinstance(value, _Range) else [value])]
        if len(set(values)) != len(values):
            self.error(name, "must not repeat a value.")
            return default
        return tuple(values)

    def window(self) -> Window:
        date_from, date_to = self.day("from"), self.day("to")
        if date_from and date_to and date_from > date_to:
            self.error("from", f"({date_from}) is after to ({date_to}).")
        return Window(date_from, date_to, self.pairs("version."), self.pairs("segment."))

    def refuse_unknown(self, known: Iterable[str], prefixes: tuple[str, ...] = FILTER_PREFIXES) -> None:
        super().refuse_unknown(set(known) | set(FILTER_PARAMETERS), prefixes)


@dataclass(frozen=True)
class _Range:
    """`start:stop:step`: start, start + step, ... up to stop (included when it lies on the step).

    Computed in decimal, so `0.5:0.99:0.01` gives exactly the numbers `0.5,0.51,...,0.99` would (each
    the float nearest its decimal), with no drift from adding 0.01 in binary; `count` is known before
    any value is made, so a range of a billion steps is refused without building it.
    """

    start: Decimal
    step: Decimal
    count: int

    def values(self) -> list[float]:
        return [float(self.start + index * self.step) for index in range(self.count)]


def _range(part: str) -> _Range | None:
    pieces = part.split(":")
    floats = [to_float(piece) for piece in pieces]
    # A step too small for a float (1e-400) counts as zero: it would also overflow the count below.
    if len(pieces) != 3 or None in floats or floats[2] <= 0 or floats[0] > floats[1]:
        return None
    start, stop, step = (Decimal(piece.strip()) for piece in pieces)
    return _Range(start, step, int((stop - start) / step) + 1)


def parse_operating_points(
    params: Mapping[str, Any], *, also_allowed: Iterable[str] = ()
) -> tuple[OperatingPointsQuery, list[dict[str, str]]]:
    """The query with defaults in place of bad values, and the problems found (for the page)."""
    reader = _Reader(params)
    reader.refuse_unknown({"cutoffs", "confidence", "interval", "c_w", "c_a", *also_allowed})
    query = OperatingPointsQuery(
        window=reader.window(),
        cutoffs=reader.number_list("cutoffs", DEFAULT_CUTOFFS, MAX_CUTOFFS),
        confidence=reader.number("confidence", 0.95, 0.0, 1.0),
        interval=reader.choice("interval", "wilson", INTERVAL_METHODS),
        costs=(
            reader.number("c_w", DEFAULT_COSTS[0], 0.0, MAX_COST, closed=True),
            reader.number("c_a", DEFAULT_COSTS[1], 0.0, MAX_COST, closed=True),
        ),
    )
    return query, reader.errors


def operating_points_query(params: Mapping[str, Any], *, also_allowed: Iterable[str] = ()) -> OperatingPointsQuery:
    """``cutoffs`` (1 to 50 distinct finite numbers), ``confidence`` in (0, 1), ``interval``."""
    query, errors = parse_operating_points(params, also_allowed=also_allowed)
    raise_for(errors)
    return query


def certified_cutoff_query(params: Mapping[str, Any], *, also_allowed: Iterable[str] = ()) -> CertifiedCutoffQuery:
    """``alpha`` in [0.001, 0.999], ``delta`` in [0.0001, 0.5], ``grid`` (1 to 1001 cutoffs, as numbers
    and ``start:stop:step`` ranges, comma-separated: ``0:0.99:0.01`` is the default grid).

    The bounds keep the smallest sample that can certify (n_start) within reach: alpha = 0.001
    already needs about 11,000 graded served answers.
    """
    reader = _Reader(params)
    reader.refuse_unknown({"alpha", "delta", "grid", *also_allowed})
    query = CertifiedCutoffQuery(
        window=reader.window(),
        alpha=reader.number("alpha", 0.1, 0.001, 0.999, closed=True),
        delta=reader.number("delta", 0.05, 0.0001, 0.5, closed=True),
        grid=reader.number_list("grid", DEFAULT_GRID, MAX_GRID, ranges=True),
    )
    reader.finish()
    return query


def calibration_query(params: Mapping[str, Any], *, also_allowed: Iterable[str] = ()) -> CalibrationQuery:
    """``bins`` (1 to 100), ``by`` (``segment.<key>`` or ``version.<key>``), ``points`` (2 to 100,000)."""
    reader = _Reader(params)
    reader.refuse_unknown({"bins", "by", "points", *also_allowed})
    window = reader.window()
    bins = reader.integer("bins", 10, 1, MAX_BINS)
    points = reader.integer("points", None, 2, 100_000)
    by_raw = reader.raw("by")
    by = None
    if by_raw:
        kind, dot, key = by_raw.partition(".")
        if kind in ("segment", "version") and dot and PAIR_KEY.fullmatch(key):
            by = (kind, key)
        else:
            reader.error("by", f"must be segment.<key> or version.<key>; got {by_raw[:40]!r}.")
    reader.finish()
    return CalibrationQuery(window=window, bins=bins or 10, by=by, points=points)
