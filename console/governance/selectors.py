"""Reads of policy versions: what a user may see, the policy in force, its history and compliance."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Abs
from django.db.models.lookups import GreaterThan

from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import NotFound
from console.governance.evidence import arrivals_since, as_of_text
from console.governance.models import IN_FORCE, PolicyStatus, PolicyVersion
from console.ledger.models import Decision
from console.ledger.selectors import answer_settings

# Compared as floats: a logged cutoff within this of the signed one follows the policy.
CUTOFF_TOLERANCE = 1e-9


def route_for_policy_reader(user, slug: str) -> Route:
    """The route if the user may read its policy: 404 for routes they may not see at all, 403 with the
    reason for a route they see (as a reader) whose policy is not theirs to read."""
    return permissions.route_for(user, slug, allowed=permissions.can_read_policy, refused=_policy_refused)


def _policy_refused(route: Route) -> str:
    return (
        f"The policy of {route.name} carries the statistical evidence behind its cutoff, which your role "
        "on this route does not include. A reviewer or the route's policy owner can show it to you."
    )


def policy_versions(route: Route) -> QuerySet[PolicyVersion]:
    return (
        PolicyVersion.objects.filter(route=route)
        .select_related("route", "owner", "created_by", "signed_by")
        .order_by("-version")
    )


def get_policy_for_user(user, pk: int) -> PolicyVersion:
    """The version if the user may read its route's policy; 404 otherwise (no hint that it exists)."""
    policy = PolicyVersion.objects.select_related("route", "owner", "created_by", "signed_by").filter(pk=pk).first()
    if policy is None or not permissions.can_read_policy(user, policy.route):
        raise NotFound("No such policy version.")
    return policy


def get_policy(pk: int) -> PolicyVersion:
    """Any version by id, for the owner-only actions: everyone but its owner gets 403 there, not 404."""
    policy = PolicyVersion.objects.select_related("route", "owner", "created_by", "signed_by").filter(pk=pk).first()
    if policy is None:
        raise NotFound("No such policy version.")
    return policy


def eligible_owners(route: Route) -> list:
    """Users who hold policy_owner on the route (or on every route): who may be named owner."""
    from django.contrib.auth import get_user_model

    from console.accounts.models import Role, RoleGrant

    grants = RoleGrant.objects.filter(role=Role.POLICY_OWNER).filter(Q(route=route) | Q(route__isnull=True))
    return list(get_user_model().objects.filter(pk__in=grants.values("user_id"), is_active=True).order_by("username"))


def policy_in_force(route: Route) -> PolicyVersion | None:
    return policy_versions(route).filter(status__in=IN_FORCE).first()


def newer_in_force(policy: PolicyVersion) -> PolicyVersion | None:
    """The version in force on the draft's route when the draft is older than it: drafted before
    that version was signed. Signing such a draft is a roll-back, never an ordinary signature."""
    in_force = (
        PolicyVersion.objects.filter(route_id=policy.route_id, status__in=IN_FORCE)
        .exclude(pk=policy.pk)
        .select_related("owner")
        .first()
    )
    if in_force is None or in_force.signed_at is None or policy.created_at >= in_force.signed_at:
        return None
    return in_force


def policy_in_force_at(route_id: int, at) -> PolicyVersion | None:
    """The signed version in force at a moment: the last one signed at or before it. Signing
    supersedes the previous version, so signature times alone order the versions in force."""
    return (
        PolicyVersion.objects.filter(route_id=route_id, signed_at__isnull=False, signed_at__lte=at)
        .select_related("owner")
        .order_by("-signed_at")
        .first()
    )


def decision_policy_context(user, decision: Decision) -> dict[str, Any]:
    """For the decision page: the cutoff the gate logged beside the signed cutoff in force then."""
    if not permissions.can_read_policy(user, decision.route):
        return {}
    signed = policy_in_force_at(decision.route_id, decision.occurred_at)
    follows = signed is None or abs(signed.cutoff - decision.cutoff) <= CUTOFF_TOLERANCE
    return {"signed_policy": signed, "gate_follows_policy": follows}


