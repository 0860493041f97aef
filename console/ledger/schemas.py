"""The ingest record as the OpenAPI schema states it (documentation: console/ledger/validation.py
checks a batch by hand, for speed, and these serializers state the same limits for clients)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxLengthValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.core.openapi import ClosedObject
from console.core.validation import FLOAT32_MAX, INT32_MAX
from console.ledger import validation as limits
from console.ledger.models import MAX_CLAIM_CHARS, MAX_CLAIMS, AnswerForm, GateFunctional, HarmModel

# A text the validator accepts: no NUL and, unless blank is allowed, something besides whitespace.
NOT_BLANK = r"^[^\x00]*[^\s\x00][^\x00]*$"
NO_NUL = r"^[^\x00]*$"


@extend_schema_field({"type": "string", "minLength": 1, "pattern": NOT_BLANK})
class Text(serializers.CharField):
    """A text that must hold something besides whitespace, and no NUL."""


@extend_schema_field({"type": "string", "pattern": NO_NUL})
class BlankableText(serializers.Field):
    """A text that may be empty, without NUL. Not a CharField: drf-spectacular gives a blankable
    CharField with a pattern a oneOf that "" matches twice, and a CharField that is not blankable
    a minLength."""

    def __init__(self, *, max_length: int, **kwargs):
        super().__init__(**kwargs)
        self.validators.append(MaxLengthValidator(max_length))


def string(max_length: int, *, blank: bool = False, **kwargs) -> serializers.Field:
    if blank:
        return BlankableText(max_length=max_length, **kwargs)
    return Text(max_length=max_length, trim_whitespace=False, **kwargs)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "maxLength": limits.MAX_LABEL, "pattern": NO_NUL},
            {"type": "number"},
            {"type": "boolean"},
        ]
    }
)
class SegmentValue(serializers.Field):
    """A segment's value: a string of at most 200 characters, a finite number or a boolean."""


def label_map(**kwargs) -> serializers.DictField:
    return serializers.DictField(child=string(limits.MAX_LABEL, blank=True), **kwargs)


class GateRecord(ClosedObject):
    name = string(100, help_text="The gate's name (entailment, reranker, ...).")
    score = serializers.FloatField(help_text="The score the gate gave; finite.")
    cutoff = serializers.FloatField(help_text="The cutoff in force: served when score >= cutoff; finite.")
    functional = serializers.ChoiceField(
        choices=GateFunctional.values,
        required=False,
        allow_null=True,
        help_text="What the score estimates for a long answer: expected support E[S], the chance every claim "
        "is supported Pr(S = 1), or the chance of support at least s0. Absent: the route's setting.",
    )


class ClaimRecord(ClosedObject):
    text = string(MAX_CLAIM_CHARS, help_text="One atomic claim of the answer, as the answering system extracted it.")
    citations = serializers.ListField(
        child=string(limits.MAX_PASSAGE_ID),
        required=False,
        allow_null=True,
        help_text="Ids of the decision's own passages that the claim cites.",
    )


class PassageRecord(ClosedObject):
    id = string(limits.MAX_PASSAGE_ID, help_text="The retriever's id of the chunk.")
    text = string(
        limits.MAX_PASSAGE_TEXT,
        blank=True,
        help_text="The chunk as it was at request time; the same id with other text is another passage.",
    )
    retrieval_score = serializers.FloatField(required=False, allow_null=True)
    rank = serializers.IntegerField(
        required=False, min_value=1, max_value=INT32_MAX, help_text="1 is the top; default the list position."
    )
    source = string(limits.MAX_LABEL, blank=True, required=False, allow_null=True)
    uri = string(limits.MAX_URI, blank=True, required=False, allow_null=True)
    embedding = serializers.ListField(
        child=serializers.FloatField(min_value=-FLOAT32_MAX, max_value=FLOAT32_MAX),
        min_length=1,
        max_length=limits.MAX_EMBEDDING,
        required=False,
        allow_null=True,
        help_text="The passage's vector, single precision.",
    )


