from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "console.notify"
    label = "notify"
    verbose_name = "Notifications"
