from django.apps import AppConfig


class GradingConfig(AppConfig):
    name = "grading"
    verbose_name = "Blind grading"

    def ready(self) -> None:
        from console.ledger.hooks import register_after_ingest
        from grading import tasks

        register_after_ingest(tasks.grading_pool_enter)