def signed_policy_as_dict(decision: Decision) -> dict[str, Any] | None:
    """For the decision lookup: the signed version in force when the decision was made, if any."""
    signed = policy_in_force_at(decision.route_id, decision.occurred_at)
    if signed is None:
        return None
    return {
        "id": signed.pk,
        "version": signed.version,
        "cutoff": signed.cutoff,
        "owner": signed.owner.get_username(),
        "signed_at": signed.signed_at.isoformat(),
        "gate_followed": abs(signed.cutoff - decision.cutoff) <= CUTOFF_TOLERANCE,
    }


# Decisions that logged a cutoff other than the signed one in force at their time, counted from the
# hourly cutoff counters (RouteCutoffCount), not from every decision: in an hour no signature falls
# in, every decision had the policy in force at the hour's start; only the hours a route's
# signatures fall in are read decision by decision.
_SIGNED_AT = """
    SELECT p.cutoff FROM governance_policyversion p
     WHERE p.route_id = {t}.route_id AND p.signed_at IS NOT NULL AND p.signed_at <= {t}.{at}
     ORDER BY p.signed_at DESC LIMIT 1
"""
_BOUNDARY_HOURS = """
    SELECT DISTINCT route_id, date_trunc('hour', signed_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS hour
      FROM governance_policyversion WHERE signed_at IS NOT NULL {route_condition}
"""
_NOT_FOLLOWING_SQL = f"""
    SELECT route_id, sum(decisions)::bigint FROM (
        SELECT c.route_id, c.decisions
          FROM ledger_routecutoffcount c
          JOIN LATERAL ({_SIGNED_AT.format(t="c", at="hour")}) signed ON true
         WHERE abs(c.cutoff - signed.cutoff) > %(tolerance)s AND c.decisions > 0 {{counts_condition}}
           AND NOT EXISTS (SELECT 1 FROM ({_BOUNDARY_HOURS.format(route_condition="")}) b
                            WHERE b.route_id = c.route_id AND b.hour = c.hour)
        UNION ALL
        SELECT d.route_id, 1
          FROM ({_BOUNDARY_HOURS.format(route_condition="{route_condition}")}) b
          JOIN ledger_decision d ON d.route_id = b.route_id
           AND d.occurred_at >= b.hour AND d.occurred_at < b.hour + interval '1 hour'
          JOIN LATERAL ({_SIGNED_AT.format(t="d", at="occurred_at")}) signed ON true
         WHERE abs(d.cutoff - signed.cutoff) > %(tolerance)s
    ) AS found
    GROUP BY route_id
"""


def not_following_policy_condition() -> GreaterThan:
    """For the refusals list's filter: the decision logged a cutoff other than the signed cutoff in
    force at its time (as `_NOT_FOLLOWING_SQL` counts them; decisions before the first signature,
    whose signed cutoff is NULL, never match)."""
    signed = (
        PolicyVersion.objects.filter(
            route_id=OuterRef("route_id"), signed_at__isnull=False, signed_at__lte=OuterRef("occurred_at")
        )
        .order_by("-signed_at")
        .values("cutoff")[:1]
    )
    return GreaterThan(Abs(F("cutoff") - Subquery(signed)), CUTOFF_TOLERANCE)


def decisions_not_following_policy(route_ids: list[int] | None = None) -> dict[int, int]:
    """Per route id, how many decisions logged a cutoff other than the signed cutoff in force at
    their time (one query; decisions before the first signature are not counted)."""
    counts_condition = route_condition = ""
    params: dict[str, Any] = {"tolerance": CUTOFF_TOLERANCE}
    if route_ids is not None:
        if not route_ids:
            return {}
        counts_condition, route_condition = "AND c.route_id = ANY(%(routes)s)", "AND route_id = ANY(%(routes)s)"
        params["routes"] = list(route_ids)
    sql = _NOT_FOLLOWING_SQL.format(counts_condition=counts_condition, route_condition=route_condition)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {route_id: n for route_id, n in cursor.fetchall() if n}


