from django.conf import settings

from console.core.jobs import job
from console.notify import selectors, services


@job("notify.notification_deliver", soft_time_limit=120)
def notification_deliver(notification_id: int) -> None:
    retry_in = services.notification_deliver(notification_id=notification_id)
    if retry_in is not None:
        notification_deliver.apply_async(args=[notification_id], countdown=retry_in)


@job("notify.notifications_sweep", soft_time_limit=60)
def notifications_sweep() -> int:
    """Queue again the messages whose back-off has passed or whose first job never arrived."""
    ids = list(
        selectors.due_notifications(requeue_after_seconds=settings.JOBS_REQUEUE_AFTER_SECONDS).values_list(
            "pk", flat=True
        )[:500]
    )
    for notification_id in ids:
        notification_deliver.delay(notification_id)
    return len(ids)


@job("notify.digests_send", soft_time_limit=300)
def digests_send() -> int:
    """The daily digest (beat): one email per person with the messages held for it."""
    return services.digests_send()
