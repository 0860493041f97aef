from django.apps import AppConfig


class GradingConfig(AppConfig):
    name = "grading"
    verbose_name = "Blind grading"

    def ready(self) -> None:
        from console.ledger.hooks import register_in_ingest
        from grading import workspace
        from grading.services import pool

        # Ready decisions enter the pool in their ingest transaction; those that wait for a shadow
        # run enter through the pool sweeps, and a failed entry queues a job (grading.tasks).
        register_in_ingest(pool.pool_enter_ingested)
        workspace.register()
