"""The API's JSON parser: every body it cannot turn into data is a 400, never a 500."""

from __future__ import annotations

import math
import re

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json

# Only a number with a three-digit exponent or a hundred digits in a row can exceed a double; a body
# without either is parsed without a per-number check (float-heavy bodies, such as embeddings,
# parse twice as slowly with one).
_MAYBE_TOO_LARGE = re.compile(rb"[eE][+-]?[0-9]{3}|[0-9]{100}")


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
    """

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = get_encoding(parser_context or {})
        try:
            raw = stream.read() if stream is not None else b""
            text = raw.decode(encoding)
            parse_float = _finite_float if _MAYBE_TOO_LARGE.search(raw) else None
            parse_constant = json.strict_constant if self.strict else None
            return json.loads(text, parse_constant=parse_constant, parse_float=parse_float)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
