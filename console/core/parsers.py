"""The API's JSON parser: every body it cannot turn into data is a 400, never a 500."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class SafeJSONParser(JSONParser):
    """DRF's JSONParser, plus the failures it lets through.

    Python's json parser recurses once per nesting level and raises RecursionError past the
    interpreter's limit (about a thousand levels: `[[[[...]]]]` a hundred thousand deep is a
    200 KB body); DRF only turns ValueError into a ParseError. A number with more digits than
    Python converts (int_max_str_digits) is a ValueError and already handled.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
