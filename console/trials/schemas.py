"""The gate-trial bodies as the OpenAPI schema states them (console/trials/validation.py checks the
request by hand and lists every bad field; these serializers state the same rules for clients)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.core.openapi import ClosedObject
from console.trials.models import CandidateKind, TrialStatus


@extend_schema_field(
    {
        "oneOf": [
            {"type": "object", "additionalProperties": {"type": "string", "maxLength": 200}},
            {
                "type": "string",
                "pattern": "=",
                "description": 'name=value, as the page\'s form sends it: "language=de".',
            },
        ]
    }
)
class SegmentFilter(serializers.Field):
    """Segment names to values."""


class TrialSubset(ClosedObject):
    from_ = serializers.DateField(required=False, allow_null=True)
    to = serializers.DateField(required=False, allow_null=True)
    segment = SegmentFilter(required=False, allow_null=True)
    model = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=200)

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {"type": "string", "minLength": 1, "maxLength": 4000, "pattern": "^[^\r\n]*$"},
    }
)
class CandidateHeaders(serializers.Field):
    """Header names (letters, digits and -, at most 100) to one-line values of at most 4,000 characters."""


class TrialGates(ClosedObject):
    max_unsafe_upper = serializers.FloatField(
        required=False, min_value=0, max_value=1, help_text="Upper bound of unsafe full answers, at most."
    )
    min_coverage = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=1,
        help_text="Coverage at least; null: the current gate's coverage on the same items.",
    )
    min_stability = serializers.FloatField(required=False, min_value=0, max_value=1)
    max_citation_errors = serializers.FloatField(required=False, min_value=0, help_text="Calls with a citation error.")


class TrialStart(ClosedObject):
    name = serializers.CharField(max_length=100, help_text="1 to 100 characters (trimmed).")
    kind = serializers.ChoiceField(choices=CandidateKind.values, required=False, help_text="Default http.")
    url = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The candidate's http(s) URL (kind http); it must pass the egress policy "
        "(OUTBOUND_ALLOWED_NETWORKS). The reference candidate takes none.",
    )
    headers = CandidateHeaders(required=False, allow_null=True, help_text="Stored encrypted; never shown again.")
    headers_env = serializers.RegexField(
        r"^CANDIDATE_HEADER_[A-Z0-9_]{1,83}$",
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text='An environment variable of the server holding "Name: value".',
    )
    timeout_s = serializers.FloatField(required=False, min_value=0, max_value=120, help_text="More than 0.")
    repeats = serializers.IntegerField(required=False, min_value=1, max_value=10)
    subset = TrialSubset(required=False, allow_null=True)
    gates = TrialGates(required=False, allow_null=True)


class TrialStarted(serializers.Serializer):
    id = serializers.IntegerField(help_text="Read the trial at GET /api/v1/gate-trials/{id}.")


class TrialShare(serializers.Serializer):
    count = serializers.IntegerField(min_value=0)
    n = serializers.IntegerField(min_value=0)
    value = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)


class CandidateFigures(serializers.Serializer):
    unsafe_full_answers = TrialShare(help_text="Verdict answer on items labelled incorrect.")
    coverage = TrialShare(help_text="Verdict answer on items labelled correct.")
    partial = TrialShare()
    conflict = TrialShare()
    abstain = TrialShare()
    stability = TrialShare(help_text="Items with one verdict across all repeats.")
    citation_errors = serializers.IntegerField(min_value=0)


class CurrentFigures(serializers.Serializer):
    unsafe_full_answers = TrialShare()
    coverage = TrialShare()
    abstain = TrialShare()
    cutoff = serializers.FloatField(allow_null=True)
    cutoff_source = serializers.CharField(allow_blank=True)


class TrialCalls(serializers.Serializer):
    made = serializers.IntegerField(min_value=0)
    errors = serializers.IntegerField(min_value=0)
    total = serializers.IntegerField(min_value=0)


class TrialMcNemar(serializers.Serializer):
    p_value = serializers.FloatField(allow_null=True)
    n = serializers.IntegerField(min_value=0)


class TrialGate(serializers.Serializer):
    name = serializers.CharField()
    threshold = serializers.FloatField(allow_null=True)
    value = serializers.FloatField(allow_null=True)
    passed = serializers.BooleanField()


class TrialDisagreement(serializers.Serializer):
    decision_id = serializers.IntegerField()
    request_id = serializers.CharField()
    label = serializers.CharField()
    candidate = serializers.CharField()
    current = serializers.CharField()
    score = serializers.FloatField()


class TrialInterval(serializers.Serializer):
    method = serializers.CharField()
    confidence = serializers.FloatField()


class Trial(serializers.Serializer):
    """While queued or running: progress, with `candidate`, `current` and `mcnemar` null. Once done:
    the stored result document with its SHA-256 (keys marked as such are present only then)."""

    id = serializers.IntegerField()
    route = serializers.SlugField()
    candidate_name = serializers.CharField()
    status = serializers.ChoiceField(choices=TrialStatus.values)
    error = serializers.CharField(allow_null=True, required=False)
    items = serializers.IntegerField(min_value=0)
    repeats = serializers.IntegerField(min_value=1)
    calls = TrialCalls()
    candidate = CandidateFigures(allow_null=True)
    current = CurrentFigures(allow_null=True)
    mcnemar = TrialMcNemar(allow_null=True)
    gates = TrialGate(many=True)
    passed = serializers.BooleanField(allow_null=True)
    created_at = serializers.DateTimeField()
    items_judged = serializers.IntegerField(required=False, help_text="Done only.")
    items_all_errored = serializers.IntegerField(required=False, help_text="Done only.")
    confusion = serializers.DictField(
        child=serializers.DictField(child=serializers.IntegerField()), required=False, help_text="Done only."
    )
    disagreements = TrialDisagreement(many=True, required=False, help_text="Done only.")
    estimator = serializers.CharField(required=False, help_text="Done only.")
    interval = TrialInterval(required=False, help_text="Done only.")
    subset = serializers.DictField(required=False, help_text="Done only: the subset as sent.")
    sha256 = serializers.CharField(required=False, help_text="Done only: SHA-256 of the stored result.")
    finished_at = serializers.DateTimeField(required=False, help_text="Done only.")