def decisions_not_following_policy_list(route: Route, *, limit: int = 20) -> list[dict[str, Any]]:
    """The newest decisions of the route that logged a cutoff other than the signed one in force then,
    with that version (one query): what "gate not following policy" lists. Read in the newest `limit`
    hours whose counters hold such decisions (each holds one at least), and the hours signatures
    fall in, not by walking back through every decision that followed the policy."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH hours AS (
                (SELECT c.hour FROM ledger_routecutoffcount c
                   JOIN LATERAL ({_SIGNED_AT.format(t="c", at="hour")}) signed ON true
                  WHERE c.route_id = %(route)s AND c.decisions > 0 AND abs(c.cutoff - signed.cutoff) > %(tolerance)s
                  ORDER BY c.hour DESC LIMIT %(limit)s)
                UNION
                SELECT hour FROM ({_BOUNDARY_HOURS.format(route_condition="AND route_id = %(route)s")}) b
            )
            SELECT d.id, d.request_id, d.occurred_at, d.cutoff, signed.cutoff, signed.version
              FROM hours h
              JOIN ledger_decision d ON d.route_id = %(route)s
               AND d.occurred_at >= h.hour AND d.occurred_at < h.hour + interval '1 hour'
              JOIN LATERAL (
                    SELECT p.cutoff, p.version FROM governance_policyversion p
                     WHERE p.route_id = d.route_id AND p.signed_at IS NOT NULL AND p.signed_at <= d.occurred_at
                     ORDER BY p.signed_at DESC LIMIT 1
                   ) signed ON true
             WHERE abs(d.cutoff - signed.cutoff) > %(tolerance)s
             ORDER BY d.occurred_at DESC, d.id DESC
             LIMIT %(limit)s
        """,
            {"route": route.pk, "tolerance": CUTOFF_TOLERANCE, "limit": limit},
        )
        columns = ("id", "request_id", "occurred_at", "logged_cutoff", "signed_cutoff", "version")
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def evidence_of(policy: PolicyVersion) -> dict[str, Any]:
    return policy.evidence_document


CHANGED_FIELDS = (
    ("cutoff", "Cutoff"),
    ("band_lower", "Band lower edge"),
    ("exchange_rate", "Exchange rate"),
    ("cost_threshold", "Cost threshold"),
    ("owner", "Owner"),
    ("escalation_contact", "Escalation contact"),
    ("escalation_channel", "Escalation channel"),
    ("escalation_response_hours", "Response time (hours)"),
    ("refusal_message", "Refusal message"),
    ("filters", "Evidence window"),
    ("data_version", "Data version"),
)


def _value(policy: PolicyVersion, field: str) -> Any:
    return policy.owner.get_username() if field == "owner" else getattr(policy, field)


def window_text(filters: dict[str, Any] | None) -> str:
    """An evidence window in words: its dates, then its version and segment filters."""
    filters = filters or {}
    start, end = filters.get("from"), filters.get("to")
    parts = []
    if start or end:
        parts.append(f"from {start or 'the first decision'} to {end or 'the signature'}")
    for group in ("versions", "segments"):
        parts += [f"{key}={value}" for key, value in sorted((filters.get(group) or {}).items())]
    return ", ".join(parts) or "all decisions"


