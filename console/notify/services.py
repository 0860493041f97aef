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
import urllib.request
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.utils import timezone

from console.core.jobs import enqueue
from console.notify.models import Channel, Notification, Status

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Console-Signature"


def webhook_signature(body: bytes, secret: str | None = None) -> str:
    """``sha256=<hex HMAC-SHA256 of the raw body>``: a receiver recomputes it with the shared secret."""
    key = (secret or settings.NOTIFY_WEBHOOK_SECRET).encode()
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def _recipient_problem(channel: str, recipient: str) -> str:
    if not recipient or not recipient.strip():
        return "no recipient: the person has no email address" if channel == Channel.EMAIL else "no webhook URL"
    if channel == Channel.WEBHOOK and urlsplit(recipient).scheme not in ("http", "https"):
        return "a webhook URL must start with http:// or https://"
    if channel == Channel.EMAIL and "@" not in recipient:
        return "not an email address"
    return ""


def notification_send(*, channel: str, recipient: str, subject: str, body: str, route: str = "") -> Notification | None:
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


def _deliver_email(notification: Notification) -> None:
    EmailMessage(
        subject=notification.subject,
        body=notification.body,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[notification.recipient],
    ).send(fail_silently=False)


def webhook_body(notification: Notification) -> bytes:
    return json.dumps(
        {
            "id": notification.pk,
            "route": notification.route,
            "subject": notification.subject,
            "body": notification.body,
            "created_at": notification.created_at.isoformat(),
        },
        separators=(",", ":"),
    ).encode()


def _deliver_webhook(notification: Notification) -> None:
    body = webhook_body(notification)
    request = urllib.request.Request(  # noqa: S310 -- the scheme was checked when the message was recorded
        notification.recipient,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            SIGNATURE_HEADER: webhook_signature(body),
            "User-Agent": "abstention-review-console",
        },
    )
    with urllib.request.urlopen(request, timeout=settings.NOTIFY_WEBHOOK_TIMEOUT_S) as response:  # noqa: S310
        if not 200 <= response.status < 300:
            raise OSError(f"webhook answered HTTP {response.status}")


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
