from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "console.notify"
    label = "notify"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from audit.hooks import register_admin_notice
        from console.notify.services import admins_email

        register_admin_notice(admins_email)
