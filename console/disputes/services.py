"""Opening, taking, resolving and escalating disputes; appeal links and their secrets.

Each step is one transaction with its audit event. The escalation clock runs on the signed policy
in force when the dispute was opened: its escalation path's response time, or the route default
(DISPUTES_DEFAULT_RESPONSE_HOURS) when the route has no signed policy, which the dispute then says.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import Conflict, Forbidden, InvalidInput, detail
from console.core.validation import has_lone_surrogate, is_one_email_address
from console.disputes.models import MAX_APPEAL_MESSAGE, AppealLinkRevocation, AppealSecret, Dispute, Kind, Status
from console.disputes.notices import dispute_escalated_notify, dispute_opened_notify, dispute_resolved_notify
from console.disputes.validation import DisputeInput
from console.governance.escalation import channel_target
from console.governance.models import PolicyVersion
from console.governance.selectors import eligible_owners, policy_in_force
from console.ledger.models import Decision, Passage
from console.notify.emails import absolute_url
from console.verification.spans import verify_span

# At most this many appeals through one link (one route and request id).
APPEALS_PER_LINK = 3


# --- the clock ------------------------------------------------------------------------------------


def _clock(route: Route, opened_at: datetime) -> tuple[PolicyVersion | None, int, datetime]:
    policy = policy_in_force(route)
    hours = policy.escalation_response_hours if policy else settings.DISPUTES_DEFAULT_RESPONSE_HOURS
    return policy, hours, opened_at + timedelta(hours=hours)


def _summary(dispute: Dispute) -> dict[str, Any]:
    return {
        "kind": dispute.kind,
        "request_id": dispute.request_id,
        "decision": dispute.decision_id,
        "due_by": dispute.due_by.isoformat(),
        "policy": dispute.policy_id,
        "response_hours": dispute.response_hours,
    }


# --- opening --------------------------------------------------------------------------------------


def _quote_in_passage(decision: Decision, passage_id: int, quote: str) -> tuple[Any, dict[str, list]]:
    # One this decision logged (its own passage ids), whoever else logged it.
    passage = Passage.objects.filter(pk=passage_id).first() if passage_id in decision.passage_ids else None
    if passage is None:
        raise InvalidInput(
            "The passage is not one of this decision's logged passages.",
            code="unknown_passage",
            details=[detail("evidence.passage_id", "not_a_passage", "not a passage of this decision")],
        )
    result = verify_span(passage.text, quote)
    if not result.supported:
        raise InvalidInput(
            "The quote was not found in that passage.",
            code="quote_not_found",
            details=[detail("evidence.quote", "quote_not_found", "not found in the passage")],
        )
    ranges = {"bytes": [list(r) for r in result.match_ranges], "chars": [list(r) for r in result.char_ranges]}
    return passage, ranges


def dispute_open(*, actor: Actor, user, decision: Decision, data: DisputeInput) -> Dispute:
    """Dispute one refusal. 400 ``not_refused`` for a served decision, 400 ``quote_not_found`` for a
    quote not in its passage, 409 ``already_open`` when this person has an open dispute of it."""
    if not permissions.can_open_dispute(user, decision.route):
        raise Forbidden("Your role does not allow disputing this route's refusals.")
    if not decision.refused:
        raise InvalidInput("Only a refusal can be disputed; this decision was served.", code="not_refused")
    passage, ranges = None, None
    if data.passage_id is not None:
        passage, ranges = _quote_in_passage(decision, data.passage_id, data.quote)
    now = timezone.now()
    policy, hours, due_by = _clock(decision.route, now)
    try:
        with transaction.atomic():
            first = _open_dispute_of(user, decision)
            if first is not None:
                raise _already_open(first)
            dispute = Dispute.objects.create(
                route=decision.route,
                request_id=decision.request_id,
                decision=decision,
                kind=data.kind,
                reason=data.reason,
                passage=passage,
                source_url=data.source_url,
                quote=data.quote,
                quote_ranges=ranges,
                contact=data.contact,
                opened_by=user,
                opened_at=now,
                policy=policy,
                response_hours=hours,
                due_by=due_by,
            )
            audit_record(
                actor=actor,
                action=Action.DISPUTE_OPENED,
                object_type="dispute",
                object_id=dispute.pk,
                route=decision.route.slug,
                payload=_summary(dispute),
            )
            dispute_opened_notify(dispute)
    except IntegrityError:  # a concurrent request by the same person won the unique index
        first = _open_dispute_of(user, decision)
        if first is None:
            raise
        raise _already_open(first) from None
    return dispute


def _open_dispute_of(user, decision: Decision) -> Dispute | None:
    return (
        Dispute.objects.filter(
            opened_by=user, route_id=decision.route_id, request_id=decision.request_id, status=Status.OPEN
        )
        .order_by("pk")
        .first()
    )


def _already_open(first: Dispute) -> Conflict:
    return Conflict(
        f"You already have an open dispute of this decision (#{first.pk}).",
        code="already_open",
        details=[
            detail(
                None, "already_open", "an open dispute exists", id=first.pk, url=reverse("api-dispute", args=[first.pk])
            )
        ],
    )


# --- appeals --------------------------------------------------------------------------------------


def storable_request_id(value: str) -> bool:
    """A request id the ledger could hold: at most 200 characters, no NUL, valid Unicode. Links
    for anything else are never given out, and such a path is the same 404 as a forged token."""
    return 0 < len(value) <= 200 and "\x00" not in value and not has_lone_surrogate(value)


def appeal_secret(route: Route) -> str:
    """The route's appeal secret, created the first time it is needed (get_or_create settles a race)."""
    row, _ = AppealSecret.objects.get_or_create(
        route=route, defaults={"secret": secrets.token_urlsafe(32), "rotated_at": timezone.now()}
    )
    return row.secret


