"""Release rechecks: opened by ingest when traffic runs on versions the signed evidence did not
cover, closed by the owner (a new signed version, or accepted unchanged with a note)."""

from __future__ import annotations

import json
import math
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts import permissions
from console.core.errors import Conflict, Forbidden, InvalidInput
from console.governance.models import IN_FORCE, PolicyStatus, PolicyVersion
from console.governance.services import policy_mark_needs_recheck
from console.ledger.models import Decision
from console.monitoring.models import VERSION_KEYS, Recheck, RecheckResolution, RecheckStatus
from console.monitoring.notices import notify_owner
from console.stats.planning import grades_for_half_width
from grading.services.pool import grading_plan_set

NOTE_MAX = 4000
# A recheck sample sized for less than ±0.5 points needs tens of thousands of grades; one for
# more than ±25 points cannot tell a move of the false-abstention rate from noise.
HALF_WIDTH_MIN = 0.005
HALF_WIDTH_MAX = 0.25


def combination(versions: dict[str, Any]) -> dict[str, Any]:
    """The versions that make a release: model, retriever, corpus and gate, as logged."""
    return {key: versions[key] for key in VERSION_KEYS if key in versions}


def combination_key(versions: dict[str, Any]) -> str:
    return json.dumps({key: str(value) for key, value in combination(versions).items()}, sort_keys=True)


def covered_versions(policy: PolicyVersion) -> dict[str, set[str]]:
    """Per version key, the values the signed evidence covers: the versions of its graded sample
    and of the traffic at signing (the evidence records both)."""
    evidence = policy.evidence_document
    covered: dict[str, set[str]] = {}
    for key, values in (evidence.get("graded_versions") or {}).items():
        covered.setdefault(key, set()).update(str(v) for v in values)
    for key, value in (evidence.get("traffic_versions") or {}).items():
        covered.setdefault(key, set()).add(str(value))
    return covered


def is_covered(versions: dict[str, Any], covered: dict[str, set[str]]) -> bool:
    return all(str(value) in covered.get(key, set()) for key, value in combination(versions).items())


def recheck_plan(policy: PolicyVersion, *, half_width: float | None = None) -> dict[str, Any]:
    """Two score bands split at the signed cutoff, each sized by the planner so the share it
    estimates (false abstention below the cutoff, wrong served above) reaches ± half_width; the
    signed evidence's false-abstention estimate is its planning value, 0.5 (the worst case) when
    it has none."""
    half_width = half_width or settings.RECHECK_HALF_WIDTH
    row = policy.evidence_document.get("chosen_row") or {}
    far = (row.get("false_abstention_rate") or {}).get("value")
    refused_target = grades_for_half_width(far if far is not None and 0 < far < 1 else 0.5, half_width)
    # The evidence gives wrong answers per 1000 decisions, not the share among served: plan the worst case.
    served_target = grades_for_half_width(0.5, half_width)
    return {
        "half_width": half_width,
        "planning_far": far,
        "bands": [
            {"low": 0.0, "high": policy.cutoff, "target": refused_target, "measures": "false_abstention"},
            {"low": policy.cutoff, "high": 1.000001, "target": served_target, "measures": "wrong_served"},
        ],
    }


_INSERT_SQL = """
    INSERT INTO monitoring_recheck (policy_id, route_id, versions, versions_key, status, opened_at, plan,
                                    resolution, note)
    VALUES (%s, %s, %s::jsonb, %s, 'open', %s, '{}'::jsonb, '', '')
    ON CONFLICT (policy_id, versions_key) DO NOTHING
    RETURNING id
"""


def _insert_once(policy: PolicyVersion, versions: dict[str, Any]) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT_SQL,
            [policy.pk, policy.route_id, json.dumps(combination(versions)), combination_key(versions), timezone.now()],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def rechecks_open(*, actor: Actor, decision_ids: list[int]) -> list[Recheck]:
    """Open a recheck for every combination of versions in these decisions that the evidence of
    their route's policy in force does not cover. Exactly once per combination, however many
    ingest batches race: the insert that loses the conflict opens nothing."""
    seen = Decision.objects.filter(pk__in=decision_ids).values_list("route_id", "versions").distinct()
    by_route: dict[int, dict[str, dict[str, Any]]] = {}
    for route_id, versions in seen:
        wanted = combination(versions or {})
        if wanted:
            by_route.setdefault(route_id, {})[combination_key(wanted)] = wanted
    opened = []
    policies = PolicyVersion.objects.filter(route_id__in=by_route, status__in=IN_FORCE).select_related("route", "owner")
    for policy in policies:
        covered = covered_versions(policy)
        for versions in by_route[policy.route_id].values():
            if is_covered(versions, covered):
                continue
            recheck = _recheck_open(actor=actor, policy=policy, versions=versions)
            if recheck is not None:
                opened.append(recheck)
    return opened


