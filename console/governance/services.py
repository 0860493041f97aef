"""Drafting, signing and withdrawing policy versions. Each step writes its audit event in its own
transaction; signing supersedes the version in force in the same transaction."""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.urls import reverse
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts import permissions
from console.analysis import selectors as analysis_selectors
from console.analysis.params import (
    CertifiedCutoffQuery,
    OperatingPointsQuery,
    certified_cutoff_query,
    operating_points_query,
)
from console.core.errors import Conflict, Forbidden
from console.governance import hooks, selectors
from console.governance.evidence import compute_evidence
from console.governance.models import IN_FORCE, PolicyStatus, PolicyVersion
from console.governance.validation import DraftInput
from console.ledger.models import Route
from console.notify.services import notification_send
from console.trials.models import Trial


def _summary(policy: PolicyVersion) -> dict[str, Any]:
    return {
        "version": policy.version,
        "cutoff": policy.cutoff,
        "band_lower": policy.band_lower,
        "owner": policy.owner.get_username(),
        "evidence_sha256": policy.evidence_sha256,
    }


def policy_draft(*, actor: Actor, user, route: Route, draft: DraftInput) -> PolicyVersion:
    """A new draft version with its evidence computed now; the owner is told it waits for them."""
    if not permissions.can_draft_policy(user, route):
        raise Forbidden("Only reviewers, policy owners and admins of this route may draft its policy.")
    evidence = compute_evidence(
        route=route,
        cutoff=draft.cutoff,
        band_lower=draft.band_lower,
        query=draft.query,
        certification=draft.certification,
        trial=draft.trial,
    )
    with transaction.atomic():
        Route.objects.select_for_update().filter(pk=route.pk).first()  # numbers versions one at a time
        number = (PolicyVersion.objects.filter(route=route).aggregate(n=Max("version"))["n"] or 0) + 1
        policy = PolicyVersion(
            route=route,
            version=number,
            status=PolicyStatus.DRAFT,
            cutoff=draft.cutoff,
            band_lower=draft.band_lower,
            exchange_rate=draft.exchange_rate,
            exchange_answers=draft.exchange_answers,
            costs=draft.costs,
            cost_threshold=draft.cost_threshold,
            owner=draft.owner,
            created_by=user,
            escalation_contact=draft.escalation_contact,
            escalation_channel=draft.escalation_channel,
            escalation_response_hours=draft.escalation_response_hours,
            refusal_message=draft.refusal_message,
            rationale=draft.rationale,
            filters=draft.query.window.as_dict(),
            confidence=draft.query.confidence,
            interval=draft.query.interval,
            evidence_text=evidence.text,
            evidence_sha256=evidence.sha256,
            data_version=evidence.data_version,
            warnings=evidence.warnings,
        )
        policy.full_clean(exclude=["route", "owner", "created_by"])
        policy.save()
        audit_record(
            actor=actor,
            action=Action.POLICY_DRAFTED,
            object_type="policy",
            object_id=policy.pk,
            route=route.slug,
            payload=_summary(policy) | {"warnings": [w["code"] for w in policy.warnings]},
        )
        notification_send(
            channel="email",
            recipient=draft.owner.email,
            route=route.slug,
            subject=f"Policy v{number} for {route.name} waits for your signature",
            body=(
                f"{user.get_username()} drafted version {number} of the abstention policy of {route.name}: "
                f"cutoff {draft.cutoff:g}. You are named as its owner. Read the evidence and sign it at "
                f"{reverse('policy-sign', args=[policy.pk])}\n\nRationale:\n{draft.rationale}\n"
            ),
        )
    return policy


def _stored_query(policy: PolicyVersion) -> tuple[OperatingPointsQuery, CertifiedCutoffQuery | None]:
    """The draft's filters as queries again, to recompute its evidence on newer data."""
    filters = policy.filters or {}
    params = {name: filters[name] for name in ("from", "to") if filters.get(name)}
    params |= {f"version.{k}": v for k, v in (filters.get("versions") or {}).items()}
    params |= {f"segment.{k}": v for k, v in (filters.get("segments") or {}).items()}
    query = operating_points_query(params | {"confidence": str(policy.confidence), "interval": policy.interval})
    certified = json.loads(policy.evidence_text).get("certified_cutoff")
    certification = None
    if certified:
        certification = certified_cutoff_query(
            params | {"alpha": str(certified["alpha"]), "delta": str(certified["delta"])}
        )
    return query, certification