class DecisionRecord(ClosedObject):
    """One gated decision, served or refused. `(route, request_id)` is the idempotency key: the same
    record sent again counts as `unchanged`; the same key with other content is 409."""

    request_id = string(limits.MAX_ID, help_text="Unique within the route: the idempotency key.")
    route = string(64, help_text="The route's slug; it must exist and the token must ingest into it.")
    occurred_at = serializers.DateTimeField(help_text="ISO 8601 with a timezone.")
    question = string(limits.MAX_QUESTION)
    claim = string(limits.MAX_CLAIM, help_text="The text the gate scored: the draft answer or a claim.")
    gate = GateRecord()
    outcome = serializers.ChoiceField(choices=list(limits.OUTCOMES))
    served_answer = string(
        limits.MAX_ANSWER,
        required=False,
        allow_null=True,
        help_text="The answer served; required unless refused, and null (or absent) when refused.",
    )
    passages = serializers.ListField(
        child=PassageRecord(), required=False, allow_null=True, max_length=limits.MAX_PASSAGES
    )
    versions = label_map(
        help_text="Model, retriever, corpus and gate versions, as strings; at most 50 keys of 1 to 64 characters."
    )
    segments = serializers.DictField(
        child=SegmentValue(),
        required=False,
        allow_null=True,
        help_text="Query type, language, source, ...: at most 50 keys of 1 to 64 characters.",
    )
    claims = serializers.ListField(
        child=ClaimRecord(),
        required=False,
        allow_null=True,
        max_length=MAX_CLAIMS,
        help_text=f"The answer's atomic claims, in order (at most {MAX_CLAIMS}). Absent: the console splits the "
        "claim into sentences.",
    )
    expected_claims = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=limits.MAX_EXPECTED_CLAIMS,
        help_text="K, the claims a complete answer makes (recall); absent: the route's setting.",
    )
    question_embedding = serializers.ListField(
        child=serializers.FloatField(),
        min_length=1,
        max_length=limits.MAX_EMBEDDING,
        required=False,
        allow_null=True,
        help_text="The question's vector, for similar refusals.",
    )


class DecisionBatch(serializers.Serializer):  # other keys beside `decisions` are ignored
    decisions = serializers.ListField(child=DecisionRecord(), min_length=1, max_length=settings.INGEST_MAX_BATCH)


class IngestResult(serializers.Serializer):
    created = serializers.IntegerField(min_value=0, help_text="Decisions written by this call.")
    unchanged = serializers.IntegerField(min_value=0, help_text="Replays of decisions already stored, as they were.")


class RouteSummary(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    graders_per_item = serializers.IntegerField(min_value=1)


# The example of the ingest operation (the record README's "POST /api/v1/decisions" shows).
SAMPLE_RECORD = {
    "request_id": "q-000123",
    "route": "it-support",
    "occurred_at": "2026-11-01T12:00:00Z",
    "question": "How do I reset MFA?",
    "claim": "Open Settings > Security and choose Reset.",
    "gate": {"name": "entailment", "score": 0.62, "cutoff": 0.85},
    "outcome": "refused",
    "served_answer": None,
    "passages": [
        {
            "id": "kb/mfa#2",
            "text": "To reset MFA, open Settings > Security and choose Reset.",
            "retrieval_score": 0.81,
            "rank": 1,
            "source": "runbook",
            "uri": "https://intranet/kb/mfa",
        }
    ],
    "versions": {"model": "gen-2026-10", "retriever": "hybrid-3", "corpus": "snap-2026-11-01", "gate": "nli-4"},
    "segments": {"query_type": "how-to", "language": "en"},
}


class JsonNumber(serializers.FloatField):
    """A JSON number and nothing else: DRF's FloatField also takes `true` and "0.5"."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class JsonInteger(serializers.IntegerField):
    """A JSON integer (12 or 12.0) and nothing else: DRF's IntegerField also takes "12"."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class AnswerSettings(ClosedObject):
    """How a route's answers are judged (issue 31). Every field is optional in a PATCH: what is
    absent stays as it is."""

    answer_form = serializers.ChoiceField(
        choices=AnswerForm.values, required=False, help_text="short: one verdict per answer; long: claim by claim."
    )
    harm_model = serializers.ChoiceField(
        choices=HarmModel.values,
        required=False,
        help_text="proportional: an answer earns S - c_w (1 - S); all_or_nothing: 1 only when S = 1, else -c_w; "
        "at_least: good when S >= support_threshold.",
    )
    support_threshold = JsonNumber(
        required=False, allow_null=True, min_value=0, max_value=1, help_text="s0; required by at_least."
    )
    expected_claims = JsonInteger(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=limits.MAX_EXPECTED_CLAIMS,
        help_text="K, the claims a complete answer makes; decisions may send their own.",
    )
    gate_functional = serializers.ChoiceField(
        choices=[*GateFunctional.values, ""],
        required=False,
        allow_blank=True,
        help_text="What the gate's score estimates when a decision does not say; empty: unspecified.",
    )


class AnswerSettingsOutput(serializers.Serializer):
    route = serializers.SlugField()
    answer_form = serializers.ChoiceField(choices=AnswerForm.values)
    harm_model = serializers.ChoiceField(choices=HarmModel.values)
    support_threshold = serializers.FloatField(allow_null=True)
    expected_claims = serializers.IntegerField(allow_null=True)
    gate_functional = serializers.ChoiceField(choices=[*GateFunctional.values, ""])