def appeal_secret_rotate(*, actor: Actor, route: Route) -> str:
    """A new secret for the route: every link given out before stops working. Returns it, once."""
    secret = secrets.token_urlsafe(32)
    with transaction.atomic(durable=True):
        AppealSecret.objects.update_or_create(route=route, defaults={"secret": secret, "rotated_at": timezone.now()})
        audit_record(
            actor=actor, action=Action.APPEAL_SECRET_ROTATED, object_type="route", object_id=route.pk, route=route.slug
        )
    return secret


def appeal_token(secret: str, slug: str, request_id: str) -> str:
    """HMAC-SHA256 of ``slug NUL request_id``, its first 128 bits in URL-safe base64 (22 characters)."""
    digest = hmac.new(secret.encode(), f"{slug}\0{request_id}".encode("utf-8", "surrogatepass"), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()[:16]).rstrip(b"=").decode()


def appeal_path(route: Route, request_id: str) -> str:
    return reverse("appeal", args=[route.slug, request_id, appeal_token(appeal_secret(route), route.slug, request_id)])


def appeal_token_valid(route: Route, request_id: str, token: str) -> bool:
    """Constant-time comparison; a route without a secret yet has given out no link, and a revoked
    link is no link."""
    row = AppealSecret.objects.filter(route=route).first()
    expected = appeal_token(row.secret if row else secrets.token_urlsafe(32), route.slug, request_id)
    matches = hmac.compare_digest(expected.encode(), token.encode("utf-8", "surrogatepass"))
    return matches and not revoked(route, request_id)


def revoked(route: Route, request_id: str) -> bool:
    return AppealLinkRevocation.objects.filter(route=route, request_id=request_id).exists()


def appeal_link_revoke(*, actor: Actor, user, route: Route, request_id: str, reason: str = "") -> AppealLinkRevocation:
    """Revoke one refusal's appeal link: its page becomes the same 404 as a forged link. Appeals
    already made stay in the inbox. Reviewers and policy owners of the route."""
    if not permissions.can_handle_disputes(user, route):
        raise Forbidden("Only reviewers and policy owners of this route revoke appeal links.")
    if len(reason) > 2_000 or "\x00" in reason or has_lone_surrogate(reason):
        raise InvalidInput(
            "The reason may be at most 2,000 characters.", details=[detail("reason", "too_long", "too long")]
        )
    with transaction.atomic(durable=True):
        revocation, created = AppealLinkRevocation.objects.get_or_create(
            route=route,
            request_id=request_id,
            defaults={"revoked_at": timezone.now(), "revoked_by": user, "reason": reason},
        )
        if not created:
            raise Conflict("This appeal link is already revoked.", code="already_revoked")
        audit_record(
            actor=actor,
            action=Action.APPEAL_LINK_REVOKED,
            object_type="route",
            object_id=route.pk,
            route=route.slug,
            payload={"request_id": request_id, "reason": reason},
        )
    return revocation


