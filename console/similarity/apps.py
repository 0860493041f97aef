from django.apps import AppConfig


class SimilarityConfig(AppConfig):
    name = "console.similarity"
    label = "similarity"
    verbose_name = "Question similarity and corpus gaps"

    def ready(self) -> None:
        from console.ledger.hooks import register_after_ingest, register_in_ingest
        from console.similarity import tasks
        from console.similarity.services.vectors import vectors_store_sent

        # Sent vectors travel with the batch and are written in its transaction (a wrong
        # dimension rejects the batch); built-in vectors are computed afterwards.
        register_in_ingest(vectors_store_sent)
        register_after_ingest(tasks.vectors_embed)
