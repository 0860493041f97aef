"""Field checks shared by every hand-written batch validator: each problem is kept with the
item's index and a field path, so a client can fix a whole batch in one go."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any


class FieldErrors:
    """Problems found in a batch, one dict per problem: index, field path, message."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, index: int, path: str, message: str) -> None:
        self.items.append({"index": index, "field": path, "message": message})


def text_field(errors: FieldErrors, index: int, path: str, value: Any, *, max_len: int,
          required: bool = True, allow_empty: bool = False) -> str | None:
    if value is None:
        if required:
            errors.add(index, path, "is required")
        return None
    if not isinstance(value, str):
        errors.add(index, path, "must be a string")
        return None
    if not allow_empty and not value.strip():
        errors.add(index, path, "must not be empty")
        return None
    if len(value) > max_len:
        errors.add(index, path, f"is longer than {max_len:,} characters ({len(value):,})")
        return None
    if "\x00" in value:
        errors.add(index, path, "must not contain NUL characters")
        return None
    return value


def number_field(errors: FieldErrors, index: int, path: str, value: Any, *, required: bool = True) -> float | None:
    if value is None:
        if required:
            errors.add(index, path, "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        errors.add(index, path, "must be a number")
        return None
    number = float(value)
    if not math.isfinite(number):
        errors.add(index, path, "must be finite")
        return None
    return number


def timestamp_field(errors: FieldErrors, index: int, path: str, value: Any) -> datetime | None:
    if not isinstance(value, str):
        errors.add(index, path, "is required as an ISO 8601 timestamp with a timezone")
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        errors.add(index, path, f"is not an ISO 8601 timestamp: {value[:40]!r}")
        return None
    if parsed.tzinfo is None:
        errors.add(index, path, "must include a timezone (for example Z or +00:00)")
        return None
    return parsed.astimezone(UTC)
