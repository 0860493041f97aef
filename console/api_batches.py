"""The envelope every batch endpoint shares: {"<key>": [...]}, 1 to INGEST_MAX_BATCH records."""

from typing import Any

from django.conf import settings

from console.errors import InvalidInput, TooLarge


def batch_records(body: Any, key: str) -> list:
    """The records of a batch body; 400 for a malformed or empty body, 413 for too many records."""
    if not isinstance(body, dict) or not isinstance(body.get(key), list):
        raise InvalidInput(f'Body must be {{"{key}": [...]}}.', code="invalid_body")
    records = body[key]
    if len(records) > settings.INGEST_MAX_BATCH:
        raise TooLarge(f"At most {settings.INGEST_MAX_BATCH} {key} per call; got {len(records)}.",
                       code="batch_too_large")
    if not records:
        raise InvalidInput("The batch is empty.", code="empty_batch")
    return records
