"""The envelope every batch endpoint shares: {"<key>": [...]}, 1 to INGEST_MAX_BATCH records."""

from typing import Any

from django.conf import settings

from console.core.errors import InvalidInput, TooLarge, detail


def batch_records(body: Any, key: str) -> list:
    """The records of a batch body; 400 for a malformed or empty body, 413 for too many records."""
    if not isinstance(body, dict) or not isinstance(body.get(key), list):
        raise InvalidInput(f'Body must be {{"{key}": [...]}}.', code="invalid_body")
    if unknown := sorted(k for k in body if k != key):
        raise InvalidInput(
            f'Body must be {{"{key}": [...]}}; unknown: {", ".join(k[:64] for k in unknown[:10])}.',
            details=[detail(k[:200], "unknown_field", "is not a field of this request") for k in unknown[:50]],
        )
    records = body[key]
    if len(records) > settings.INGEST_MAX_BATCH:
        raise TooLarge(
            f"At most {settings.INGEST_MAX_BATCH} {key} per call; got {len(records)}.", code="batch_too_large"
        )
    if not records:
        raise InvalidInput("The batch is empty.", code="empty_batch")
    return records


def raise_batch_invalid(
    *, total: int, records_noun: str, errors: list[dict], unknown: list[dict], unknown_code: str, unknown_noun: str
) -> None:
    """400 listing every problem of a batch by index and field; nothing was written.

    `unknown` are the items naming something that does not exist (each with its `value`); when
    they are the only problems the error code says so (`unknown_route`, `unknown_decision`).
    The message names at most 20 of them; `details` lists every one.
    """
    all_errors = sorted(errors + unknown, key=lambda e: (e["index"], e["field"] or ""))
    bad = len({e["index"] for e in all_errors})
    message = f"{bad} of {total} {records_noun} are invalid; nothing was written."
    names = sorted({e["value"] for e in unknown})
    if names:
        message += f" Unknown {unknown_noun}: {', '.join(names[:20])}{' ...' if len(names) > 20 else ''}."
    raise InvalidInput(message, details=all_errors, code=unknown_code if unknown and not errors else "invalid")