def appeal_open(*, route: Route, request_id: str, message: str, email: str = "") -> Dispute:
    """An appeal by the person refused; the caller has checked the link's token. One at a time per
    link (409 ``appeal_waiting`` while one is open) and at most APPEALS_PER_LINK in all (409
    ``appeal_limit``). The decision may not be ingested yet."""
    message = (message or "").strip()
    if not message:
        raise InvalidInput("Say what you needed.", details=[detail("message", "required", "is required")])
    if (
        len(message) > MAX_APPEAL_MESSAGE
        or len(email) > 300
        or "\x00" in message + email
        or has_lone_surrogate(message + email)
    ):
        raise InvalidInput(f"The message may be at most {MAX_APPEAL_MESSAGE:,} characters.", code="too_long")
    if email and not is_one_email_address(email):
        raise InvalidInput(
            "That is not an email address.", details=[detail("email", "invalid_email", "not an address")]
        )
    now = timezone.now()
    policy, hours, due_by = _clock(route, now)
    with transaction.atomic():
        # The route row serialises appeals of one route, so the per-link count cannot be raced past.
        Route.objects.select_for_update().filter(pk=route.pk).first()
        made = Dispute.objects.filter(route=route, request_id=request_id, kind=Kind.APPEAL)
        if any(status == Status.OPEN for status in made.values_list("status", flat=True)):
            raise Conflict("Your appeal is waiting for a reply; you will find the answer here.", code="appeal_waiting")
        if made.count() >= APPEALS_PER_LINK:
            raise Conflict(f"This link has been used for {APPEALS_PER_LINK} appeals already.", code="appeal_limit")
        decision = Decision.objects.filter(route=route, request_id=request_id).first()
        dispute = Dispute.objects.create(
            route=route,
            request_id=request_id,
            decision=decision,
            kind=Kind.APPEAL,
            reason=message,
            appellant_email=email,
            opened_at=now,
            policy=policy,
            response_hours=hours,
            due_by=due_by,
        )
        audit_record(
            actor=Actor("appeal-link"),
            action=Action.DISPUTE_APPEALED,
            object_type="dispute",
            object_id=dispute.pk,
            route=route.slug,
            payload=_summary(dispute),
        )
        dispute_opened_notify(dispute)
    return dispute


def appeals_attach(decision_ids: list[int]) -> int:
    """Give appeals made before ingest their decision (one UPDATE); reads match on route and
    request id meanwhile, so this only saves them the lookup."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE disputes_dispute s SET decision_id = d.id
              FROM ledger_decision d
             WHERE d.id = ANY(%s) AND s.decision_id IS NULL
               AND s.route_id = d.route_id AND s.request_id = d.request_id
        """,
            [list(decision_ids)],
        )
        return cursor.rowcount


# --- working the inbox ----------------------------------------------------------------------------


def _locked(dispute: Dispute) -> Dispute:
    return (
        Dispute.objects.select_for_update(of=("self",))
        .select_related("route", "opened_by", "assigned_to")
        .get(pk=dispute.pk)
    )


def _assignment(dispute: Dispute) -> dict[str, Any]:
    return {
        "assigned_to": dispute.assigned_to.get_username() if dispute.assigned_to_id else None,
        "assigned_at": dispute.assigned_at.isoformat() if dispute.assigned_at else None,
    }


def _resolution(dispute: Dispute) -> dict[str, Any]:
    return {
        "status": dispute.status,
        "resolution_note": dispute.resolution_note,
        "resolved_by": dispute.resolved_by.get_username() if dispute.resolved_by_id else None,
    }


def dispute_assign(*, actor: Actor, user, dispute: Dispute) -> Dispute:
    if not permissions.can_handle_disputes(user, dispute.route):
        raise Forbidden("Only reviewers and policy owners of this route take disputes.")
    with transaction.atomic(durable=True):
        locked = _locked(dispute)
        if not locked.is_open:
            raise Conflict(f"This dispute is {locked.status}.", code="not_open")
        old = _assignment(locked)
        locked.assigned_to, locked.assigned_at = user, timezone.now()
        locked.save(update_fields=["assigned_to", "assigned_at"])
        audit_record(
            actor=actor,
            action=Action.DISPUTE_ASSIGNED,
            object_type="dispute",
            object_id=locked.pk,
            route=locked.route.slug,
            # Events before the per-field shape recorded {"to": username, "before": username | None}.
            payload=field_changes(old=old, new=_assignment(locked)),
        )
    return locked