def _recheck_open(*, actor: Actor, policy: PolicyVersion, versions: dict[str, Any]) -> Recheck | None:
    with transaction.atomic():
        recheck_id = _insert_once(policy, versions)
        if recheck_id is None:
            return None
        recheck = Recheck.objects.select_related("route", "policy").get(pk=recheck_id)
        recheck.plan = recheck_plan(policy)
        recheck.save(update_fields=["plan"])
        # The plan applies to the route's traffic from now on: after a release that is the new versions'
        # traffic, and its items enter the blind queue like any other sampled decision.
        grading_plan_set(
            actor=actor,
            route=policy.route,
            bands=[(band["low"], band["high"], band["target"]) for band in recheck.plan["bands"]],
        )
        old_status = policy.status
        policy = policy_mark_needs_recheck(actor=actor, policy=policy)
        audit_record(
            actor=actor,
            action=Action.RECHECK_OPENED,
            object_type="recheck",
            object_id=recheck.pk,
            route=policy.route.slug,
            payload={
                "policy": policy.pk,
                "version": policy.version,
                "versions": recheck.versions,
                "plan": recheck.plan,
                "policy_status": {"old": old_status, "new": policy.status},
            },
        )
        link = reverse("monitoring-recheck", args=[policy.route.slug, recheck.pk])
        listed = ", ".join(f"{key} {value}" for key, value in recheck.versions.items())
        notify_owner(
            policy=policy,
            subject=f"[{policy.route.slug}] Recheck opened: new versions ({listed})",
            body=(
                f"Traffic on route {policy.route.slug} now runs on versions the signed evidence of policy "
                f"v{policy.version} (cutoff {policy.cutoff:g}) did not cover: {listed}.\n"
                f"The policy stays in force and is marked needs_recheck. A recheck sample is planned "
                f"({', '.join(str(b['target']) for b in recheck.plan['bands'])} graded items by band).\n"
                f"Recheck: {link}"
            ),
        )
    return recheck


def recheck_plan_adjust(*, actor: Actor, user, recheck: Recheck, half_width: float) -> Recheck:
    """Resize an open recheck's sample: plan both score bands again for ± `half_width` on the
    shares they measure, and set the route's grading plan to it. Audited with the old and new plan."""
    if not permissions.can_plan_recheck(user, recheck.route):
        raise Forbidden("Only the route's policy owner or a reviewer may resize a recheck sample.")
    if isinstance(half_width, bool) or not isinstance(half_width, int | float) or not math.isfinite(half_width):
        raise InvalidInput("The half-width must be a number.")
    if not HALF_WIDTH_MIN <= half_width <= HALF_WIDTH_MAX:
        raise InvalidInput(
            f"The half-width must lie between {HALF_WIDTH_MIN * 100:g} and {HALF_WIDTH_MAX * 100:g} points."
        )
    with transaction.atomic():
        locked = Recheck.objects.select_for_update().select_related("route", "policy").get(pk=recheck.pk)
        if locked.status != RecheckStatus.OPEN:
            raise Conflict("This recheck is already closed.", code="recheck_closed")
        old_plan = locked.plan
        locked.plan = recheck_plan(locked.policy, half_width=float(half_width))
        locked.full_clean()
        locked.save(update_fields=["plan"])
        grading_plan_set(
            actor=actor,
            route=locked.route,
            bands=[(band["low"], band["high"], band["target"]) for band in locked.plan["bands"]],
        )
        audit_record(
            actor=actor,
            action=Action.RECHECK_PLAN_ADJUSTED,
            object_type="recheck",
            object_id=locked.pk,
            route=locked.route.slug,
            payload={"plan": {"old": old_plan, "new": locked.plan}},
        )
    return locked


def recheck_closed_record(
    *,
    actor: Actor,
    user,
    recheck: Recheck,
    resolution: str,
    note: str,
    new_policy: PolicyVersion | None,
    context: dict[str, Any] | None = None,
) -> None:
    """Close a recheck locked and found open by the caller, with its audit event: the one way a
    recheck closes, by hand or when a signature supersedes its version (`context` adds why)."""
    recheck.status, recheck.resolution, recheck.note = RecheckStatus.CLOSED, resolution, note
    recheck.closed_at, recheck.closed_by, recheck.new_policy = timezone.now(), user, new_policy
    recheck.full_clean()
    recheck.save()
    audit_record(
        actor=actor,
        action=Action.RECHECK_CLOSED,
        object_type="recheck",
        object_id=recheck.pk,
        route=recheck.route.slug,
        payload={
            "status": {"old": RecheckStatus.OPEN, "new": RecheckStatus.CLOSED},
            "resolution": resolution,
            "note": note,
            "new_policy": new_policy.pk if new_policy else None,
            **(context or {}),
        },
    )


def recheck_close(
    *, actor: Actor, user, recheck: Recheck, resolution: str, note: str = "", new_policy: PolicyVersion | None = None
) -> Recheck:
    """Close an open recheck: `signed` names the version signed after it was opened, `accepted`
    needs a note. The policy returns to `active` when no other recheck of it stays open."""
    if not permissions.can_close_recheck(user, recheck.route):
        raise Forbidden("Only the route's policy owner or a reviewer may close a recheck.")
    if resolution not in RecheckResolution.values:
        raise InvalidInput(f"resolution must be one of {', '.join(RecheckResolution.values)}.")
    note = (note or "").strip()
    if resolution == RecheckResolution.ACCEPTED and not note:
        raise InvalidInput("Accepting a recheck unchanged needs a note saying why.")
    if len(note) > NOTE_MAX or "\x00" in note:
        raise InvalidInput(f"The note must be text of at most {NOTE_MAX} characters.")
    if resolution == RecheckResolution.SIGNED:
        if (
            new_policy is None
            or new_policy.route_id != recheck.route_id
            or new_policy.signed_at is None
            or new_policy.signed_at < recheck.opened_at
        ):
            raise InvalidInput("Name a version of this route signed after the recheck opened.")
    with transaction.atomic():
        locked = Recheck.objects.select_for_update().select_related("route", "policy").get(pk=recheck.pk)
        if locked.status != RecheckStatus.OPEN:
            raise Conflict("This recheck is already closed.", code="recheck_closed")
        recheck_closed_record(
            actor=actor, user=user, recheck=locked, resolution=resolution, note=note, new_policy=new_policy
        )
        policy = locked.policy
        if (
            policy.status == PolicyStatus.NEEDS_RECHECK
            and not Recheck.objects.filter(policy=policy, status=RecheckStatus.OPEN).exists()
        ):
            policy_mark_needs_recheck(actor=actor, policy=policy, needs_recheck=False)
    return locked
