"""The statistics documents the API returns and the page shows, each computed once per data
version through `console.analysis.cache`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np

from console.accounts.models import Route
from console.analysis import selectors
from console.analysis.cache import Document, as_json, cached
from console.analysis.params import CalibrationQuery, CertifiedCutoffQuery, OperatingPointsQuery, Window
from console.core.errors import InvalidInput
from console.ledger.models import RouteAnswerSettings
from console.ledger.selectors import answer_settings
from console.stats.calibration import calibration_by_segment, calibration_report
from console.stats.certification import RISK, Certification, certify_cutoff, n_start
from console.stats.long_answers import (
    effective_functional,
    full_support_by_claim_count,
    long_operating_points,
    long_operating_points_document,
    precision_recall_at_k,
    support_calibration,
)
from console.stats.operating_points import (
    TIE_POLICY,
    OperatingPointRow,
    band_table,
    operating_points,
    operating_points_document,
)
from console.stats.policy_math import cost_threshold, cost_threshold_problem

OPERATING_POINTS = "operating_points"
CERTIFIED_CUTOFF = "certified_cutoff"
CALIBRATION = "calibration"
BINNING = "equal-width bins on [0, 1], left-closed, the last bin also closed"

# The page's chart curve: every 0.05 from 0 to 1.
CHART_CUTOFFS: tuple[float, ...] = tuple(round(i * 0.05, 2) for i in range(21))
# Risk-coverage points kept for the page's chart (AURC always uses the full curve).
CHART_POINTS = 400
# The band simulator's first proposal: serve with evidence from 0.4, serve outright from 0.7.
DEFAULT_BAND = (0.4, 0.7)


def _common(route: Route, window: Window, sample: selectors.GradedSample) -> dict[str, Any]:
    return {"route": route.slug, "filters": window.as_dict(), "labels": sample.label_counts()}


# --------------------------------------------------------------------------- operating points


def _rows(
    population: int,
    served: dict[float, int],
    cutoffs: list[float],
    sample: selectors.GradedSample,
    confidence: float,
    method: str,
) -> list[OperatingPointRow]:
    weights, strata = sample.weights_and_strata()
    return operating_points(
        population_size=population,
        cutoffs=cutoffs,
        served_counts=[served[c] for c in cutoffs],
        graded_scores=sample.scores,
        graded_correct=sample.correct,
        graded_weights=weights,
        graded_strata=strata,
        confidence=confidence,
        method=method,  # type: ignore[arg-type]
    )


def operating_points_params(query: OperatingPointsQuery, curve: tuple[float, ...] = ()) -> dict[str, Any]:
    return query.cache_params() | {"curve": sorted(curve)}


def _graded(route: Route, window: Window, as_of: datetime | None) -> selectors.GradedSample:
    if as_of is None:
        return selectors.graded_sample(route, window)
    return selectors.graded_sample_as_of(route, window, as_of)


def _population(route: Route, window: Window, cutoffs: list[float], as_of: datetime | None) -> tuple[int, list[int]]:
    if as_of is None:
        return selectors.population_served_counts(route, window, cutoffs)
    return selectors.population_served_counts_as_of(route, window, cutoffs, as_of)


def _frozen(compute: Callable[[], dict[str, Any]]) -> Document:
    """A document of the data as it stood at an instant: never cached, and carrying nothing of the
    moment it was computed (no ``computed_at``, no data version), so computing it again later gives
    the same text."""
    return Document(as_json(compute()))


def operating_points_report(
    route: Route, query: OperatingPointsQuery, *, curve: tuple[float, ...] = (), as_of: datetime | None = None
) -> Document:
    """The operating-points document of the API (README "API"), plus ``labels``, ``estimator`` and ``filters``.

    ``curve`` adds a second table over those cutoffs (``"curve"``: rows without the no-gate row)
    for the page's chart; both come from the same population query. With no decisions in the
    window there are no rows (``population`` 0). With ``as_of``, the table of the decisions
    ingested and the labels recorded by that instant (a policy's evidence), never cached.
    """
    params = operating_points_params(query, curve)

    def compute() -> dict[str, Any]:
        settings = answer_settings(route)
        long = None
        if settings.is_long:
            long = selectors.long_graded_sample(
                route, query.window, route_expected_claims=settings.expected_claims, as_of=as_of
            )
            sample = long.sample
        else:
            sample = _graded(route, query.window, as_of)
        cutoffs = list(query.cutoffs)
        everything = sorted(set(cutoffs) | set(curve))
        population, counts = _population(route, query.window, everything, as_of)
        served = dict(zip(everything, counts, strict=True))
        rows = _rows(population, served, cutoffs, sample, query.confidence, query.interval) if population else []
        document = {"route": route.slug} | operating_points_document(
            rows,
            population_size=population,
            graded=sample.size,
            confidence=query.confidence,
            method=query.interval,  # type: ignore[arg-type]
        )
        document |= {"estimator": sample.estimator} | _common(route, query.window, sample)
        if long is not None:
            document |= _long_answers(long, settings, population, served, cutoffs, query, document["rows"])
        if curve:
            curve_rows = (
                _rows(population, served, sorted(curve), sample, query.confidence, query.interval) if population else []
            )
            document["curve"] = [row.as_dict() for row in curve_rows[1:]]
        return document

    if as_of is not None:
        return _frozen(compute)
    return cached(route, OPERATING_POINTS, params, compute)


def _long_answers(
    long: selectors.LongGradedSample,
    settings: RouteAnswerSettings,
    population: int,
    served: dict[float, int],
    cutoffs: list[float],
    query: OperatingPointsQuery,
    rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """What a long route's table adds (docs/statistics.md, "Long answers"): the long-answer fields
    merged into each row, the functional the figures read, the Pr(S = 1)-by-n table over the graded
    answers and their precision and recall against K."""
    sample = long.sample
    weights, strata = sample.weights_and_strata()
    functional = effective_functional(settings.gate_functional, settings.harm_model)
    c_w, c_a = query.costs
    if population:
        long_rows = long_operating_points(
            population_size=population,
            cutoffs=cutoffs,
            served_counts=[served[c] for c in cutoffs],
            graded_scores=sample.scores,
            claims_supported=long.claims_supported,
            claims_verifiable=long.claims_verifiable,
            graded_weights=weights,
            graded_strata=strata,
            harm_model=settings.harm_model,  # type: ignore[arg-type]
            functional=functional,
            support_threshold=settings.support_threshold,
            c_w=c_w,
            c_a=c_a,
            confidence=query.confidence,
            method=query.interval,  # type: ignore[arg-type]
        )
        for row, long_row in zip(rows, long_rows, strict=True):
            row |= long_row.as_dict()
    extra = long_operating_points_document(
        [],
        harm_model=settings.harm_model,
        functional=functional,
        declared_functional=settings.gate_functional,
        support_threshold=settings.support_threshold,
        confidence=query.confidence,
    )
    del extra["rows"], extra["confidence"], extra["tie_policy"]
    tau = cost_threshold(c_w, c_a) if cost_threshold_problem(c_w, c_a) is None else None
    by_claims = full_support_by_claim_count(
        long.claims_supported,
        long.claims_verifiable,
        weights=weights,
        strata=strata,
        tau=tau,
        confidence=query.confidence,
        method=query.interval,  # type: ignore[arg-type]
    )
    at_k = precision_recall_at_k(long.claims_supported, long.claims_verifiable, long.expected_claims)
    known = ~np.isnan(at_k.recall)
    return extra | {
        "costs": {"c_w": c_w, "c_a": c_a, "tau": tau},
        "expected_claims": settings.expected_claims,
        "full_support_by_claims": [row.as_dict() for row in by_claims],
        "precision_recall": {
            "answers_with_k": int(np.count_nonzero(known)),
            "precision": _mean_or_none(at_k.precision[known & ~np.isnan(at_k.precision)]),
            "recall": _mean_or_none(at_k.recall[known]),
            "f1": _mean_or_none(at_k.f1[known & ~np.isnan(at_k.f1)]),
        },
    }


def _mean_or_none(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def band_report(route: Route, query: OperatingPointsQuery, *, band_lower: float, cutoff: float) -> Document:
    """The middle-band table of a ``(band_lower, cutoff)`` policy on the same data as the table."""
    params = query.cache_params() | {"band_lower": band_lower, "band_cutoff": cutoff}

    def compute() -> dict[str, Any]:
        sample = selectors.graded_sample(route, query.window)
        population, served = selectors.population_served_counts(route, query.window, [band_lower, cutoff])
        if not population:
            return {"route": route.slug, "population": 0, "segments": []}
        weights, strata = sample.weights_and_strata()
        table = band_table(
            band_lower=band_lower,
            cutoff=cutoff,
            population_size=population,
            served_counts=served,
            graded_scores=sample.scores,
            graded_correct=sample.correct,
            graded_weights=weights,
            graded_strata=strata,
            confidence=query.confidence,
            method=query.interval,  # type: ignore[arg-type]
        )
        return {
            "route": route.slug,
            "population": population,
            "confidence": query.confidence,
            "interval": query.interval,
        } | table.as_dict()

    return cached(route, "band", params, compute)


# --------------------------------------------------------------------------- certified cutoff


def _versions_in_words(window: Window, scope: selectors.GradedScope) -> str:
    versions = dict(scope.versions)
    for key, value in window.versions:
        versions[key] = [value]
    if not versions:
        return "no recorded versions"
    return "versions " + "; ".join(f"{key} {' or '.join(values)}" for key, values in versions.items())


def _window_in_words(route: Route, window: Window, scope: selectors.GradedScope) -> tuple[str, str]:
    where = f"route {route.name} ({route.slug})"
    when = window.describe()
    if scope.first_day:
        when += f" (graded decisions from {scope.first_day} to {scope.last_day})"
    return where, when


def certified_cutoff_report(route: Route, query: CertifiedCutoffQuery, *, as_of: datetime | None = None) -> Document:
    """The certified-cutoff document (docs/statistics.md) with the owner's ``statement`` naming route, window and
    versions. The rule needs a uniform sample: with unequal inclusion probabilities nothing is
    certified and the reason says so. ``as_of`` as for `operating_points_report`."""

    def compute() -> dict[str, Any]:
        sample = _graded(route, query.window, as_of)
        scope = selectors.graded_scope(route, query.window, as_of=as_of)
        if sample.uniform:
            result = certify_cutoff(
                graded_scores=sample.scores,
                graded_correct=sample.correct,
                alpha=query.alpha,
                delta=query.delta,
                grid=list(query.grid),
            )
        else:
            result = Certification(
                certified=False,
                cutoff=None,
                upper_bound=None,
                graded_served=None,
                wrong_served=None,
                alpha=query.alpha,
                delta=query.delta,
                n_start=n_start(query.alpha, query.delta),
                reason_code="sample_not_uniform",
                reason=(
                    "the graded decisions were sampled with unequal inclusion probabilities; the "
                    f"{RISK} can only be certified on a uniform sample."
                ),
            )
        where, when = _window_in_words(route, query.window, scope)
        return (
            {"route": route.slug}
            | result.as_dict()
            | {
                "confidence": 1.0 - query.delta,
                "tie_policy": TIE_POLICY,
                "statement": result.statement(
                    route=where, window=when, versions=_versions_in_words(query.window, scope)
                ),
                "versions": scope.versions,
            }
            | _common(route, query.window, sample)
        )

    if as_of is not None:
        return _frozen(compute)
    return cached(route, CERTIFIED_CUTOFF, query.cache_params(), compute)


# --------------------------------------------------------------------------- calibration


def calibration_report_for(route: Route, query: CalibrationQuery) -> Document:
    """The calibration document (docs/statistics.md) over the labelled decisions of the window; with
    ``by``, the same report for each value of that segment or version under ``"segments"``."""

    def compute() -> dict[str, Any]:
        sample = selectors.graded_sample(route, query.window, group_by=query.by)
        if sample.size and (sample.scores.min() < 0.0 or sample.scores.max() > 1.0):
            raise InvalidInput(
                "Calibration needs gate scores in [0, 1]; this route's graded scores run from "
                f"{sample.scores.min():g} to {sample.scores.max():g}.",
                code="scores_not_probabilities",
            )
        report = calibration_report(sample.scores, sample.correct, query.bins, max_points=query.points)
        document = (
            {"route": route.slug}
            | dict(report)
            | {
                "binning": BINNING,
                "tie_policy": TIE_POLICY,
                "weighted": False,
            }
            | _common(route, query.window, sample)
        )
        if not sample.uniform:
            document["note"] = (
                "Graded decisions were sampled with unequal inclusion probabilities; calibration "
                "is reported over them as sampled, without weights."
            )
        settings = answer_settings(route)
        if settings.is_long:
            document["long_answers"] = _long_calibration(route, query, settings)
        if query.by:
            by_value = calibration_by_segment(
                sample.scores, sample.correct, list(sample.groups), query.bins, max_points=query.points
            )
            document["by"] = ".".join(query.by)
            document["segments"] = [{"value": value} | dict(part) for value, part in by_value.items()]
        return document

    return cached(route, CALIBRATION, query.cache_params(), compute)


def _long_calibration(route: Route, query: CalibrationQuery, settings: RouteAnswerSettings) -> dict[str, Any]:
    """The gate score as a forecast of each functional (docs/statistics.md, "Calibration per
    functional"), over the labels with claim counts, unweighted like the rest of the report."""
    long = selectors.long_graded_sample(route, query.window, route_expected_claims=settings.expected_claims)
    return support_calibration(
        long.sample.scores,
        long.claims_supported,
        long.claims_verifiable,
        functional=effective_functional(settings.gate_functional, settings.harm_model),
        support_threshold=settings.support_threshold,
        bins=query.bins,
    ) | {"harm_model": settings.harm_model, "declared_functional": settings.gate_functional}
