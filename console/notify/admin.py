from django.contrib import admin

from console.notify.models import Notification


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("created_at", "channel", "recipient", "subject", "status", "attempts")
    list_filter = ("channel", "status")
    readonly_fields = [field.name for field in Notification._meta.fields]
