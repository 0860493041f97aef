from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "console.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring of signed cutoffs"

    def ready(self) -> None:
        from console.governance.hooks import register_on_supersede
        from console.ledger.hooks import register_after_ingest
        from console.monitoring import tasks, workspace
        from console.monitoring.services.supersede import policy_superseded_resolve

        register_after_ingest(tasks.rechecks_open)
        register_on_supersede(policy_superseded_resolve)
        workspace.register()
