"""Ledger jobs: thin wrappers around the ledger's services."""

from audit.services import Actor
from console.core.jobs import job
from console.ledger import services


@job("ledger.passage_dictionary_build", soft_time_limit=120)
def passage_dictionary_build() -> int | None:
    """Queued by ingest once enough passage text is stored without a dictionary, and daily by beat
    (a newer sample may compress the newest passages better); the id of a dictionary it stored."""
    dictionary = services.passage_dictionary_build(actor=Actor.system("passage_dictionary_build"))
    return None if dictionary is None else dictionary.pk
