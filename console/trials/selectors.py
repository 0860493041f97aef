"""Reads of candidate gate trials: who may see them, the items, the figures and the result document."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from django.db.models import Count, Q, QuerySet

from console.accounts import permissions
from console.accounts.models import Route
from console.analysis.params import Window
from console.analysis.selectors import IMPORTED_STRATUM
from console.core.errors import Forbidden, NotFound
from console.ledger.models import Decision
from console.stats.trials import promotion_gates, trial_figures
from console.trials.models import CallErrorKind, CallStatus, Trial, TrialCall, TrialStatus
from grading.models import FinalLabel, LabelMethod


def _require_trial_role(user) -> None:
    if not permissions.can_run_trials(user):
        raise Forbidden("Your role does not allow candidate gate trials.")


def route_for_trials(user, slug: str) -> Route:
    """403 for a user who may run trials nowhere (graders), 404 for a route they may not see."""
    return permissions.route_for(
        user, slug, allowed=permissions.can_run_trials, refused="Your role does not allow candidate gate trials."
    )


def get_trial_for_user(user, pk: int) -> Trial:
    _require_trial_role(user)
    trial = Trial.objects.select_related("route", "candidate").filter(pk=pk).first()
    if trial is None or not permissions.can_run_trials(user, trial.route):
        raise NotFound(f"No trial {pk}.")
    return trial


def trials_of(route: Route) -> QuerySet[Trial]:
    return (
        Trial.objects.filter(route=route)
        .select_related("candidate")
        .annotate(
            calls_done=Count("calls", filter=Q(calls__status__in=[CallStatus.DONE, CallStatus.ERROR])),
            calls_total=Count("calls"),
        )
    )


def graded_decision_ids(route: Route, window: Window) -> list[int]:
    """The route's decisions with a final label in the window, in id order."""
    queryset = window.decision_filters().apply(Decision.objects.filter(route=route))
    return list(
        queryset.filter(pk__in=FinalLabel.objects.values("decision_id")).order_by("pk").values_list("pk", flat=True)
    )


def draft_answer(decision: Decision) -> str:
    """The answer under review: the grading item's answer; for a label imported without an item,
    the served answer, else the logged claim."""
    label = FinalLabel.objects.select_related("item__decision").filter(decision=decision).first()
    if label is not None and label.item is not None:
        return label.item.answer
    return decision.served_answer or decision.claim


def progress(trial: Trial) -> dict[str, int]:
    counts = dict(TrialCall.objects.filter(trial=trial).values_list("status").annotate(n=Count("*")).order_by())
    errors = counts.get(CallStatus.ERROR, 0)
    return {
        "total": sum(counts.values()),
        "made": counts.get(CallStatus.DONE, 0) + errors,
        "errors": errors,
        "queued": counts.get(CallStatus.QUEUED, 0),
        "calling": counts.get(CallStatus.CALLING, 0),
    }


def _rows(trial: Trial) -> tuple[list[int], dict[int, list[str | None]], dict[int, dict[str, Any]]]:
    verdicts: dict[int, list[str | None]] = defaultdict(lambda: [None] * trial.repeats)
    for decision_id, repeat, status, verdict in TrialCall.objects.filter(trial=trial).values_list(
        "decision_id", "repeat", "status", "verdict"
    ):
        verdicts[decision_id][repeat - 1] = verdict if status == CallStatus.DONE else None
    ids = sorted(verdicts)
    labels = {
        row["decision_id"]: row
        for row in FinalLabel.objects.filter(decision_id__in=ids).values(
            "decision_id",
            "correct",
            "method",
            "item__inclusion_probability",
            "item__stratum",
            "decision__gate_score",
            "decision__cutoff",
            "decision__request_id",
        )
    }
    return ids, verdicts, labels