def dispute_resolve(*, actor: Actor, user, dispute: Dispute, resolution: str, note: str) -> Dispute:
    """Close a dispute with a note. Upheld or overturned by a handler of the route; withdrawn by its
    opener only. The opener and an appellant who left an email are told."""
    if resolution == Status.WITHDRAWN:
        if not permissions.can_withdraw_dispute(user, dispute):
            raise Forbidden("Only the person who opened a dispute may withdraw it.")
    elif not permissions.can_handle_disputes(user, dispute.route):
        raise Forbidden("Only reviewers and policy owners of this route resolve disputes.")
    with transaction.atomic(durable=True):
        locked = _locked(dispute)
        if not locked.is_open:
            raise Conflict(f"This dispute is already {locked.status}.", code="not_open")
        old = _resolution(locked)
        locked.status, locked.resolution_note = resolution, note
        locked.resolved_at, locked.resolved_by = timezone.now(), user
        locked.save(update_fields=["status", "resolution_note", "resolved_at", "resolved_by"])
        audit_record(
            actor=actor,
            action=Action.DISPUTE_RESOLVED,
            object_type="dispute",
            object_id=locked.pk,
            route=locked.route.slug,
            # Events before the per-field shape recorded {"resolution": status, "note": note}.
            payload=field_changes(old=old, new=_resolution(locked)),
        )
        appeal_url = ""
        if locked.appellant_email and not revoked(locked.route, locked.request_id):
            appeal_url = absolute_url(appeal_path(locked.route, locked.request_id))
        dispute_resolved_notify(locked, appeal_url=appeal_url)
    return locked


# --- escalation -----------------------------------------------------------------------------------


def _escalation_targets(dispute: Dispute) -> list[tuple[str, str]]:
    """(notify channel, recipient) pairs: the signed escalation channel, or the route's policy owners
    by email when no signed path exists. A channel of no documented form (console/governance/
    escalation.py; only versions signed before channels were checked hold one) is recorded as a
    failed webhook, so the gap is visible on the Outbox page rather than silent."""
    if dispute.policy_id is None:
        owners = eligible_owners(dispute.route)
        return [("email", owner.email) for owner in owners] or [("email", "")]
    channel = dispute.policy.escalation_channel.strip()
    return [channel_target(channel) or ("webhook", channel)]


_CLAIM_SQL = """
    UPDATE disputes_dispute SET escalated_at = %s
     WHERE id = %s AND status = 'open' AND escalated_at IS NULL AND due_by < %s
    RETURNING id
"""


def disputes_escalate(*, actor: Actor, as_of: datetime | None = None) -> list[int]:
    """Escalate every open dispute past its due time that was not escalated yet; the ids escalated.

    Exactly once: each dispute is claimed by a conditional UPDATE ... WHERE escalated_at IS NULL in
    its own transaction with its notifications and audit event. A second worker's UPDATE waits on
    the row lock and then matches nothing; a worker killed before commit leaves the row unclaimed
    for the next run. ``as_of`` (a later time) is the drill: it really notifies."""
    now = timezone.now()
    as_of = as_of or now
    due = list(
        Dispute.objects.filter(status=Status.OPEN, escalated_at__isnull=True, due_by__lt=as_of)
        .order_by("due_by")
        .values_list("pk", flat=True)
    )
    escalated = []
    for pk in due:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(_CLAIM_SQL, [now, pk, as_of])
                if cursor.fetchone() is None:
                    continue
            dispute = Dispute.objects.select_related("route", "policy").get(pk=pk)
            targets = _escalation_targets(dispute)
            dispute_escalated_notify(dispute, targets)
            audit_record(
                actor=actor,
                action=Action.DISPUTE_ESCALATED,
                object_type="dispute",
                object_id=pk,
                route=dispute.route.slug,
                payload={
                    "due_by": dispute.due_by.isoformat(),
                    "as_of": as_of.isoformat(),
                    "notified": [f"{c}:{r}" for c, r in targets],
                },
            )
            escalated.append(pk)
    return escalated