def _shown(field: str, value: Any) -> str | None:
    """A field's value as the history shows it: text, never a data structure's repr."""
    if value is None:
        return None
    if field == "filters":
        return window_text(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def changes_between(older: PolicyVersion, newer: PolicyVersion) -> list[dict[str, Any]]:
    """What changed from one version to the next: per field, its label and both values as text."""
    return [
        {"field": label, "old": _shown(field, _value(older, field)), "new": _shown(field, _value(newer, field))}
        for field, label in CHANGED_FIELDS
        if _value(older, field) != _value(newer, field)
    ]


def history(route: Route) -> list[dict[str, Any]]:
    """Every version, newest first, with what changed from the version before it."""
    versions = list(policy_versions(route))
    rows = []
    for index, policy in enumerate(versions):
        before = versions[index + 1] if index + 1 < len(versions) else None
        rows.append({"policy": policy, "changes": changes_between(before, policy) if before else []})
    return rows


def escalation_of(policy: PolicyVersion) -> dict[str, Any]:
    return {
        "contact": policy.escalation_contact,
        "channel": policy.escalation_channel,
        "response_hours": policy.escalation_response_hours,
    }


def arrived_since(policy: PolicyVersion) -> dict[str, Any] | None:
    """For a draft: decisions and final labels that arrived after its evidence's `as_of`."""
    return arrivals_since(policy) if policy.status == PolicyStatus.DRAFT else None


def warnings_now(policy: PolicyVersion, since: dict[str, Any] | None) -> list[dict[str, str]]:
    """The warnings stored with the evidence, and for a draft the one about traffic since `as_of`."""
    return policy.warnings + ([since["warning"]] if since and since["warning"] else [])


def policy_as_dict(policy: PolicyVersion, *, with_evidence: bool = True) -> dict[str, Any]:
    """A version as the API returns it; ``evidence`` is the stored text parsed, ``evidence_text`` the
    text itself, whose SHA-256 is ``evidence_sha256``, computed as of ``as_of``. With the evidence,
    a draft adds ``arrived_since`` (what its evidence does not count) and its warning to
    ``warnings``; lists leave them out, so their queries do not grow with the drafts."""
    since = arrived_since(policy) if with_evidence else None
    data = {
        "id": policy.pk,
        "route": policy.route.slug,
        "version": policy.version,
        "status": policy.status,
        "cutoff": policy.cutoff,
        "band_lower": policy.band_lower,
        "exchange_rate": policy.exchange_rate,
        "exchange_answers": policy.exchange_answers,
        "costs": policy.costs,
        "cost_threshold": policy.cost_threshold,
        "owner": policy.owner.get_username(),
        "created_by": policy.created_by.get_username(),
        "created_at": policy.created_at.isoformat(),
        "escalation": escalation_of(policy),
        "refusal_message": policy.refusal_message,
        "rationale": policy.rationale,
        "filters": policy.filters,
        "confidence": policy.confidence,
        "interval": policy.interval,
        "data_version": policy.data_version,
        "warnings": warnings_now(policy, since),
        "evidence_sha256": policy.evidence_sha256,
        "as_of": as_of_text(policy.evidence_as_of) if policy.evidence_as_of else None,
        "signed_at": policy.signed_at.isoformat() if policy.signed_at else None,
        "signed_by": policy.signed_by.get_username() if policy.signed_by_id else None,
    }
    if with_evidence:
        data |= {"evidence": evidence_of(policy), "evidence_text": policy.evidence_text, "arrived_since": since}
    return data


def route_policy_as_dict(policy: PolicyVersion) -> dict[str, Any]:
    """What the answering system reads: the policy in force and nothing about its evidence."""
    return {
        "route": policy.route.slug,
        "version": policy.version,
        "status": policy.status,
        "cutoff": policy.cutoff,
        "band_lower": policy.band_lower,
        "refusal_message": policy.refusal_message,
        "escalation": escalation_of(policy),
        "owner": policy.owner.get_username(),
        "signed_at": policy.signed_at.isoformat() if policy.signed_at else None,
        # How the route's answers are judged now (its settings, not the version's): the gateway
        # compares the score field its gate's functional names with the cutoff.
        **_answer_fields(answer_settings(policy.route)),
    }


def _answer_fields(settings) -> dict[str, Any]:
    return {
        "answer_form": settings.answer_form,
        "harm_model": settings.harm_model,
        "support_threshold": settings.support_threshold,
        "gate_functional": settings.gate_functional or None,
    }