def policy_evidence_refresh(*, actor: Actor, policy: PolicyVersion) -> PolicyVersion:
    """Recompute a draft's evidence when the route's data moved since it was computed."""
    if policy.status != PolicyStatus.DRAFT or analysis_selectors.data_version(policy.route) == policy.data_version:
        return policy
    query, certification = _stored_query(policy)
    attached = json.loads(policy.evidence_text).get("trial")  # the trial is part of the signed evidence
    trial = Trial.objects.get(pk=attached["trial_id"]) if attached else None
    evidence = compute_evidence(
        route=policy.route,
        cutoff=policy.cutoff,
        band_lower=policy.band_lower,
        query=query,
        certification=certification,
        trial=trial,
    )
    with transaction.atomic():
        locked = PolicyVersion.objects.select_for_update().get(pk=policy.pk)
        if locked.status != PolicyStatus.DRAFT or locked.evidence_sha256 == evidence.sha256:
            return locked
        old = locked.evidence_sha256
        locked.evidence_text, locked.evidence_sha256 = evidence.text, evidence.sha256
        locked.data_version, locked.warnings = evidence.data_version, evidence.warnings
        locked.save(update_fields=["evidence_text", "evidence_sha256", "data_version", "warnings"])
        audit_record(
            actor=actor,
            action=Action.POLICY_EVIDENCE_REFRESHED,
            object_type="policy",
            object_id=locked.pk,
            route=locked.route.slug,
            payload={"evidence_sha256": {"old": old, "new": evidence.sha256}, "data_version": evidence.data_version},
        )
    return locked


def _version_order_check(policy: PolicyVersion, *, roll_back: bool) -> PolicyVersion | None:
    """The newer version in force that signing this draft rolls back, if any. A draft drafted before
    the version in force was signed is refused (409 ``older_than_in_force``) unless the owner asked
    for the roll-back; a roll-back is audited as such (``policy_rolled_back``). Called under the
    route's lock, so the version in force cannot change between this check and the signature."""
    newer = selectors.newer_in_force(policy)
    if newer is not None and not roll_back:
        raise Conflict(
            f"Version {policy.version} was drafted before version {newer.version} in force was signed: "
            f"signing it would roll the route back from v{newer.version} (cutoff {newer.cutoff:g}) to "
            f"v{policy.version} (cutoff {policy.cutoff:g}). Ask for the roll-back explicitly to sign it.",
            code="older_than_in_force",
            details={
                "in_force": {"id": newer.pk, "version": newer.version, "cutoff": newer.cutoff},
                "draft": {"id": policy.pk, "version": policy.version, "cutoff": policy.cutoff},
            },
        )
    return newer


