"""Drafting, signing and withdrawing policy versions. Each step writes its audit event in its own
transaction; signing supersedes the version in force in the same transaction."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.urls import reverse
from django.utils import timezone

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts import permissions
from console.accounts.models import Route
from console.analysis import selectors as analysis_selectors
from console.core.errors import Conflict, Forbidden, InvalidInput, ServiceError, detail
from console.governance import hooks, selectors
from console.governance.evidence import arrivals_since, as_of_text, compute_evidence, recompute_stored, snapshot_now
from console.governance.long_answers import blocking_codes
from console.governance.models import IN_FORCE, PolicyStatus, PolicyVersion, SigningStepUp
from console.governance.validation import DraftInput, parse_draft
from console.notify.services import notification_send


def _summary(policy: PolicyVersion) -> dict[str, Any]:
    return {
        "version": policy.version,
        "cutoff": policy.cutoff,
        "band_lower": policy.band_lower,
        "owner": policy.owner.get_username(),
        "evidence_sha256": policy.evidence_sha256,
    }


# --- the gate -------------------------------------------------------------------------------------
# Who may do what to a version, and in which state, is said here once. The services below call
# these first, so a view or an API only maps the error they raise (403 Forbidden, 409 Conflict
# ``not_draft``) to its response; a page that shows an action's form asks the action's gate before
# showing it, and `passes` tells a template whether to offer the action at all.


def draft_gate(user, route: Route) -> None:
    if not permissions.can_draft_policy(user, route):
        raise Forbidden("Only reviewers, policy owners and admins of this route may draft its policy.")


def _draft_only(policy: PolicyVersion, only: str) -> None:
    """409 ``not_draft`` unless `policy` (as read, or as locked) is still a draft."""
    if policy.status != PolicyStatus.DRAFT:
        raise Conflict(f"Version {policy.version} is {policy.status}; only {only}.", code="not_draft")


def _may_sign(user, policy: PolicyVersion) -> None:
    if not permissions.can_sign_policy(user, policy):
        raise Forbidden("Only the owner named in this policy version may sign it.")


def sign_gate(user, policy: PolicyVersion) -> None:
    _may_sign(user, policy)
    _draft_only(policy, "a draft can be signed")


def recompute_gate(user, policy: PolicyVersion) -> None:
    if not permissions.can_recompute_evidence(user, policy):
        raise Forbidden("Only the owner of this draft, or someone who may draft the route's policy, may recompute it.")
    _draft_only(policy, "a draft's evidence can be recomputed")


def withdraw_gate(user, policy: PolicyVersion) -> None:
    if not permissions.can_withdraw_policy(user, policy):
        raise Forbidden("Only the author of a draft or its owner may withdraw it.")
    _draft_only(policy, "a draft can be withdrawn")


def passes(gate: Callable[..., None], *args: Any) -> bool:
    """Whether `gate(*args)` lets the action through: what a page offers is what the service accepts."""
    try:
        gate(*args)
    except ServiceError:
        return False
    return True


def policy_draft(*, actor: Actor, user, route: Route, draft: DraftInput | Any) -> PolicyVersion:
    """A new draft version with its evidence computed now; the owner is told it waits for them.

    `draft` is a parsed `DraftInput`, or a body as the API and the draft form send it (anything a
    JSON body may be), parsed here after the permission check: a user who may not draft hears 403
    whatever they sent, never 400."""
    draft_gate(user, route)
    if not isinstance(draft, DraftInput):
        draft = parse_draft(draft, route=route)
    snapshot = snapshot_now(route)
    evidence = compute_evidence(
        route=route,
        cutoff=draft.cutoff,
        band_lower=draft.band_lower,
        query=draft.query,
        certification=draft.certification,
        as_of=snapshot.as_of,
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
            data_version=analysis_selectors.data_version(route),
            evidence_as_of=snapshot.as_of,
            evidence_decisions_seen=snapshot.decisions_seen,
            evidence_labels_seen=snapshot.labels_seen,
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
            # A creation, each field from none; events before this shape held the same keys plainly.
            payload={
                "version": policy.version,
                **field_changes(
                    new={k: v for k, v in _summary(policy).items() if k != "version"}
                    | {"status": policy.status, "as_of": as_of_text(snapshot.as_of)}
                ),
                "warnings": [w["code"] for w in policy.warnings],
            },
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


def policy_evidence_recompute(*, actor: Actor, user, policy: PolicyVersion) -> PolicyVersion:
    """Compute a draft's evidence again as of now, when its owner (or whoever may draft) wants the
    figures on the newest data; the old snapshot's hash no longer signs. Never done implicitly:
    new traffic alone leaves a draft's evidence as it was read."""
    recompute_gate(user, policy)  # before the snapshot, which may wait seconds for a settled instant
    snapshot = snapshot_now(policy.route)
    evidence = recompute_stored(policy, as_of=snapshot.as_of)
    with transaction.atomic(durable=True):
        locked = PolicyVersion.objects.select_for_update().select_related("route").get(pk=policy.pk)
        _draft_only(locked, "a draft's evidence can be recomputed")
        old = {"evidence_sha256": locked.evidence_sha256, "as_of": locked.evidence_as_of}
        locked.evidence_text, locked.evidence_sha256, locked.warnings = (
            evidence.text,
            evidence.sha256,
            evidence.warnings,
        )
        locked.evidence_as_of = snapshot.as_of
        locked.evidence_decisions_seen, locked.evidence_labels_seen = snapshot.decisions_seen, snapshot.labels_seen
        locked.data_version = analysis_selectors.data_version(locked.route)
        locked.save(
            update_fields=[
                "evidence_text",
                "evidence_sha256",
                "warnings",
                "evidence_as_of",
                "evidence_decisions_seen",
                "evidence_labels_seen",
                "data_version",
            ]
        )
        audit_record(
            actor=actor,
            action=Action.POLICY_EVIDENCE_REFRESHED,
            object_type="policy",
            object_id=locked.pk,
            route=locked.route.slug,
            payload={
                "version": locked.version,
                "evidence_sha256": {"old": old["evidence_sha256"], "new": evidence.sha256},
                "as_of": {
                    "old": as_of_text(old["as_of"]) if old["as_of"] else None,
                    "new": as_of_text(snapshot.as_of),
                },
                "warnings": [w["code"] for w in evidence.warnings],
            },
        )
    return locked


