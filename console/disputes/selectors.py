"""Reads of disputes: who may see which, one dispute as the API returns it, a decision's disputes,
and the per-band summary shown beside the operating-points table."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Count, Exists, F, OuterRef, Q, QuerySet, Subquery, Value, When
from django.http import Http404
from django.utils import timezone

from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import Forbidden, NotFound
from console.core.validation import has_lone_surrogate
from console.disputes.models import AppealLinkRevocation, AppealSecret, Dispute, Kind, Status
from console.ledger.models import Decision


def readable_disputes(user) -> QuerySet[Dispute]:
    return permissions.visible(Dispute.objects.all(), user, permissions.DISPUTE_OPENERS)


@dataclass(frozen=True)
class DisputeFilters:
    route: str = ""
    status: str = ""
    kind: str = ""
    overdue: bool = False
    mine: bool = False
    no_such_route: bool = False

    @classmethod
    def from_params(cls, params) -> DisputeFilters:
        truthy = ("1", "true", "yes", "on")
        route = params.get("route", "")
        if len(route) > 64 or "\x00" in route or has_lone_surrogate(route):
            return cls(no_such_route=True)  # no slug is like this: the list is empty, not a database error
        status = params.get("status", "")
        kind = params.get("kind", "")
        return cls(
            route=route,
            status=status if status in Status.values or status == "all" else "",
            kind=kind if kind in Kind.values else "",
            overdue=params.get("overdue", "").lower() in truthy,
            mine=params.get("mine", "").lower() in truthy,
        )


def dispute_list(user, filters: DisputeFilters) -> QuerySet[Dispute]:
    """Open disputes by default, soonest due first."""
    if not permissions.can_read_disputes(user):
        raise Forbidden("Your role does not allow reading this.")  # no word of disputes to graders
    queryset = readable_disputes(user).select_related("route", "opened_by", "assigned_to", "resolved_by", "policy")
    if filters.no_such_route:
        return queryset.none()
    if filters.route:
        queryset = queryset.filter(route__slug=filters.route)
    if filters.status != "all":
        queryset = queryset.filter(status=filters.status or Status.OPEN)
    if filters.kind:
        queryset = queryset.filter(kind=filters.kind)
    if filters.overdue:
        queryset = queryset.filter(status=Status.OPEN, due_by__lt=timezone.now())
    if filters.mine:
        queryset = queryset.filter(Q(assigned_to=user) | Q(opened_by=user))
    return queryset.order_by("due_by", "pk")


def get_dispute_for_user(user, pk: int) -> Dispute:
    """The dispute if the user may read its route's decisions; 404 otherwise (no hint it exists)."""
    if not permissions.can_read_disputes(user):
        raise Forbidden("Your role does not allow reading this.")  # no word of disputes to graders
    dispute = (
        readable_disputes(user)
        .select_related("route", "decision", "passage", "opened_by", "assigned_to", "resolved_by", "policy")
        .filter(pk=pk)
        .first()
    )
    if dispute is None:
        raise NotFound("No such dispute.")
    return dispute


def decision_of(dispute: Dispute) -> Decision | None:
    if dispute.decision_id:
        return dispute.decision
    return Decision.objects.filter(route_id=dispute.route_id, request_id=dispute.request_id).first()


def disputes_of_decision(decision: Decision) -> list[Dispute]:
    """Its disputes, appeals made before ingest included (matched on route and request id)."""
    return list(
        Dispute.objects.filter(Q(decision=decision) | Q(route_id=decision.route_id, request_id=decision.request_id))
        .select_related("passage", "opened_by", "assigned_to", "resolved_by")
        .order_by("opened_at", "pk")
    )


def _disputes_of_outer_decision() -> QuerySet[Dispute]:
    # Matched on route and request id, so appeals made before ingest count too.
    return Dispute.objects.filter(route_id=OuterRef("route_id"), request_id=OuterRef("request_id")).order_by()


def dispute_status_annotations() -> dict[str, Any]:
    """For a query of decisions: "dispute_status" (open while any dispute is open, else how the
    one resolved last ended) and "dispute_count" (NULL when never disputed)."""
    latest = _disputes_of_outer_decision().order_by(
        Case(When(status=Status.OPEN, then=Value(0)), default=Value(1)),
        F("resolved_at").desc(nulls_last=True),
        "-pk",
    )
    count = _disputes_of_outer_decision().values("route_id").annotate(n=Count("pk")).values("n")
    return {"dispute_status": Subquery(latest.values("status")[:1]), "dispute_count": Subquery(count[:1])}


def dispute_status_of(decision: Decision) -> dict[str, Any] | None:
    """{"status", "count"} from the annotations above; None when never disputed."""
    if not decision.dispute_count:
        return None
    return {"status": decision.dispute_status, "count": decision.dispute_count}


def is_overdue(dispute: Dispute, now=None) -> bool:
    return dispute.is_open and dispute.due_by < (now or timezone.now())


def appellant_hidden(user, dispute: Dispute) -> bool:
    """True when the dispute is an appeal whose message and address this user may not read."""
    return dispute.kind == Kind.APPEAL and not permissions.can_read_appellant(user, dispute.route)


