import time

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.validators import ProhibitSurrogateCharactersValidator
from rest_framework.views import APIView

from console.core.api import ERROR_SCHEMA as ERROR
from console.core.errors import InvalidInput, TooLarge, detail
from console.core.validation import has_lone_surrogate
from console.verification import selectors
from console.verification.spans import TextNotUtf8, verify_span

# A pasted text may be longer than a logged passage (100,000) but stays bounded: the search is
# linear, at 20 MB/s or more on the worst inputs known, so 4 MB (a million 4-byte characters) is
# well inside the default time budget; the budget (VERIFY_TIME_BUDGET_MS) covers the rest.
MAX_TEXT_CHARS = 1_000_000
_BIGINT_MAX = 2**63 - 1


class _StrictText(serializers.CharField):
    """A JSON string and nothing else (CharField would turn 12 into "12").

    Lone surrogates are left to the verifier, which reports them as `text_not_utf8`.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitSurrogateCharactersValidator)]

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


_ID = {"type": "integer", "minimum": 1, "maximum": _BIGINT_MAX}
_CLAIM = {
    "type": "string",
    "maxLength": 2000,
    "pattern": r"\S",
    "description": "Trimmed; empty -> 400 claim_empty; over 2,000 characters -> 400 claim_too_long.",
}


def _source(name: str, schema: dict) -> dict:
    return {
        "type": "object",
        "title": name,
        "additionalProperties": False,
        "required": [name, "claim"],
        "properties": {name: schema, "claim": _CLAIM},
    }


# Exactly one of passage_id, chunk_id and text, with the claim: the serializer below checks it, and
# a serializer's schema cannot say "one of these keys".
VERIFY_BODY = {
    "oneOf": [
        _source("passage_id", {**_ID, "description": "The console's passage id (see decision lookups)."}),
        _source("chunk_id", {**_ID, "description": "Alias of passage_id."}),
        _source(
            "text",
            {
                "type": "string",
                "maxLength": MAX_TEXT_CHARS,
                "description": "Text to search instead of a logged passage (more -> 413 text_too_large).",
            },
        ),
    ]
}


class VerifyApi(APIView):
    """Does the claim appear, word for word up to case, in the passage; and where.

    Pure read, no audit row. The search runs under a time budget (VERIFY_TIME_BUDGET_MS from
    the request's arrival): past it the answer is 503 `verify_time_budget`, not a worker held.
    `{"passage_id"}` (alias `chunk_id`) verifies against a logged
    passage and needs a role that reads decisions on a route that logged it (graders get 403:
    verifier results on logged data are hidden from them). `{"text"}` verifies against text the
    caller sends and is open to every authenticated user: its result is a function of the
    caller's own input and reveals nothing stored.
    """

    # Reports a lone surrogate as its own field error (console/core/parsers.py).
    reports_lone_surrogates = True

    @extend_schema_serializer(component_name="VerifyInput")
    class InputSerializer(serializers.Serializer):
        passage_id = serializers.IntegerField(
            required=False,
            min_value=1,
            max_value=_BIGINT_MAX,
            help_text="The console's passage id (see decision lookups).",
        )
        chunk_id = serializers.IntegerField(
            required=False, min_value=1, max_value=_BIGINT_MAX, help_text="Alias of passage_id."
        )
        text = _StrictText(
            required=False,
            allow_blank=True,
            trim_whitespace=False,
            help_text="Text to search instead of a logged passage; at most 1,000,000 characters "
            "(more -> 413 text_too_large).",
        )
        claim = _StrictText(
            allow_blank=True,
            trim_whitespace=False,
            help_text="Trimmed; empty -> claim_empty; over 2,000 characters -> claim_too_long.",
        )

        def validate(self, data):
            unknown = sorted(set(self.initial_data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: "Unknown field." for name in unknown})
            sources = [name for name in ("passage_id", "chunk_id", "text") if name in data]
            if len(sources) != 1:
                raise serializers.ValidationError(
                    {"non_field_errors": 'Send exactly one of "passage_id" (or "chunk_id") and "text".'}
                )
            return data

    @extend_schema_serializer(component_name="VerifyResult")
    class OutputSerializer(serializers.Serializer):
        supported = serializers.BooleanField()
        decision = serializers.ChoiceField(choices=["supported", "unsupported_claim"])
        match_ranges = serializers.ListField(
            child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
            help_text="[start, end) byte offsets into the UTF-8 encoding of the original text.",
        )
        char_ranges = serializers.ListField(
            child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
            help_text="[start, end) code-point offsets into the original text.",
        )
        truncated = serializers.BooleanField(help_text="More than 100 matches existed.")

    @extend_schema(
        request={"application/json": VERIFY_BODY},
        responses={200: OutputSerializer, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 413: ERROR, 503: ERROR},
        summary="Verify a claim against a passage",
        examples=[
            OpenApiExample("Logged passage", value={"passage_id": 12, "claim": "choose Reset"}, request_only=True),
            OpenApiExample("Own text", value={"text": "Die Straße ist lang.", "claim": "STRASSE"}, request_only=True),
            # "ß" is two bytes in UTF-8: the byte range ends one past the character range.
            OpenApiExample(
                "Found",
                response_only=True,
                value={
                    "supported": True,
                    "decision": "supported",
                    "match_ranges": [[4, 11]],
                    "char_ranges": [[4, 10]],
                    "truncated": False,
                },
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        deadline = time.monotonic() + settings.VERIFY_TIME_BUDGET_MS / 1000
        if not isinstance(request.data, dict):
            raise InvalidInput('Body must be {"passage_id" | "chunk_id" | "text", "claim"}.', code="invalid_body")
        text = request.data.get("text")
        if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
            raise TooLarge(
                f"The text has {len(text)} characters; at most {MAX_TEXT_CHARS} are allowed.",
                code="text_too_large",
                details=[detail("text", "too_long", "is too long", max_chars=MAX_TEXT_CHARS, chars=len(text))],
            )
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if has_lone_surrogate(data["claim"]):  # no UTF-8 form, so it can match no text: say so, as for a text
            raise TextNotUtf8("The claim contains a lone surrogate and has no UTF-8 form.")
        if "text" in data:
            text = data["text"]
        else:
            text = selectors.passage_text_for_user(request.user, data.get("passage_id") or data["chunk_id"])
        return Response(verify_span(text, data["claim"], deadline=deadline).as_dict())