def trial_result(trial: Trial) -> dict[str, Any]:
    """The result document (the API's shape); stored, with its SHA-256, when the trial finishes."""
    ids, verdicts, labels = _rows(trial)
    ids = [i for i in ids if i in labels]
    correct = [labels[i]["correct"] for i in ids]
    cutoffs = [trial.cutoff if trial.cutoff is not None else labels[i]["decision__cutoff"] for i in ids]
    current = [labels[i]["decision__gate_score"] >= c for i, c in zip(ids, cutoffs, strict=True)]
    imported = [labels[i]["method"] == LabelMethod.IMPORTED for i in ids]
    # The same weights as the operating points: imported labels count with probability 1 in their own stratum.
    probability = [
        1.0 if imp or labels[i]["item__inclusion_probability"] is None else labels[i]["item__inclusion_probability"]
        for i, imp in zip(ids, imported, strict=True)
    ]
    strata = [
        IMPORTED_STRATUM if imp or labels[i]["item__stratum"] is None else labels[i]["item__stratum"]
        for i, imp in zip(ids, imported, strict=True)
    ]
    citation_errors = TrialCall.objects.filter(trial=trial, error_kind=CallErrorKind.CITATION).count()
    figures = trial_figures(
        [verdicts[i] for i in ids],
        correct,
        current,
        citation_errors=citation_errors,
        inclusion_probability=probability,
        strata=strata,
    )
    gates = promotion_gates(trial.gates, figures)
    calls = progress(trial)
    weighted = len(set(probability)) > 1
    disagreements = [
        {
            "decision_id": i,
            "request_id": labels[i]["decision__request_id"],
            "label": "correct" if ok else "incorrect",
            "candidate": v,
            "current": "answer" if cur else "abstain",
            "score": labels[i]["decision__gate_score"],
        }
        for i, v, ok, cur in zip(ids, figures.verdicts, correct, current, strict=True)
        if v is not None and (v == "answer") != bool(cur)
    ]
    return {
        "id": trial.pk,
        "route": trial.route.slug,
        "candidate_name": trial.candidate.name,
        "status": TrialStatus.DONE,
        "items": trial.items,
        "items_judged": figures.items,
        "items_all_errored": figures.excluded_items,
        "repeats": trial.repeats,
        "calls": {"made": calls["made"], "errors": calls["errors"], "total": calls["total"]},
        "candidate": figures.candidate,
        "current": {**figures.current, "cutoff": trial.cutoff, "cutoff_source": trial.cutoff_source},
        "mcnemar": {"p_value": figures.mcnemar_p, "n": figures.items},
        "gates": [g.as_dict() for g in gates],
        "passed": bool(gates) and all(g.passed for g in gates),
        "confusion": figures.confusion,
        "disagreements": disagreements,
        "estimator": "hajek" if weighted else "proportion",
        "interval": {"method": "wilson", "confidence": 0.95},
        "subset": trial.subset,
    }


def trial_as_dict(trial: Trial) -> dict[str, Any]:
    """`GET /api/v1/gate-trials/{id}`: the stored result when done, progress while running."""
    if trial.status == TrialStatus.DONE:
        return {
            **json.loads(trial.result_text),
            "sha256": trial.result_sha256,
            "created_at": trial.created_at.isoformat(),
            "finished_at": trial.finished_at.isoformat(),
        }
    calls = progress(trial)
    return {
        "id": trial.pk,
        "route": trial.route.slug,
        "candidate_name": trial.candidate.name,
        "status": trial.status,
        "error": trial.error or None,
        "items": trial.items,
        "repeats": trial.repeats,
        "calls": {"made": calls["made"], "errors": calls["errors"], "total": calls["total"]},
        "candidate": None,
        "current": None,
        "mcnemar": None,
        "gates": [],
        "passed": None,
        "created_at": trial.created_at.isoformat(),
    }


_FIGURES = (
    ("Unsafe full answers (on items labelled incorrect)", "unsafe_full_answers"),
    ("Coverage (full answers on items labelled correct)", "coverage"),
    ("Partial answers", "partial"),
    ("Surfaced conflicts", "conflict"),
    ("Abstentions", "abstain"),
    ("Stability (one verdict in every repeat)", "stability"),
)


def figure_rows(doc: dict[str, Any]) -> list[tuple[str, dict | None, dict | None]]:
    """(name, candidate figure, current gate figure) for the page's side-by-side table."""
    if not doc.get("candidate"):
        return []
    return [(name, doc["candidate"].get(key), doc["current"].get(key)) for name, key in _FIGURES]


def call_errors(trial: Trial, *, limit: int = 200) -> list[TrialCall]:
    return list(
        TrialCall.objects.filter(trial=trial, status=CallStatus.ERROR)
        .select_related("decision")
        .order_by("decision_id", "repeat")[:limit]
    )


def trial_evidence(trial: Trial) -> dict[str, Any]:
    """What a policy draft records when a passed trial is attached to it as evidence: the trial's id
    and the SHA-256 of its stored result document. Governance calls this (it may import trials)."""
    if trial.status != TrialStatus.DONE:
        raise NotFound(f"Trial {trial.pk} has not finished.")
    return {"trial_id": trial.pk, "sha256": trial.result_sha256, "passed": bool(trial.passed)}