def _refuse_unread_evidence(policy: PolicyVersion, evidence_sha256: str) -> None:
    """The signature covers the snapshot the owner read: its stored SHA-256, and nothing recomputed.
    Only a recompute (or a tampered request) makes them differ."""
    if evidence_sha256 != policy.evidence_sha256:
        raise Conflict(
            "The evidence is not the one you read (it was recomputed since); read it again and sign its SHA-256.",
            code="evidence_changed",
            details=[
                detail(
                    "evidence_sha256",
                    "evidence_changed",
                    "is not the SHA-256 of the stored evidence",
                    evidence_sha256=policy.evidence_sha256,
                    as_of=as_of_text(policy.evidence_as_of) if policy.evidence_as_of else None,
                )
            ],
        )


def _signing_record(policy: PolicyVersion) -> dict[str, Any]:
    """What the signature records about the snapshot: its instant, and what had arrived since with
    its warning, so the trail says what the owner signed knowing."""
    since = arrivals_since(policy)
    return {
        "as_of": since["as_of"],
        "arrived_since": {"decisions": since["decisions"], "final_labels": since["final_labels"]},
        "warnings": policy.warnings + ([since["warning"]] if since["warning"] else []),
    }


def _step_up_check(step_up: dict[str, Any] | None) -> None:
    """A signature proven at the provider must follow its authentication within OIDC_STEP_UP_SECONDS."""
    window = settings.OIDC_STEP_UP_SECONDS
    if not step_up or step_up.get("auth_time", 0) < timezone.now().timestamp() - window:
        raise Forbidden(
            f"Signing needs a fresh proof that it is you: confirm at your identity provider, then sign within "
            f"{window // 60} minutes.",
            code="step_up_required",
        )


def _step_up_save(policy: PolicyVersion, step_up: dict[str, Any], now) -> dict[str, Any]:
    """Keep the provider's evidence beside the signature; returns it for the signature's audit event."""
    amr = step_up.get("amr") or []
    record = SigningStepUp(
        policy=policy,
        issuer=step_up["issuer"],
        subject=step_up["subject"],
        auth_time=datetime.fromtimestamp(step_up["auth_time"], tz=UTC),
        acr=str(step_up.get("acr") or ""),
        amr=amr if isinstance(amr, list) else [amr],
        signed_at=now,
    )
    record.full_clean(exclude=["policy"])
    record.save()
    return {
        "step_up": {
            "issuer": record.issuer,
            "subject": record.subject,
            "auth_time": record.auth_time.isoformat(),
            "acr": record.acr or None,
            "amr": record.amr,
        }
    }


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
            details=[
                detail(
                    "roll_back",
                    "older_than_in_force",
                    "must be true to sign a version older than the one in force",
                    in_force={"id": newer.pk, "version": newer.version, "cutoff": newer.cutoff},
                    draft={"id": policy.pk, "version": policy.version, "cutoff": policy.cutoff},
                )
            ],
        )
    return newer


def _acknowledgements(policy: PolicyVersion, acknowledged: Any) -> list[str]:
    """The draft's blocking warnings, each of which the signer must have acknowledged (400 for a
    malformed list, 409 ``acknowledgement_required`` naming what is missing); returns them."""
    if not isinstance(acknowledged, list | tuple) or not all(isinstance(code, str) for code in acknowledged):
        raise InvalidInput(
            "acknowledge must be a list of warning codes.",
            details=[detail("acknowledge", "invalid_type", "must be a list of warning codes")],
        )
    blocking = blocking_codes(policy.warnings)
    missing = [code for code in blocking if code not in acknowledged]
    if missing:
        raise Conflict(
            f"This draft carries a blocking warning ({', '.join(missing)}): read it and acknowledge it to sign.",
            code="acknowledgement_required",
            details=[
                detail("acknowledge", "acknowledgement_required", w["message"], warning=w["code"])
                for w in policy.warnings
                if w["code"] in missing
            ],
        )
    return blocking


