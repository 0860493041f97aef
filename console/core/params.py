"""Query parameters of the API's read endpoints, read one at a time with every problem collected.

Each problem is a `detail(name, "invalid_parameter", message, parameter=name)`; `finish()` raises them
all together as one 400 `invalid_parameter`, so a client learns every bad parameter at once. Unknown
parameters can be refused too (`refuse_unknown`), so a misspelt filter (`segments.language`) cannot
silently widen what a list or a statistic reads.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any

from console.core.errors import InvalidInput, detail

# `version.<key>` / `segment.<key>`: the key part, and the longest value a filter takes.
PAIR_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
PAIR_MAX_VALUE = 200
# A pair's value as `pairs` takes it, for the OpenAPI schema: stripped, 1 to 200 characters, no NUL.
PAIR_VALUE_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": PAIR_MAX_VALUE,
    "pattern": r"^\s*[^\s\x00][^\x00]*$",
}


class QueryReader:
    """Reads one parameter at a time from a QueryDict-like mapping, collecting every problem."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = params
        self.errors: list[dict[str, str]] = []

    def values(self, name: str) -> list[str]:
        getlist = getattr(self.params, "getlist", None)
        if getlist is not None:
            return list(getlist(name))
        value = self.params.get(name)
        return [] if value is None else [value]

    def raw(self, name: str) -> str | None:
        values = self.values(name)
        if len(values) > 1:
            self.error(name, "is given more than once.")
            return None
        return values[0].strip() if values else None

    def error(self, name: str, message: str) -> None:
        self.errors.append(detail(name, "invalid_parameter", f"{name} {message}", parameter=name))

    def number(
        self, name: str, default: float | None, low: float, high: float, *, closed: bool = False
    ) -> float | None:
        raw = self.raw(name)
        if raw is None or raw == "":
            return default
        value = to_float(raw)
        inside = value is not None and (low <= value <= high if closed else low < value < high)
        if not inside:
            bounds = f"[{low:g}, {high:g}]" if closed else f"strictly between {low:g} and {high:g}"
            self.error(name, f"must be a number {bounds}; got {raw[:40]!r}.")
            return default
        return value

    def integer(self, name: str, default: int | None, low: int, high: int) -> int | None:
        raw = self.raw(name)
        if raw is None or raw == "":
            return default
        if not re.fullmatch(r"\d{1,7}", raw) or not low <= int(raw) <= high:
            self.error(name, f"must be a whole number from {low} to {high}; got {raw[:40]!r}.")
            return default
        return int(raw)

    def choice(self, name: str, default: str, choices: Iterable[str]) -> str:
        raw = self.raw(name)
        if raw is None or raw == "":
            return default
        options = tuple(choices)
        if raw not in options:
            self.error(name, f"must be one of {', '.join(options)}; got {raw[:40]!r}.")
            return default
        return raw

    def flag(self, name: str) -> bool:
        """`true`/`false` (also 1/0, yes/no, on/off); absent or empty is false."""
        raw = (self.raw(name) or "").lower()
        if raw in ("", "false", "0", "no", "off"):
            return False
        if raw in ("true", "1", "yes", "on"):
            return True
        self.error(name, f"must be true or false; got {raw[:40]!r}.")
        return False

    def text(self, name: str, *, max_length: int) -> str:
        raw = self.raw(name) or ""
        if len(raw) > max_length or "\x00" in raw:
            self.error(name, f"takes at most {max_length} characters and no NUL.")
            return ""
        return raw

    def day(self, name: str) -> date | None:
        raw = self.raw(name)
        if raw is None or raw == "":
            return None
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw):
            try:
                return date.fromisoformat(raw)
            except ValueError:  # 2026-02-30
                pass
        self.error(name, f"must be a date written YYYY-MM-DD; got {raw[:40]!r}.")
        return None

    def pairs(self, prefix: str) -> tuple[tuple[str, str], ...]:
        """Every `<prefix><key>=<value>` parameter (`version.model=gen-2`), sorted by key."""
        found = []
        for name in self.params:
            if not name.startswith(prefix):
                continue
            key = name[len(prefix) :]
            value = self.raw(name)
            if not PAIR_KEY.fullmatch(key):
                self.error(name, "needs a key of letters, digits, '_' or '-' (at most 64) after the dot.")
            elif not value or len(value) > PAIR_MAX_VALUE or "\x00" in value:
                self.error(name, f"needs a value of 1 to {PAIR_MAX_VALUE} characters.")
            else:
                found.append((key, value))
        return tuple(sorted(found))

    def refuse_unknown(self, known: Iterable[str], prefixes: tuple[str, ...] = ()) -> None:
        allowed = set(known)
        for name in self.params:
            if name not in allowed and not (prefixes and name.startswith(prefixes)):
                self.error(name, "is not a parameter of this endpoint.")

    def finish(self) -> None:
        raise_for(self.errors)


def raise_for(errors: list[dict[str, str]]) -> None:
    if errors:
        problems = " ".join(e["message"] for e in errors)
        raise InvalidInput(f"Invalid parameters. {problems}", details=errors, code="invalid_parameter")


def to_float(raw: str) -> float | None:
    """A finite number of at most 1e12 in size, or None."""
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and abs(value) <= 1e12 else None
