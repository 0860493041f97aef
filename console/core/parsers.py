"""The API's JSON parser: every body it cannot turn into data is a 400, never a 500."""

from __future__ import annotations

import math
import re

import orjson
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json

from console.core.errors import InvalidInput, detail
from console.core.validation import has_lone_surrogate

# Only a number with a three-digit exponent or a hundred digits in a row can exceed a double; a body
# without either is parsed without a per-number check (float-heavy bodies, such as embeddings,
# parse twice as slowly with one).
_MAYBE_TOO_LARGE = re.compile(rb"[eE][+-]?[0-9]{3}|[0-9]{100}")
# A lone surrogate can only arrive as a JSON escape (raw UTF-8 cannot hold one): a body without a
# \uD800-\uDFFF escape is not walked.
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


# orjson parses what Python's json module parses into the same values, twice as fast, with two
# exceptions: an integer beyond 64 bits becomes a float, and a few inputs json accepts it refuses
# (lone surrogates, a byte order mark, nesting past 1,024 levels, numbers beyond a double). A body
# it refuses takes the json module's path, which reports as before; a body with 19 digits in a row
# (where such an integer can be) takes it too. The digit runs are found by mapping every digit to
# "0" and everything else to a space: one pass in C, where a regular expression over a 1.5 MB body
# of English text took longer than parsing it.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_DIGIT_RUN = b"0" * 19
_NOT_PARSED = object()


def _fast_loads(raw: bytes, encoding: str):
    """The body parsed by orjson, or _NOT_PARSED when it must go through the json module."""
    if encoding.lower().replace("-", "").replace("_", "") != "utf8":
        return _NOT_PARSED
    if raw.translate(_DIGITS_ONLY).find(_LONG_DIGIT_RUN) != -1:
        return _NOT_PARSED
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _NOT_PARSED


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is too large for a double")
    return value


class SafeJSONParser(JSONParser):
    """DRF's JSONParser, plus the failures it lets through.

    Python's json parser recurses once per nesting level and raises RecursionError past the
    interpreter's limit (about a thousand levels: `[[[[...]]]]` a hundred thousand deep is a
    200 KB body); DRF only turns ValueError into a ParseError. A number with more digits than
    Python converts (int_max_str_digits) is a ValueError and already handled. `NaN` and
    `Infinity` are refused by DRF's strict mode, but `1e400` reads as infinity without passing
    that check: it is refused here, so no non-finite number reaches a service (jsonb, the audit
    trail's canonical text and the statistics all refuse it).

    A view that names its body's fields (``body_fields``, a set) gets every other top-level key
    refused with 400 ``unknown_field``: a misspelt optional field would otherwise read as absent.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = get_encoding(parser_context or {})
        raw = stream.read() if stream is not None else b""
        data = _fast_loads(raw, encoding)
        if data is _NOT_PARSED:
            data = self._loads(raw, encoding)
        view = (parser_context or {}).get("view")
        if _MAYBE_SURROGATE.search(raw) and not getattr(view, "reports_lone_surrogates", False):
            where = _lone_surrogate_path(data, "")
            if where is not None:
                raise InvalidInput(
                    "The body holds a lone surrogate (such as \\ud800), which has no UTF-8 form.",
                    details=[detail(where or None, "invalid_unicode", "must be valid Unicode")],
                )
        allowed = getattr(view, "body_fields", None)
        if allowed is not None and isinstance(data, dict):
            unknown = sorted(key for key in data if key not in allowed)
            if unknown:
                raise InvalidInput(
                    "Unknown field"
                    + ("s" if len(unknown) > 1 else "")
                    + ": "
                    + ", ".join(k[:64] for k in unknown[:10])
                    + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
                    + ". Known: "
                    + (", ".join(sorted(allowed)) or "none (send no body)")
                    + ".",
                    details=[detail(k[:200], "unknown_field", "is not a field of this request") for k in unknown[:50]],
                )
        return data

    def _loads(self, raw: bytes, encoding: str):
        try:
            text = raw.decode(encoding)
            parse_float = _finite_float if _MAYBE_TOO_LARGE.search(raw) else None
            parse_constant = json.strict_constant if self.strict else None
            return json.loads(text, parse_constant=parse_constant, parse_float=parse_float)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None


def _lone_surrogate_path(value, path: str) -> str | None:
    """Where the first string (or key) with a lone surrogate is, as `a.b[0].c`; None when there is none.

    Views that validate their own text fields and report the field in their own terms (ingest, label
    import, the span verifier) set ``reports_lone_surrogates``; every other write is refused here, so no
    such string reaches a service, the database or the audit trail's hash."""
    if isinstance(value, str):
        return path if has_lone_surrogate(value) else None
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _lone_surrogate_path(item, f"{path}[{index}]")
            if found is not None:
                return found
    elif isinstance(value, dict):
        for key, item in value.items():
            name = f"{path}.{key}" if path else key
            if has_lone_surrogate(key):
                return name.encode("utf-8", "backslashreplace").decode()
            found = _lone_surrogate_path(item, name)
            if found is not None:
                return found
    return None


def body_checked(request) -> None:
    """Parse the body now, so a handler that reads none still refuses one (``body_fields`` empty):
    without this a body sent to an action that takes none is never looked at."""
    request.data  # noqa: B018 -- the parse is the point
