"""The evidence a policy version is signed on: the operating-point document of the route at the
chosen cutoff, as read through `console.analysis.reports`, with the warnings the owner sees
before signing. Stored as JSON text and its SHA-256, never as a pointer to a cache row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from console.analysis import reports
from console.analysis import selectors as analysis_selectors
from console.analysis.params import DEFAULT_CUTOFFS, CertifiedCutoffQuery, OperatingPointsQuery
from console.governance.models import PolicyVersion
from console.ledger.models import Decision, Route
from console.trials.selectors import trial_evidence
from grading.models import FinalLabel

FAR_HALF_WIDTH_LIMIT = 0.10  # an interval wider than ±10 points does not pin the false-abstention rate
MIN_GRADED_REFUSALS = 100
LABEL_AGE_DAYS = 90


@dataclass(frozen=True)
class Evidence:
    text: str
    sha256: str
    data_version: str
    warnings: list[dict[str, str]]

    @property
    def document(self) -> dict[str, Any]:
        return json.loads(self.text)


def canonical_text(document: dict[str, Any]) -> str:
    """One spelling of a document, so that the same evidence always hashes the same."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _chosen_row(rows: list[dict[str, Any]], cutoff: float) -> dict[str, Any] | None:
    return next((row for row in rows if row["cutoff"] is not None and abs(row["cutoff"] - cutoff) < 1e-12), None)


def _label_ages(route: Route, query: OperatingPointsQuery) -> dict[str, Any]:
    decisions = query.window.decision_filters().apply(Decision.objects.filter(route=route))
    old_before = timezone.now() - timedelta(days=LABEL_AGE_DAYS)
    ages = FinalLabel.objects.filter(decision__in=decisions.values("pk")).aggregate(
        oldest=Min("decided_at"), newest=Max("decided_at"), older=Count("pk", filter=Q(decided_at__lt=old_before))
    )
    return {
        "oldest": ages["oldest"].isoformat() if ages["oldest"] else None,
        "newest": ages["newest"].isoformat() if ages["newest"] else None,
        f"older_than_{LABEL_AGE_DAYS}_days": ages["older"],
    }


def _traffic_versions(route: Route) -> dict[str, str]:
    """The versions of the route's newest decision: what the gate runs on now."""
    latest = Decision.objects.filter(route=route).order_by("-occurred_at", "-pk").values_list("versions", flat=True)
    versions = latest.first() or {}
    return {key: str(value) for key, value in sorted(versions.items())}


def _certified_at(certification: dict[str, Any], cutoff: float) -> bool:
    """Whether the fixed-sequence scan certified this cutoff: at or above the lowest certified
    grid cutoff, and not a grid cutoff the scan skipped for a small sample."""
    if not certification.get("certified") or certification.get("cutoff") is None:
        return False
    if cutoff < certification["cutoff"]:
        return False
    skipped = {step["cutoff"] for step in certification.get("steps", []) if step["outcome"] != "certified"}
    return cutoff not in skipped


