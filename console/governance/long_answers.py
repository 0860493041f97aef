"""A draft on a long route (issue 31): which event its gate's score estimates, which event the
route's harm model prices, and the warning when they differ (section 11.6 of the chapter behind
the gate's economics, "80 % of what?": a mean-support score read against an all-or-nothing target
"looks valid and the decision silently uses the wrong event").

Recorded in the draft's evidence (`long_answers`), with E[S] and Pr(S = 1) of the served graded
answers at the draft's cutoff side by side. The figures come from the evidence's chosen operating
point when it carries them (the long-answer rows of console.analysis); otherwise they are the plain
means over the graded served answers of the window as of the snapshot, said so in `figures_from`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Avg, Case, Count, F, FloatField, Q, When
from django.db.models.functions import Cast

from console.accounts.models import Route
from console.analysis import selectors as analysis_selectors
from console.analysis.params import Window
from console.ledger.claims import effective_functional
from console.ledger.models import Decision, GateFunctional, HarmModel, RouteAnswerSettings
from console.ledger.selectors import answer_settings

BLOCKING = "blocking"
# The functional that misreads each harm model: the event the score estimates is not the one the
# harm model prices. Unspecified is no mismatch (nothing is claimed), only a note.
MISMATCHED = {
    HarmModel.ALL_OR_NOTHING: {GateFunctional.EXPECTED_SUPPORT},
    HarmModel.AT_LEAST: {GateFunctional.EXPECTED_SUPPORT},
    HarmModel.PROPORTIONAL: {GateFunctional.P_FULLY_SUPPORTED},
}
_PRICED = {
    HarmModel.ALL_OR_NOTHING: "Pr(S = 1), every claim supported",
    HarmModel.AT_LEAST: "Pr(S >= s0)",
    HarmModel.PROPORTIONAL: "E[S], the expected share of supported claims",
}
_ESTIMATES = {
    GateFunctional.EXPECTED_SUPPORT: "E[S], the expected share of supported claims",
    GateFunctional.P_FULLY_SUPPORTED: "Pr(S = 1), every claim supported",
    GateFunctional.P_SUPPORT_AT_LEAST: "Pr(S >= s0)",
}


def is_mismatch(harm_model: str, functional: str) -> bool:
    return functional in MISMATCHED.get(harm_model, set())


def gate_functional_as_of(route: Route, settings: RouteAnswerSettings, as_of: datetime) -> str:
    """The functional of the newest decision ingested by `as_of` (its own, else the route's): what
    the gate declared when the evidence was read. One index probe, as for the traffic's versions."""
    newest = Decision.objects.filter(route=route, ingested_at__lte=as_of).order_by("-occurred_at", "-pk").first()
    if newest is None:
        return settings.gate_functional
    return effective_functional(newest, settings)


def _figure(row: dict[str, Any] | None, name: str) -> float | None:
    value = (row or {}).get(name)
    if isinstance(value, dict):
        value = value.get("value")
    return value if isinstance(value, int | float) else None


def _served_means(route: Route, window: Window, as_of: datetime, cutoff: float) -> dict[str, Any]:
    """Plain means over the graded served answers (score >= cutoff) with at least one verifiable claim."""
    served = analysis_selectors.labelled_as_of(route, window, as_of).filter(
        gate_score__gte=cutoff, final_label__claims_verifiable__gt=0
    )
    support = Cast("final_label__claims_supported", FloatField()) / Cast("final_label__claims_verifiable", FloatField())
    figures = served.aggregate(
        answers=Count("pk"),
        expected_support=Avg(support),
        p_fully_supported=Avg(Case(When(final_label__correct=True, then=1.0), default=0.0, output_field=FloatField())),
        unsupported=Avg(F("final_label__claims_verifiable") - F("final_label__claims_supported")),
        fully=Count("pk", filter=Q(final_label__correct=True)),
    )
    return figures


def long_answer_evidence(
    *, route: Route, window: Window, as_of: datetime, cutoff: float, row: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The evidence's `long_answers` section and its warnings; (None, []) on a short route."""
    settings = answer_settings(route)
    if not settings.is_long:
        return None, []
    functional = gate_functional_as_of(route, settings, as_of)
    expected, fully = _figure(row, "expected_support"), _figure(row, "p_fully_supported")
    if expected is not None and fully is not None:
        # The long row's own count: the graded served answers its shares are read over.
        figures_from, answers = "operating_points", (row or {}).get("graded_served_verifiable")
    else:
        means = _served_means(route, window, as_of, cutoff)
        expected, fully, answers = means["expected_support"], means["p_fully_supported"], means["answers"]
        figures_from = "graded_served_means"
    section = {
        "answer_form": settings.answer_form,
        "harm_model": settings.harm_model,
        "support_threshold": settings.support_threshold,
        "gate_functional": functional or None,
        "at_cutoff": {
            "cutoff": cutoff,
            "expected_support": expected,
            "p_fully_supported": fully,
            "graded_served_answers": answers,
            "figures_from": figures_from,
        },
        "mismatch": is_mismatch(settings.harm_model, functional),
    }
    return section, _warnings(section, cutoff)


def _shown(value: float | None) -> str:
    return "unknown (no graded served answers)" if value is None else f"{value:.3f}"


def _warnings(section: dict[str, Any], cutoff: float) -> list[dict[str, Any]]:
    at = section["at_cutoff"]
    side_by_side = (
        f"At cutoff {cutoff:g}: E[S] = {_shown(at['expected_support'])}, Pr(S = 1) = {_shown(at['p_fully_supported'])}."
    )
    functional, harm = section["gate_functional"], section["harm_model"]
    if functional is None:
        return [
            {
                "code": "functional_unspecified",
                "message": f"The gate does not say what its score estimates, and the harm model prices "
                f"{_PRICED[harm]}: check that the score estimates that event. {side_by_side}",
            }
        ]
    if not section["mismatch"]:
        return []
    return [
        {
            "code": "functional_mismatch",
            "level": BLOCKING,
            "message": f"The gate's score estimates {_ESTIMATES[functional]}, but the {harm} harm model prices "
            f"{_PRICED[harm]}: the cutoff is read against the wrong event. {side_by_side}",
            "gate_functional": functional,
            "harm_model": harm,
            "expected_support": at["expected_support"],
            "p_fully_supported": at["p_fully_supported"],
        }
    ]


def blocking_codes(warnings: list[dict[str, Any]]) -> list[str]:
    """The codes of the warnings a signer must acknowledge one by one."""
    return [w["code"] for w in warnings if w.get("level") == BLOCKING]
