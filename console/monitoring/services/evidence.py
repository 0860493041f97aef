"""Refreshing stale evidence: a sampling plan for current traffic, sized like a recheck sample."""

from __future__ import annotations

from django.db import transaction

from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import Conflict, Forbidden, InvalidInput
from console.governance.models import IN_FORCE, PolicyVersion
from console.monitoring.models import LABEL_AGE_MAX_DAYS, RouteMonitoring
from console.monitoring.selectors import label_age_limit_days
from console.monitoring.services.rechecks import recheck_plan
from grading.services.pool import grading_plan_set


def evidence_refresh_request(*, actor: Actor, user, route: Route) -> dict:
    """Set the route's grading plan so current traffic is graded again: two bands split at the
    signed cutoff, each sized to reach ±5 points (the recheck sample's plan)."""
    if not permissions.can_refresh_evidence(user, route):
        raise Forbidden("Only the route's policy owner or a reviewer may refresh the graded sample.")
    policy = PolicyVersion.objects.filter(route=route, status__in=IN_FORCE).first()
    if policy is None:
        raise Conflict("The route has no policy in force.", code="no_policy")
    plan = recheck_plan(policy)
    # The plan and the request that set it are one change: both land, with their events, or neither.
    with transaction.atomic(durable=True):
        grading_plan_set(actor=actor, route=route, bands=[(b["low"], b["high"], b["target"]) for b in plan["bands"]])
        audit_record(
            actor=actor,
            action=Action.EVIDENCE_REFRESH_REQUESTED,
            object_type="route",
            object_id=route.slug,
            route=route.slug,
            payload={"policy": policy.pk, "plan": plan},
        )
    return plan


def route_monitoring_set(*, actor: Actor, user, route: Route, evidence_max_label_age_days: int) -> RouteMonitoring:
    """Set how old the signed evidence's newest label may be before the evidence counts as stale."""
    if not permissions.can_set_route_monitoring(user, route):
        raise Forbidden("Only the route's policy owner or a reviewer may change its monitoring settings.")
    days = evidence_max_label_age_days
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= LABEL_AGE_MAX_DAYS:
        raise InvalidInput(f"The label age limit must be a whole number of days from 1 to {LABEL_AGE_MAX_DAYS}.")
    with transaction.atomic():
        old = label_age_limit_days(route.pk)
        settings_row = RouteMonitoring.objects.select_for_update().filter(route=route).first() or RouteMonitoring(
            route=route
        )
        settings_row.evidence_max_label_age_days = days
        settings_row.full_clean()
        settings_row.save()
        audit_record(
            actor=actor,
            action=Action.ROUTE_MONITORING_CHANGED,
            object_type="route",
            object_id=route.slug,
            route=route.slug,
            payload={"evidence_max_label_age_days": {"old": old, "new": days}},
        )
    return settings_row