def dispute_as_dict(dispute: Dispute, user) -> dict[str, Any]:
    """The API's dispute; an appeal's message and address are null for who may not read them."""
    hidden = appellant_hidden(user, dispute)
    evidence = None
    if dispute.passage_id:
        evidence = {"passage_id": dispute.passage_id, "quote": dispute.quote}
    elif dispute.source_url:
        evidence = {"url": dispute.source_url, "quote": dispute.quote}
    return {
        "id": dispute.pk,
        "route": dispute.route.slug,
        "request_id": dispute.request_id,
        "decision": dispute.decision_id or getattr(decision_of(dispute), "pk", None),
        "kind": dispute.kind,
        "status": dispute.status,
        "resolution": None if dispute.is_open else dispute.status,
        "outcome": dispute.outcome_words or None,
        "reason": None if hidden else dispute.reason,
        "evidence": evidence,
        "quote_ranges": dispute.quote_ranges,
        "contact": None if hidden else dispute.contact,
        "appellant_email": None if hidden or dispute.kind != Kind.APPEAL else dispute.appellant_email,
        "opened_by": dispute.opened_by.get_username() if dispute.opened_by_id else None,
        "appeal": dispute.kind == Kind.APPEAL,
        "opened_at": dispute.opened_at.isoformat(),
        "due_by": dispute.due_by.isoformat(),
        "response_hours": dispute.response_hours,
        "overdue": is_overdue(dispute),
        "policy_version": dispute.policy.version if dispute.policy_id else None,
        "no_signed_escalation_path": dispute.no_signed_escalation_path,
        "escalated_at": dispute.escalated_at.isoformat() if dispute.escalated_at else None,
        "assigned_to": dispute.assigned_to.get_username() if dispute.assigned_to_id else None,
        "resolved_at": dispute.resolved_at.isoformat() if dispute.resolved_at else None,
        "resolved_by": dispute.resolved_by.get_username() if dispute.resolved_by_id else None,
        "note": dispute.resolution_note,
    }


def route_for_appeal(slug: str) -> Route:
    route = Route.objects.filter(slug=slug).first()
    if route is None:
        raise Http404("No such appeal.")
    return route


def highlighted_quote(dispute: Dispute) -> list[tuple[str, bool]]:
    """The quote's passage as (text, is_quote) pieces from the stored character ranges."""
    if not dispute.passage_id or not dispute.quote_ranges:
        return []
    text, pieces, at = dispute.passage.text, [], 0
    for start, end in dispute.quote_ranges.get("chars", []):
        if start < at:
            continue
        pieces += [(text[at:start], False), (text[start:end], True)]
        at = end
    pieces.append((text[at:], False))
    return [p for p in pieces if p[0]]


# --- beside the measurement -------------------------------------------------------------------


def band_summary(route: Route, edges: list[float]) -> list[dict[str, Any]]:
    """Per score band [edges[i], edges[i+1]) of the disputed decisions' gate scores: opened,
    overturned, upheld and the median hours to resolution (upheld or overturned)."""
    rows = [
        {"low": low, "high": high, "opened": 0, "overturned": 0, "upheld": 0, "hours": []}
        for low, high in zip(edges, edges[1:], strict=False)
    ]
    disputes = (
        Dispute.objects.filter(route=route)
        .filter(Q(decision__isnull=False) | Q(request_id__in=Decision.objects.filter(route=route).values("request_id")))
        .values_list("decision__gate_score", "request_id", "status", "opened_at", "resolved_at")
    )
    scores = dict(
        Decision.objects.filter(route=route, request_id__in=[d[1] for d in disputes if d[0] is None]).values_list(
            "request_id", "gate_score"
        )
    )
    for score, request_id, status, opened_at, resolved_at in disputes:
        score = scores.get(request_id) if score is None else score
        if score is None:
            continue
        for row in rows:
            if row["low"] <= score < row["high"] or (row is rows[-1] and score == row["high"]):
                row["opened"] += 1
                if status in (Status.UPHELD, Status.OVERTURNED):
                    row[status] += 1
                    row["hours"].append((resolved_at - opened_at).total_seconds() / 3600)
                break
    for row in rows:
        hours = row.pop("hours")
        row["median_hours"] = statistics.median(hours) if hours else None
    return rows


def appeal_link_state(route: Route, request_id: str) -> tuple[str | None, bool]:
    """(the route's appeal secret or None before its first link, whether this link is revoked) in
    one query: the refusal's page reads both for its appeal-link panel."""
    revoked = Exists(AppealLinkRevocation.objects.filter(route=route, request_id=request_id))
    row = (
        Route.objects.filter(pk=route.pk)
        .annotate(
            secret=Subquery(AppealSecret.objects.filter(route=OuterRef("pk")).values("secret")[:1]), revoked=revoked
        )
        .values("secret", "revoked")
        .first()
    )
    return (row["secret"], row["revoked"]) if row else (None, False)


def link_revocation(route: Route, request_id: str) -> AppealLinkRevocation | None:
    return AppealLinkRevocation.objects.filter(route=route, request_id=request_id).select_related("revoked_by").first()


def appeals_through_link(route: Route, request_id: str) -> list[Dispute]:
    """The appeals made through one refusal's link, oldest first: what its page shows a returning
    appellant (their status and outcome, nothing about who handled them)."""
    appeals = Dispute.objects.filter(route=route, request_id=request_id, kind=Kind.APPEAL)
    return list(appeals.order_by("opened_at", "pk"))
