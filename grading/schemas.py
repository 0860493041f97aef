"""Bodies of the grading API as the OpenAPI schema states them (reviewers' side; the graders' item
is declared beside its view, so what a grader may see is read in one place)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from grading.models import ClaimVerdict, Verdict

# `{}`, `{"route": "slug"}` or no body at all (JSON null counts as none).
GRADING_NEXT_BODY = {
    "type": "object",
    "nullable": True,
    "additionalProperties": False,
    "properties": {
        "route": {
            "type": "string",
            "nullable": True,
            "maxLength": 64,
            "pattern": r"^[-a-zA-Z0-9_]{1,64}$",
            "description": "Only items of this route; any route you grade when absent or null.",
        }
    },
}


class AdjudicationSummary(serializers.Serializer):
    id = serializers.UUIDField()
    route = serializers.SlugField()
    grades = serializers.IntegerField(min_value=0)


class AdjudicationPassage(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField(allow_blank=True)


class AdjudicationGrade(serializers.Serializer):
    grader = serializers.CharField()
    verdict = serializers.ChoiceField(choices=Verdict.values)
    note = serializers.CharField(allow_blank=True)


class AdjudicationClaimGrade(serializers.Serializer):
    grader = serializers.CharField()
    verdict = serializers.ChoiceField(
        choices=ClaimVerdict.values, allow_null=True, help_text="Null: the grade was one verdict on the whole answer."
    )


class AdjudicationClaim(serializers.Serializer):
    index = serializers.IntegerField(min_value=0)
    text = serializers.CharField()
    grades = AdjudicationClaimGrade(many=True)


class AdjudicationItem(serializers.Serializer):
    id = serializers.UUIDField()
    route = serializers.SlugField()
    question = serializers.CharField()
    answer = serializers.CharField(allow_blank=True)
    passages = AdjudicationPassage(many=True)
    grades = AdjudicationGrade(many=True)
    claims = AdjudicationClaim(
        many=True,
        required=False,
        help_text="Long routes only: the claims the graders disagreed on, the only ones the reviewer decides.",
    )


class AdjudicationResult(serializers.Serializer):
    item = serializers.UUIDField()
    verdict = serializers.CharField()
    method = serializers.CharField()
    claims_supported = serializers.IntegerField(required=False, help_text="Long routes only: k.")
    claims_verifiable = serializers.IntegerField(required=False, help_text="Long routes only: n.")


class AgreementEstimate(serializers.Serializer):
    value = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    se = serializers.FloatField(allow_null=True)
    n = serializers.IntegerField(min_value=0)
    confidence = serializers.FloatField()
    interval = serializers.CharField()


class Proportion(serializers.Serializer):
    value = serializers.FloatField()
    low = serializers.FloatField()
    high = serializers.FloatField()


class GoldAccuracy(serializers.Serializer):
    gold_items = serializers.IntegerField(min_value=0)
    voted = serializers.IntegerField(min_value=0)
    unsure = serializers.IntegerField(min_value=0)
    agreed = serializers.IntegerField(min_value=0)
    accuracy = Proportion(allow_null=True)
    confidence = serializers.FloatField()
    interval = serializers.CharField()


class GraderPair(serializers.Serializer):
    graders = serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2)
    items = serializers.IntegerField(min_value=0)
    cohen_kappa = AgreementEstimate()


class GraderSummary(serializers.Serializer):
    grader = serializers.CharField()
    grades = serializers.IntegerField(min_value=0)
    median_seconds = serializers.FloatField(allow_null=True)
    gold_accuracy = GoldAccuracy(allow_null=True)
    label_agreement = GoldAccuracy(allow_null=True, help_text="Accuracy against the final labels.")


class ClaimAgreement(serializers.Serializer):
    claims_graded = serializers.IntegerField(min_value=0, help_text="Claims of regular items with a grade.")
    claims_multiply_graded = serializers.IntegerField(min_value=0)
    answers = serializers.IntegerField(min_value=0, help_text="Answers those multiply graded claims belong to.")
    fleiss_kappa = AgreementEstimate(
        allow_null=True, help_text="Over claims; the interval is a cluster bootstrap over answers."
    )
    prevalence = serializers.DictField(child=serializers.FloatField(), allow_null=True)


class Agreement(serializers.Serializer):
    route = serializers.SlugField()
    confidence = serializers.FloatField()
    items_graded = serializers.IntegerField(min_value=0)
    items_multiply_graded = serializers.IntegerField(min_value=0)
    min_items = serializers.IntegerField(min_value=0)
    fleiss_kappa = AgreementEstimate(allow_null=True)
    gwet_ac1 = AgreementEstimate(allow_null=True)
    prevalence = serializers.DictField(child=serializers.FloatField(), allow_null=True)
    extreme_prevalence = serializers.BooleanField()
    pairs = GraderPair(many=True)
    graders = GraderSummary(many=True)
    claims = ClaimAgreement(required=False, help_text="Long routes only: agreement claim by claim.")


AGREEMENT_CONFIDENCE = OpenApiParameter(
    "confidence",
    {"type": "number", "minimum": 0.5, "exclusiveMaximum": True, "maximum": 1},
    description="Confidence level of the intervals, in [0.5, 1); default 0.95.",
)
ROUTE_FILTER = OpenApiParameter(
    "route",
    {"type": "string", "pattern": r"^([-a-zA-Z0-9_]{1,64})?$"},
    description="Only this route's items; empty: every route you review.",
)