def policy_sign(
    *, actor: Actor, user, policy: PolicyVersion, evidence_sha256: str, roll_back: bool = False
) -> PolicyVersion:
    """Make a draft the policy in force. Only its named owner signs, only a draft, and only on the
    evidence they read: if the route's data moved, the draft's evidence is recomputed first and a
    hash that no longer matches is refused (409 ``evidence_changed``) with nothing signed."""
    if not permissions.can_sign_policy(user, policy):
        raise Forbidden("Only the owner named in this policy version may sign it.")
    if policy.status != PolicyStatus.DRAFT:
        raise Conflict(f"Version {policy.version} is {policy.status}; only a draft can be signed.", code="not_draft")
    policy = policy_evidence_refresh(actor=actor, policy=policy)
    with transaction.atomic():
        # The route row serialises signatures on one route: two signs never both see the same version in force.
        Route.objects.select_for_update().filter(pk=policy.route_id).first()
        locked = PolicyVersion.objects.select_for_update().select_related("route", "owner").get(pk=policy.pk)
        if locked.status != PolicyStatus.DRAFT:
            raise Conflict(
                f"Version {locked.version} is {locked.status}; only a draft can be signed.", code="not_draft"
            )
        if evidence_sha256 != locked.evidence_sha256:
            raise Conflict(
                "The evidence changed since you read it (new data arrived); read it again and sign its new SHA-256.",
                code="evidence_changed",
                details={"evidence_sha256": locked.evidence_sha256, "data_version": locked.data_version},
            )
        rolled_back = _version_order_check(locked, roll_back=roll_back)
        now = timezone.now()
        for previous in PolicyVersion.objects.select_for_update().filter(route_id=locked.route_id, status__in=IN_FORCE):
            old_status = previous.status
            previous.status = PolicyStatus.SUPERSEDED
            previous.save(update_fields=["status"])
            audit_record(
                actor=actor,
                action=Action.POLICY_SUPERSEDED,
                object_type="policy",
                object_id=previous.pk,
                route=locked.route.slug,
                payload={"status": {"old": old_status, "new": previous.status}, "by_version": locked.version},
            )
            hooks.policy_superseded(actor=actor, user=user, superseded=previous, by=locked)
        locked.status, locked.signed_at, locked.signed_by = PolicyStatus.ACTIVE, now, user
        locked.save(update_fields=["status", "signed_at", "signed_by"])
        audit_record(
            actor=actor,
            action=Action.POLICY_ROLLED_BACK if rolled_back else Action.POLICY_SIGNED,
            object_type="policy",
            object_id=locked.pk,
            route=locked.route.slug,
            payload=_summary(locked)
            | {
                "status": {"old": PolicyStatus.DRAFT, "new": PolicyStatus.ACTIVE},
                "data_version": locked.data_version,
                "warnings": locked.warnings,
                "evidence_text": locked.evidence_text,
            }
            | ({"rolled_back_from": {"id": rolled_back.pk, "version": rolled_back.version}} if rolled_back else {}),
        )
    return locked


def policy_withdraw(*, actor: Actor, user, policy: PolicyVersion) -> PolicyVersion:
    """Withdraw a draft (its author or its owner); signed versions are superseded, never withdrawn."""
    if not permissions.can_withdraw_policy(user, policy):
        raise Forbidden("Only the author of a draft or its owner may withdraw it.")
    with transaction.atomic():
        locked = PolicyVersion.objects.select_for_update().select_related("route").get(pk=policy.pk)
        if locked.status != PolicyStatus.DRAFT:
            raise Conflict(
                f"Version {locked.version} is {locked.status}; only a draft can be withdrawn.", code="not_draft"
            )
        locked.status = PolicyStatus.WITHDRAWN
        locked.save(update_fields=["status"])
        audit_record(
            actor=actor,
            action=Action.POLICY_WITHDRAWN,
            object_type="policy",
            object_id=locked.pk,
            route=locked.route.slug,
            payload={"status": {"old": PolicyStatus.DRAFT, "new": locked.status}, "version": locked.version},
        )
    return locked


def policy_mark_needs_recheck(*, actor: Actor, policy: PolicyVersion, needs_recheck: bool = True) -> PolicyVersion:
    """Turn the version in force to `needs_recheck` (still in force) or back to `active`, for the
    release recheck that monitoring opens and closes. Any other status is left alone."""
    old, new = (
        (PolicyStatus.ACTIVE, PolicyStatus.NEEDS_RECHECK)
        if needs_recheck
        else (PolicyStatus.NEEDS_RECHECK, PolicyStatus.ACTIVE)
    )
    with transaction.atomic():
        locked = PolicyVersion.objects.select_for_update().select_related("route").get(pk=policy.pk)
        if locked.status != old:
            return locked
        locked.status = new
        locked.save(update_fields=["status"])
        action = Action.POLICY_NEEDS_RECHECK if needs_recheck else Action.POLICY_RECHECK_CLEARED
        audit_record(
            actor=actor,
            action=action,
            object_type="policy",
            object_id=locked.pk,
            route=locked.route.slug,
            payload={"status": {"old": old, "new": new}, "version": locked.version},
        )
    return locked
