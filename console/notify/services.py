"""Sending notifications: recorded first, delivered by a job after the caller's transaction commits.

Sending never fails the action that caused it: a message that cannot even be recorded is logged,
and a delivery that fails is retried with back-off and finally marked failed, visible on the
Outbox page.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from datetime import timedelta

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, audit_record
from console.core import outbound
from console.core.jobs import enqueue
from console.notify.emails import EmailPart, email_render
from console.notify.models import Channel, Digest, DigestItem, Notification, Preference, Status

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Console-Signature"


def webhook_signature(body: bytes, secret: str | None = None) -> str:
    """``sha256=<hex HMAC-SHA256 of the raw body>``: a receiver recomputes it with the shared secret."""
    key = (secret or settings.NOTIFY_WEBHOOK_SECRET).encode()
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def _recipient_problem(channel: str, recipient: str) -> str:
    if not recipient or not recipient.strip():
        return "no recipient: the person has no email address" if channel == Channel.EMAIL else "no webhook URL"
    if channel == Channel.WEBHOOK and (problem := outbound.url_problem(recipient)):
        return f"the webhook URL {problem}"
    if channel == Channel.EMAIL and "@" not in recipient:
        return "not an email address"
    return ""


def notification_send(
    *,
    channel: str,
    recipient: str,
    subject: str,
    body: str,
    route: str = "",
    html_body: str = "",
    summary: str = "",
    data: dict | None = None,
) -> Notification | None:
    """Record a message and queue its delivery after commit. A recipient that cannot be reached
    (no address) is recorded as failed at once, so the gap is visible rather than silent."""
    Channel(channel)
    try:
        with transaction.atomic():  # a savepoint: a failure here leaves the caller's transaction usable
            problem = _recipient_problem(channel, recipient)
            notification = Notification(
                channel=channel,
                recipient=recipient or "",
                subject=subject[:300],
                body=body,
                html_body=html_body if channel == Channel.EMAIL else "",
                summary=summary[:500],
                data=data or {},
                route=route,
                status=Status.FAILED if problem else Status.QUEUED,
                error=problem,
            )
            notification.full_clean(exclude=["recipient"])
            notification.save()
    except Exception:  # noqa: BLE001 -- the action that caused the message must go on
        logger.exception("could not record a %s notification to %r", channel, recipient)
        return None
    if notification.status == Status.QUEUED:
        enqueue("notify.notification_deliver", notification.pk)  # by name: the tasks module imports this one
    return notification


def email_send(
    *,
    recipient: str,
    subject: str,
    heading: str,
    parts: list[EmailPart],
    route: str = "",
    footer: str = "",
) -> Notification | None:
    """An email to an address, its text and HTML parts rendered from the one pair of templates."""
    text, html = email_render(heading=heading, parts=parts, footer=footer)
    return notification_send(
        channel=Channel.EMAIL,
        recipient=recipient,
        subject=subject,
        body=text,
        html_body=html,
        route=route,
        summary=parts[0].title if len(parts) == 1 else "",
    )


def digest_of(user) -> str:
    preference = Preference.objects.filter(user=user).first()
    return preference.digest if preference else Digest.IMMEDIATELY


def user_notify(*, user, subject: str, part: EmailPart, route: str = "") -> Notification | DigestItem | None:
    """An email to a person of the console: now, or held for their daily digest if they chose one."""
    if digest_of(user) == Digest.DAILY:
        return DigestItem.objects.create(user=user, route=route, subject=subject[:300], part=part.as_json())
    return email_send(recipient=user.email, subject=subject, heading=subject, parts=[part], route=route)


def preference_set(*, actor: Actor, user, digest: str) -> Preference:
    """Choose between an email per message and one daily digest. Messages already held for a
    digest still go out with the next one."""
    Digest(digest)
    with transaction.atomic(durable=True):
        preference, _ = Preference.objects.select_for_update().get_or_create(user=user)
        before = preference.digest
        if before != digest:
            preference.digest = digest
            preference.full_clean()
            preference.save()
            audit_record(
                actor=actor,
                action=Action.NOTIFY_PREFERENCE_CHANGED,
                object_type="user",
                object_id=user.pk,
                payload={"digest": {"old": before, "new": digest}},
            )
    return preference


def digests_send() -> int:
    """One email per person with every message held for their digest; the number of emails.

    Each person's items are claimed under row locks (SKIP LOCKED) in the transaction that records
    their digest email, so two runs never send an item twice and a run that dies sends nothing."""
    users = list(DigestItem.objects.filter(notification__isnull=True).values_list("user_id", flat=True).distinct())
    sent = 0
    for user_id in users:
        with transaction.atomic():
            items = list(
                DigestItem.objects.select_for_update(skip_locked=True)
                .filter(user_id=user_id, notification__isnull=True)
                .select_related("user")
                .order_by("created_at", "id")
            )
            if not items:
                continue
            count = len(items)
            heading = f"{count} message{'s' if count != 1 else ''} from the console since your last digest"
            notification = email_send(
                recipient=items[0].user.email,
                subject=f"Your daily digest: {count} message{'s' if count != 1 else ''}",
                heading=heading,
                parts=[EmailPart.from_json(item.part) for item in items],
                footer="You chose one email a day; change it under Notifications in the console.",
            )
            if notification is None:  # could not even be recorded: the items wait for the next run
                continue
            DigestItem.objects.filter(pk__in=[item.pk for item in items]).update(notification=notification)
            sent += 1
    return sent


def _deliver_email(notification: Notification) -> None:
    message = EmailMultiAlternatives(
        subject=notification.subject,
        body=notification.body,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[notification.recipient],
    )
    if notification.html_body:
        message.attach_alternative(notification.html_body, "text/html")
    message.send(fail_silently=False)


def webhook_body(notification: Notification) -> bytes:
    return json.dumps(
        {
            "id": notification.pk,
            "route": notification.route,
            "subject": notification.subject,
            "summary": notification.summary or notification.subject,
            "body": notification.body,
            "data": notification.data,
            "created_at": notification.created_at.isoformat(),
        },
        separators=(",", ":"),
    ).encode()


def _deliver_webhook(notification: Notification) -> None:
    """One POST through the outbound client; any failure (HTTP error, redirect, a destination the
    egress policy refuses) raises and counts as a failed attempt of the notification."""
    body = webhook_body(notification)
    try:
        outbound.post(
            notification.recipient,
            body,
            headers={"Content-Type": "application/json", SIGNATURE_HEADER: webhook_signature(body)},
            target="the webhook",
            timeout=settings.NOTIFY_WEBHOOK_TIMEOUT_S,
        )
    except outbound.OutboundError as exc:
        # The outbox shows the short reason only: no reply text, and one answer for refused, unreachable
        # and silent, so a webhook URL cannot be used to map which ports answer.
        logger.info("webhook notification %s failed: %s", notification.pk, exc)
        raise WebhookFailed(outbound.public_reason(exc, "the webhook")) from None


class WebhookFailed(Exception):
    """A webhook delivery failed; the message is what the outbox may show."""


def notification_deliver(*, notification_id: int) -> float | None:
    """One delivery attempt. Returns the seconds to wait before the next attempt when it failed and
    attempts remain; None when it was sent, finally failed, or is not (or no longer) queued.

    The row stays locked during the attempt, so a duplicate job skips it instead of sending twice.
    """
    with transaction.atomic():
        notification = (
            Notification.objects.select_for_update(skip_locked=True)
            .filter(pk=notification_id, status=Status.QUEUED)
            .first()
        )
        if notification is None:
            return None
        retry_in = None
        try:
            if notification.channel == Channel.EMAIL:
                _deliver_email(notification)
            else:
                _deliver_webhook(notification)
        except Exception as exc:  # noqa: BLE001 -- any failure is recorded, never raised to the caller
            notification.attempts += 1
            notification.error = f"{type(exc).__name__}: {exc}"[:2000]
            if notification.attempts >= settings.NOTIFY_MAX_ATTEMPTS:
                notification.status = Status.FAILED
                notification.next_attempt_at = None
            else:
                retry_in = float(settings.NOTIFY_BACKOFF_SECONDS * 2 ** (notification.attempts - 1))
                notification.next_attempt_at = timezone.now() + timedelta(seconds=retry_in)
        else:
            notification.attempts += 1
            notification.status = Status.SENT
            notification.sent_at = timezone.now()
            notification.error = ""
            notification.next_attempt_at = None
        notification.save(update_fields=["attempts", "status", "error", "sent_at", "next_attempt_at"])
    return retry_in


def admins_email(*, recipients: list[str], subject: str, body: str) -> None:
    """What the audit trail tells the console's admins (a broken chain): one email each, through the
    outbox like every other notification."""
    for address in recipients:
        notification_send(channel="email", recipient=address, subject=subject, body=body)
