"""The evidence a policy version is signed on: the operating-point document of the route at the
chosen cutoff, as read through `console.analysis.reports`, with the warnings the owner sees
before signing. Stored as JSON text and its SHA-256, never as a pointer to a cache row.

The evidence is a snapshot as of an instant (`as_of`): it counts the decisions ingested and the
final labels recorded up to it, within the window's dates (which bound `occurred_at`). Nothing in
it depends on when it is computed (no clock, no cached document, no data version), so computing it
again from the same `as_of` gives the same text and SHA-256 while the data it names is unchanged
(`evidence_check`). Newer traffic never changes it; `arrivals_since` counts what came after, and
warns above `STALE_SHARE` of what the evidence counted (at least `STALE_MIN_DECISIONS` decisions
or `STALE_MIN_LABELS` final labels).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from console.accounts.models import Route
from console.analysis import reports
from console.analysis import selectors as analysis_selectors
from console.analysis.params import DEFAULT_CUTOFFS, CertifiedCutoffQuery, OperatingPointsQuery, Window
from console.governance.long_answers import long_answer_evidence
from console.governance.models import PolicyVersion
from console.ledger.models import Decision
from console.ledger.selectors import start_of_day
from console.trials.selectors import trial_evidence
from grading.models import FinalLabel

FAR_HALF_WIDTH_LIMIT = 0.10  # an interval wider than ±10 points does not pin the false-abstention rate
MIN_GRADED_REFUSALS = 100
LABEL_AGE_DAYS = 90

# What arrived after `as_of` earns a warning when it reaches a tenth of what the evidence counted:
# enough to move a rate's estimate by about its own interval on a small sample. The floors keep a
# handful of decisions on a young route from warning.
STALE_SHARE = 0.10
STALE_MIN_DECISIONS = 100
STALE_MIN_LABELS = 20

# How long a snapshot waits for transactions that began before its `as_of` (an ingest batch stamps
# `ingested_at` when it starts, and commits later): their rows belong to the snapshot, so it reads
# after they commit. Past this it reads anyway; `evidence_check` would then name what differs.
SETTLE_SECONDS = 5.0
MAX_DIFFERENCES = 200
MAX_LABELS_LISTED = 100


@dataclass(frozen=True)
class Snapshot:
    """The instant the evidence is computed as of, and the route's newest decision id and label
    revision read just before it: decisions ingested and labels written later have higher ones."""

    as_of: datetime
    decisions_seen: int
    labels_seen: int


@dataclass(frozen=True)
class Evidence:
    text: str
    sha256: str
    as_of: datetime
    warnings: list[dict[str, str]]

    @property
    def document(self) -> dict[str, Any]:
        return json.loads(self.text)


def canonical_text(document: dict[str, Any]) -> str:
    """One spelling of a document, so that the same evidence always hashes the same."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def as_of_text(as_of: datetime) -> str:
    return as_of.astimezone(UTC).isoformat(timespec="microseconds")


def snapshot_now(route: Route) -> Snapshot:
    """Now as an evidence instant: the marks first, then the instant, then wait (bounded) until every
    transaction that began before it has ended, so all it may have written is readable."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT (SELECT max(id) FROM ledger_decision WHERE route_id = %s),
                   (SELECT max(revision) FROM grading_finallabel WHERE decision_route_id = %s)
            """,
            [route.pk, route.pk],
        )
        decisions_seen, labels_seen = cursor.fetchone()
    as_of = timezone.now()
    _wait_for_transactions_begun_before(as_of)
    return Snapshot(as_of=as_of, decisions_seen=decisions_seen or 0, labels_seen=labels_seen or 0)


def _wait_for_transactions_begun_before(instant: datetime) -> None:
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                """
                SELECT count(*) FROM pg_stat_activity
                 WHERE pid <> pg_backend_pid() AND datname = current_database()
                   AND backend_type = 'client backend' AND xact_start < %s
                """,
                [instant],
            )
            (running,) = cursor.fetchone()
        if not running or time.monotonic() >= deadline:
            return
        time.sleep(0.02)


def _chosen_row(rows: list[dict[str, Any]], cutoff: float) -> dict[str, Any] | None:
    return next((row for row in rows if row["cutoff"] is not None and abs(row["cutoff"] - cutoff) < 1e-12), None)


def _label_ages(route: Route, window: Window, as_of: datetime) -> dict[str, Any]:
    old_before = as_of - timedelta(days=LABEL_AGE_DAYS)
    ages = analysis_selectors.labelled_as_of(route, window, as_of).aggregate(
        oldest=Min("final_label__decided_at"),
        newest=Max("final_label__decided_at"),
        older=Count("pk", filter=Q(final_label__decided_at__lt=old_before)),
    )
    return {
        "oldest": as_of_text(ages["oldest"]) if ages["oldest"] else None,
        "newest": as_of_text(ages["newest"]) if ages["newest"] else None,
        f"older_than_{LABEL_AGE_DAYS}_days": ages["older"],
    }


