"""Field checks shared by every hand-written batch validator: each problem is kept with the
item's index and a field path, so a client can fix a whole batch in one go."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from console.core.errors import detail

# What PostgreSQL can store: int4 for ranks and counts, float4 for pgvector components.
INT32_MAX = 2**31 - 1
FLOAT32_MAX = 3.4028234663852886e38


def has_lone_surrogate(value: str) -> bool:
    """True for a string with no UTF-8 form (JSON lets a client send "\\ud800" alone): PostgreSQL
    cannot store it, hashing and rendering it fail. ASCII strings, the common case, cost nothing."""
    if value.isascii():
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return True
    return False


def is_one_email_address(value: str) -> bool:
    """One address a message can be sent to: Django's validator (a local part, one @, a domain with a
    dot), and no control character, comma or semicolon anywhere, so nothing stored can add a header
    or a recipient to a message (a CR/LF, a second address, a bare "@")."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value) or "," in value or ";" in value:
        return False
    try:
        validate_email(value)
    except ValidationError:
        return False
    return True


def printable(value: str) -> str:
    """`value` safe to echo back in an error: lone surrogates written as \\udXXX escapes."""
    return value if value.isascii() else value.encode("utf-8", "backslashreplace").decode()


class FieldErrors:
    """Problems found in a batch, one `detail()` per problem: field path, index, code, message."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, index: int, path: str, message: str, code: str = "invalid") -> None:
        # A path can hold a client's own key; one with a lone surrogate would break the JSON answer.
        self.items.append(detail(printable(path), code, printable(message), index=index))

    def of_one_body(self) -> list[dict[str, Any]]:
        """The problems of a body that is not a batch: `index` marks batch items only, so it goes."""
        return [{key: value for key, value in item.items() if key != "index"} for item in self.items]


def text_field(
    errors: FieldErrors,
    index: int,
    path: str,
    value: Any,
    *,
    max_len: int,
    required: bool = True,
    allow_empty: bool = False,
) -> str | None:
    if value is None:
        if required:
            errors.add(index, path, "is required", "required")
        return None
    if not isinstance(value, str):
        errors.add(index, path, "must be a string", "invalid_type")
        return None
    if not allow_empty and not value.strip():
        errors.add(index, path, "must not be empty", "blank")
        return None
    if len(value) > max_len:
        errors.add(index, path, f"is longer than {max_len:,} characters ({len(value):,})", "too_long")
        return None
    if "\x00" in value:
        errors.add(index, path, "must not contain NUL characters", "invalid_character")
        return None
    if has_lone_surrogate(value):
        errors.add(index, path, "must be valid Unicode (it holds a lone surrogate such as \\ud800)", "invalid_unicode")
        return None
    return value


def number_field(errors: FieldErrors, index: int, path: str, value: Any, *, required: bool = True) -> float | None:
    if value is None:
        if required:
            errors.add(index, path, "is required", "required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        errors.add(index, path, "must be a number", "invalid_type")
        return None
    number = finite_number(value)
    if number is None:
        errors.add(index, path, "must be finite", "not_finite")
        return None
    return number


def finite_number(value: int | float, *, limit: float = math.inf) -> float | None:
    """`value` as a float when it is finite and at most `limit` in size, else None. Python's json
    reads 1e400 as inf and 10**400 as an int that float() refuses: both are None."""
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and abs(number) <= limit else None


def timestamp_field(errors: FieldErrors, index: int, path: str, value: Any) -> datetime | None:
    if not isinstance(value, str):
        errors.add(index, path, "is required as an ISO 8601 timestamp with a timezone", "required")
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        errors.add(index, path, f"is not an ISO 8601 timestamp: {value[:40]!r}", "invalid_timestamp")
        return None
    if parsed.tzinfo is None:
        errors.add(index, path, "must include a timezone (for example Z or +00:00)", "invalid_timestamp")
        return None
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is a day before the calendar starts
        errors.add(index, path, "is outside the years 1 to 9999 once converted to UTC", "invalid_timestamp")
        return None
