from django.apps import AppConfig


class ShadowConfig(AppConfig):
    name = "console.shadow"
    label = "shadow"
    verbose_name = "Shadow evaluation"

    def ready(self) -> None:
        from console.ledger.hooks import register_after_ingest
        from console.shadow import tasks

        register_after_ingest(tasks.shadow_runs_open)
