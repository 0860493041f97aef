"""Reads of the notifications."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from console.notify.models import DigestItem, Notification, Status


def outbox(*, limit: int = 200) -> list[Notification]:
    return list(Notification.objects.all()[:limit])


def due_notifications(*, requeue_after_seconds: int) -> QuerySet[Notification]:
    """Queued messages whose back-off has passed, and first attempts whose job seems lost."""
    now = timezone.now()
    return Notification.objects.filter(status=Status.QUEUED).filter(
        Q(next_attempt_at__lte=now)
        | Q(next_attempt_at__isnull=True, created_at__lte=now - timedelta(seconds=requeue_after_seconds))
    )


def digest_waiting(user) -> int:
    """Messages held for the person's next digest."""
    return DigestItem.objects.filter(user=user, notification__isnull=True).count()