def _graded_sample_digest(route: Route, window: Window, as_of: datetime) -> dict[str, Any]:
    """Which labels the snapshot read, as a count and a SHA-256 over (decision id, verdict, method,
    source) in decision order: a label changed later shows here even where no figure moves."""
    digest = hashlib.sha256()
    count = 0
    rows = (
        analysis_selectors.labelled_as_of(route, window, as_of)
        .order_by("pk")
        .values_list("pk", "final_label__correct", "final_label__method", "final_label__source")
    )
    for decision_id, correct, method, source in rows.iterator(chunk_size=5000):
        digest.update(f"{decision_id}\t{int(correct)}\t{method}\t{source}\n".encode())
        count += 1
    return {"labels": count, "sha256": digest.hexdigest()}


def _traffic_versions(route: Route, as_of: datetime) -> dict[str, str]:
    """The versions of the newest decision ingested by `as_of`: what the gate ran on then."""
    latest = (
        Decision.objects.filter(route=route, ingested_at__lte=as_of)
        .order_by("-occurred_at", "-pk")
        .values_list("versions", flat=True)
    )
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
    as_of: datetime,
    trial=None,
) -> Evidence:
    """The operating-point document at the default grid, the chosen cutoff and the band's lower
    edge, on the proposal's filters, as of `as_of`; with the certified-cutoff result when it was
    asked for, and the id and result SHA-256 of a passed candidate gate trial when one is attached."""
    cutoffs = set(DEFAULT_CUTOFFS) | {cutoff} | ({band_lower} if band_lower is not None else set())
    table_query = OperatingPointsQuery(
        window=query.window, cutoffs=tuple(sorted(cutoffs)), confidence=query.confidence, interval=query.interval
    )
    table = reports.operating_points_report(route, table_query, as_of=as_of).data
    certified = reports.certified_cutoff_report(route, certification, as_of=as_of).data if certification else None
    scope = analysis_selectors.graded_scope(route, query.window, as_of=as_of)
    row = _chosen_row(table["rows"], cutoff)
    label_ages = _label_ages(route, query.window, as_of)
    traffic = _traffic_versions(route, as_of)
    warnings = warnings_for(
        row=row,
        cutoff=cutoff,
        label_ages=label_ages,
        traffic=traffic,
        graded_versions=scope.versions,
        certification=certified,
    )
    # A long route: the harm model, the gate's functional and both figures at the cutoff (issue 31).
    long_answers, long_warnings = long_answer_evidence(
        route=route, window=query.window, as_of=as_of, cutoff=cutoff, row=row
    )
    warnings = long_warnings + warnings
    document = {
        "kind": "policy_evidence",
        "as_of": as_of_text(as_of),
        "route": route.slug,
        "cutoff": cutoff,
        "band_lower": band_lower,
        "filters": query.window.as_dict(),
        "confidence": query.confidence,
        "interval": query.interval,
        "operating_points": table,
        "chosen_row": row,
        "band_lower_row": _chosen_row(table["rows"], band_lower) if band_lower is not None else None,
        "certified_cutoff": certified,
        "labels": table.get("labels"),
        "label_ages": label_ages,
        "graded_sample": _graded_sample_digest(route, query.window, as_of),
        "traffic_versions": traffic,
        "graded_versions": scope.versions,
        "warnings": warnings,
    }
    if long_answers is not None:
        document["long_answers"] = long_answers
    if trial is not None:
        document["trial"] = trial_evidence(trial)
    text = canonical_text(document)
    return Evidence(text=text, sha256=PolicyVersion.sha256_of(text), as_of=as_of, warnings=warnings)


# --------------------------------------------------------------------------- a stored version's snapshot


def stored_window(policy: PolicyVersion) -> Window:
    filters = policy.filters or {}
    return Window(
        date_from=datetime.fromisoformat(filters["from"]).date() if filters.get("from") else None,
        date_to=datetime.fromisoformat(filters["to"]).date() if filters.get("to") else None,
        versions=tuple(sorted((filters.get("versions") or {}).items())),
        segments=tuple(sorted((filters.get("segments") or {}).items())),
    )


def recompute_stored(policy: PolicyVersion, *, as_of: datetime) -> Evidence:
    """A version's evidence computed again on its own cutoff, band, window, intervals, certification
    parameters and attached trial, as of `as_of`."""
    from console.trials.models import Trial

    stored = policy.evidence_document
    window = stored_window(policy)
    query = OperatingPointsQuery(window=window, confidence=policy.confidence, interval=policy.interval)
    certified = stored.get("certified_cutoff")
    certification = None
    if certified:
        # A draft chooses alpha and delta; the grid is always the default one.
        certification = CertifiedCutoffQuery(window=window, alpha=certified["alpha"], delta=certified["delta"])
    attached = stored.get("trial")
    trial = Trial.objects.get(pk=attached["trial_id"]) if attached else None
    return compute_evidence(
        route=policy.route,
        cutoff=policy.cutoff,
        band_lower=policy.band_lower,
        query=query,
        certification=certification,
        as_of=as_of,
        trial=trial,
    )