def _signing_input(evidence_sha256: Any, roll_back: Any) -> None:
    if not isinstance(evidence_sha256, str) or not evidence_sha256:
        raise InvalidInput(
            "evidence_sha256 is required.", details=[detail("evidence_sha256", "required", "is required")]
        )
    if not isinstance(roll_back, bool):
        raise InvalidInput(
            "roll_back must be true or false.", details=[detail("roll_back", "invalid_type", "must be a boolean")]
        )


class SigningProof(StrEnum):
    """How the signer proved, just now, that they are the owner (step-up).

    A browser session alone is not a proof: its cookie (and the CSRF cookie beside it) is what a
    page left open, or a script running in it, already holds, and it signed through the API with no
    password. The sign page asks for the password again (throttled with the sign-in's counts); the
    API takes a token, which only its holder sends; code in the console's own process (the demo
    loader, commands) signs for a user it already chose."""

    PASSWORD = "password"
    PROVIDER = "provider"  # a fresh authentication at the identity provider (step-up), with its evidence
    TOKEN = "token"
    IN_PROCESS = "in_process"
    SESSION = "session"  # refused


def policy_sign(
    *,
    actor: Actor,
    user,
    policy: PolicyVersion,
    evidence_sha256: Any,
    roll_back: Any = False,
    acknowledged: Any = (),
    proof: SigningProof = SigningProof.IN_PROCESS,
    step_up: dict[str, Any] | None = None,
) -> PolicyVersion:
    """Make a draft the policy in force. Only its named owner signs, only a draft, and only on the
    evidence they read: the draft's stored snapshot, whose SHA-256 they send (409
    ``evidence_changed`` when it is not the stored one, with nothing signed). Traffic that arrived
    after the snapshot's ``as_of`` does not change it; the signature records how much did.

    Checked in this order, whoever calls: the signer (403), what they sent (400: `evidence_sha256`
    a non-empty string, `roll_back` a boolean, as a JSON body may hold anything), the version's
    state (409 ``not_draft``), the evidence read (409 ``evidence_changed``), the version order
    (409 ``older_than_in_force``), the blocking warnings acknowledged (`acknowledged` names each;
    409 ``acknowledgement_required``, recorded in the audit event when signed). A signature with a
    browser session as its only proof is 403 ``step_up_required`` (see SigningProof)."""
    _may_sign(user, policy)
    if proof == SigningProof.SESSION:
        raise Forbidden(
            "Signing needs a fresh proof that it is you: sign on the policy's sign page with your password, "
            "or through the API with a token. A browser session alone does not sign.",
            code="step_up_required",
        )
    if proof == SigningProof.PROVIDER:
        _step_up_check(step_up)
    _signing_input(evidence_sha256, roll_back)
    _draft_only(policy, "a draft can be signed")
    with transaction.atomic():
        # The route row serialises signatures on one route: two signs never both see the same version in force.
        Route.objects.select_for_update().filter(pk=policy.route_id).first()
        locked = PolicyVersion.objects.select_for_update().select_related("route", "owner").get(pk=policy.pk)
        _draft_only(locked, "a draft can be signed")
        _refuse_unread_evidence(locked, evidence_sha256)
        rolled_back = _version_order_check(locked, roll_back=roll_back)
        acknowledged_codes = _acknowledgements(locked, acknowledged)
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
        # The database makes a draft active only through this function (governance migration 0005):
        # it signs for the draft's own owner and changes nothing else.
        now = timezone.now()
        with connection.cursor() as cursor:
            cursor.execute("SELECT governance_policy_sign(%s, %s, %s)", [locked.pk, user.pk, now])
        locked.status, locked.signed_at, locked.signed_by = PolicyStatus.ACTIVE, now, user
        step_up_record = _step_up_save(locked, step_up, now) if proof == SigningProof.PROVIDER else {}
        audit_record(
            actor=actor,
            action=Action.POLICY_ROLLED_BACK if rolled_back else Action.POLICY_SIGNED,
            object_type="policy",
            object_id=locked.pk,
            route=locked.route.slug,
            payload=_summary(locked)
            | {
                "status": {"old": PolicyStatus.DRAFT, "new": PolicyStatus.ACTIVE},
                "evidence_text": locked.evidence_text,
            }
            | _signing_record(locked)
            | ({"acknowledged_warnings": acknowledged_codes} if acknowledged_codes else {})
            | step_up_record
            | ({"rolled_back_from": {"id": rolled_back.pk, "version": rolled_back.version}} if rolled_back else {}),
        )
    return locked


def policy_withdraw(*, actor: Actor, user, policy: PolicyVersion) -> PolicyVersion:
    """Withdraw a draft (its author or its owner); signed versions are superseded, never withdrawn."""
    withdraw_gate(user, policy)
    with transaction.atomic(durable=True):
        locked = PolicyVersion.objects.select_for_update().select_related("route").get(pk=policy.pk)
        _draft_only(locked, "a draft can be withdrawn")
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
