from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "console.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring of signed cutoffs"

    def ready(self) -> None:
        from console.ledger.hooks import register_after_ingest
        from console.monitoring import tasks

        register_after_ingest(tasks.rechecks_open)