def warnings_for(
    *,
    row: dict[str, Any] | None,
    cutoff: float,
    label_ages: dict[str, Any],
    traffic: dict[str, str],
    graded_versions: dict[str, list[str]],
    certification: dict[str, Any] | None,
) -> list[dict[str, str]]:
    """What the owner should know before signing; recorded with the signature, never blocking."""
    warnings = []
    far = (row or {}).get("false_abstention_rate")
    if not far or far.get("low") is None or far.get("high") is None:
        warnings.append(
            {
                "code": "far_unknown",
                "message": (f"No graded refusals at cutoff {cutoff:g}: the false-abstention rate is unknown."),
            }
        )
    elif (far["high"] - far["low"]) / 2 > FAR_HALF_WIDTH_LIMIT:
        warnings.append(
            {
                "code": "far_interval_wide",
                "message": (
                    f"The false-abstention interval at cutoff {cutoff:g} runs from {far['low']:.1%} "
                    f"to {far['high']:.1%}, "
                    f"wider than ±{FAR_HALF_WIDTH_LIMIT * 100:g} points."
                ),
            }
        )
    graded_refused = (row or {}).get("graded_refused", 0)
    if graded_refused < MIN_GRADED_REFUSALS:
        warnings.append(
            {
                "code": "few_graded_refusals",
                "message": (
                    f"Only {graded_refused} graded refusals at cutoff {cutoff:g} (fewer than {MIN_GRADED_REFUSALS})."
                ),
            }
        )
    older = label_ages[f"older_than_{LABEL_AGE_DAYS}_days"]
    if older:
        warnings.append(
            {
                "code": "labels_old",
                "message": (
                    f"{older} of the labels were decided more than {LABEL_AGE_DAYS} days ago "
                    f"(oldest {label_ages['oldest']})."
                ),
            }
        )
    other = {key: [v for v in values if v != traffic[key]] for key, values in graded_versions.items() if key in traffic}
    other = {key: values for key, values in other.items() if values}
    if other:
        listed = "; ".join(f"{key} {', '.join(values)} (traffic now {traffic[key]})" for key, values in other.items())
        warnings.append(
            {
                "code": "versions_differ",
                "message": (
                    f"The graded sample includes decisions made on versions other than the current traffic's: {listed}."
                ),
            }
        )
    if certification is not None and not _certified_at(certification, cutoff):
        warnings.append(
            {
                "code": "not_certified",
                "message": (
                    f"Cutoff {cutoff:g} is not certified at alpha {certification['alpha']:g}: "
                    + (
                        f"the lowest certified cutoff is {certification['cutoff']:g}."
                        if certification.get("certified")
                        else str(certification.get("reason") or "no cutoff is certified.")
                    )
                ),
            }
        )
    return warnings


def compute_evidence(
    *,
    route: Route,
    cutoff: float,
    band_lower: float | None,
    query: OperatingPointsQuery,
    certification: CertifiedCutoffQuery | None,
    trial=None,
) -> Evidence:
    """The operating-point document at the default grid, the chosen cutoff and the band's lower
    edge, on the proposal's filters; with the certified-cutoff result when it was asked for, and
    the id and result SHA-256 of a passed candidate gate trial when one is attached."""
    cutoffs = set(DEFAULT_CUTOFFS) | {cutoff} | ({band_lower} if band_lower is not None else set())
    table_query = OperatingPointsQuery(
        window=query.window, cutoffs=tuple(sorted(cutoffs)), confidence=query.confidence, interval=query.interval
    )
    with analysis_selectors.shared_reads():
        data_version = analysis_selectors.data_version(route)
        table = reports.operating_points_report(route, table_query).data
        certified = reports.certified_cutoff_report(route, certification).data if certification else None
        scope = analysis_selectors.graded_scope(route, query.window)
    row = _chosen_row(table["rows"], cutoff)
    label_ages = _label_ages(route, query)
    traffic = _traffic_versions(route)
    warnings = warnings_for(
        row=row,
        cutoff=cutoff,
        label_ages=label_ages,
        traffic=traffic,
        graded_versions=scope.versions,
        certification=certified,
    )
    document = {
        "kind": "policy_evidence",
        "route": route.slug,
        "cutoff": cutoff,
        "band_lower": band_lower,
        "filters": query.window.as_dict(),
        "confidence": query.confidence,
        "interval": query.interval,
        "data_version": data_version,
        "operating_points": table,
        "chosen_row": row,
        "band_lower_row": _chosen_row(table["rows"], band_lower) if band_lower is not None else None,
        "certified_cutoff": certified,
        "labels": table.get("labels"),
        "label_ages": label_ages,
        "traffic_versions": traffic,
        "graded_versions": scope.versions,
        "warnings": warnings,
    }
    if trial is not None:
        document["trial"] = trial_evidence(trial)
    text = canonical_text(document)
    return Evidence(text=text, sha256=PolicyVersion.sha256_of(text), data_version=data_version, warnings=warnings)
