from django.contrib import admin

from console.core.admin import ReadOnlyAdmin
from console.notify.models import Notification


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    """Read-only: a notification is a record of what was sent; delivery changes it, nobody else."""

    list_display = ("created_at", "channel", "recipient", "subject", "status", "attempts")
    list_filter = ("channel", "status")