def arrivals_since(policy: PolicyVersion) -> dict[str, Any]:
    """Decisions ingested and final labels recorded after the evidence's `as_of` that a recompute
    would count (the window's dates, versions and segments apply), with a warning above the
    thresholds. Two index range reads: decision ids and label revisions above the marks."""
    as_of = policy.evidence_as_of or policy.created_at
    window = stored_window(policy)
    decisions = window.decision_filters().apply(
        Decision.objects.filter(route_id=policy.route_id, ingested_at__gt=as_of)
    )
    labels = FinalLabel.objects.filter(decision_route_id=policy.route_id, decided_at__gt=as_of)
    if policy.evidence_decisions_seen is not None:
        decisions = decisions.filter(pk__gt=policy.evidence_decisions_seen)
    if policy.evidence_labels_seen is not None:
        labels = labels.filter(revision__gt=policy.evidence_labels_seen)
    if window.date_from:
        labels = labels.filter(decision_occurred_at__gte=start_of_day(window.date_from))
    if window.date_to:
        labels = labels.filter(decision_occurred_at__lt=start_of_day(window.date_to + timedelta(days=1)))
    if window.versions or window.segments:
        in_window = window.decision_filters().apply(Decision.objects.filter(route_id=policy.route_id))
        labels = labels.filter(decision_id__in=in_window.values("pk"))
    new_decisions, new_labels = decisions.count(), labels.count()
    document = policy.evidence_document
    counted = (document.get("operating_points") or {}).get("population") or 0
    graded = (document.get("operating_points") or {}).get("graded") or 0
    decision_limit = max(STALE_MIN_DECISIONS, int(STALE_SHARE * counted))
    label_limit = max(STALE_MIN_LABELS, int(STALE_SHARE * graded))
    since = {
        "as_of": as_of_text(as_of),
        "decisions": new_decisions,
        "final_labels": new_labels,
        "thresholds": {"decisions": decision_limit, "final_labels": label_limit},
        "warning": None,
    }
    if new_decisions >= decision_limit or new_labels >= label_limit:
        since["warning"] = {
            "code": "evidence_behind_traffic",
            "message": (
                f"Since the evidence was computed ({since['as_of']}), {new_decisions} decisions and "
                f"{new_labels} final labels arrived (warning from {decision_limit} decisions or "
                f"{label_limit} labels). The evidence does not count them; recompute it to sign on them."
            ),
        }
    return since


def _flatten(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            _flatten(value[key], f"{path}.{key}" if path else key, out)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _flatten(item, f"{path}[{index}]", out)
    else:
        out[path] = value


def differences(stored: dict[str, Any], now: dict[str, Any]) -> list[dict[str, Any]]:
    """Every leaf whose value differs between two documents, by path (`chosen_row.refused`)."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    _flatten(stored, "", before)
    _flatten(now, "", after)
    missing = object()
    found = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path, missing), after.get(path, missing)
        if old != new or type(old) is not type(new):
            found.append(
                {"path": path, "stored": None if old is missing else old, "now": None if new is missing else new}
            )
    return found


def evidence_check(policy: PolicyVersion) -> dict[str, Any]:
    """Whether the stored evidence is still what its `as_of` gives on the data as it is now, and if
    not, what differs: the figures by path, and the labels of the snapshot written after `as_of`
    (a label's earlier value is not kept in its table; the audit trail records the change)."""
    result: dict[str, Any] = {
        "policy": policy.pk,
        "route": policy.route.slug,
        "version": policy.version,
        "as_of": as_of_text(policy.evidence_as_of) if policy.evidence_as_of else None,
        "evidence_sha256": policy.evidence_sha256,
    }
    if policy.evidence_as_of is None:
        return result | {
            "recomputed_sha256": None,
            "matches": None,
            "differences": [],
            "labels_changed_since": [],
            "reason": "drafted before evidence snapshots: its evidence names a data version, not an instant",
        }
    again = recompute_stored(policy, as_of=policy.evidence_as_of)
    found = [] if again.sha256 == policy.evidence_sha256 else differences(policy.evidence_document, again.document)
    changed = []
    if policy.evidence_labels_seen is not None:
        rewritten = (
            analysis_selectors.labelled_as_of(policy.route, stored_window(policy), policy.evidence_as_of)
            .filter(final_label__revision__gt=policy.evidence_labels_seen)
            .order_by("pk")
            .values_list(
                "pk", "final_label__correct", "final_label__method", "final_label__source", "final_label__decided_at"
            )[:MAX_LABELS_LISTED]
        )
        changed = [
            {
                "decision_id": decision_id,
                "verdict_now": "correct" if correct else "incorrect",
                "method": method,
                "source": source,
                "decided_at": as_of_text(decided_at),
            }
            for decision_id, correct, method, source, decided_at in rewritten
        ]
    return result | {
        "recomputed_sha256": again.sha256,
        "matches": again.sha256 == policy.evidence_sha256,
        "differences": found[:MAX_DIFFERENCES],
        "differences_total": len(found),
        "labels_changed_since": changed,
    }
