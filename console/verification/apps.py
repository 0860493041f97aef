from django.apps import AppConfig


class VerificationConfig(AppConfig):
    name = "console.verification"
    label = "verification"
    verbose_name = "Span verification"

    def ready(self) -> None:
        from django.conf import settings

        from console.ledger.hooks import register_after_ingest
        from console.verification import tasks

        register_after_ingest(tasks.decisions_verify, ids_per_job=settings.VERIFY_IDS_PER_JOB)
