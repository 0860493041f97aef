"""The decision lookup as the OpenAPI schema states it: every key `decision_as_dict` returns."""

from __future__ import annotations

from rest_framework import serializers

from console.ledger.models import GateFunctional
from console.ledger.schemas import SegmentValue
from console.ledger.validation import OUTCOMES


class _Range(serializers.ListField):
    def __init__(self, **kwargs):
        super().__init__(child=serializers.IntegerField(min_value=0), min_length=2, max_length=2, **kwargs)


class DecisionGate(serializers.Serializer):
    name = serializers.CharField()
    score = serializers.FloatField()
    cutoff = serializers.FloatField()
    functional = serializers.ChoiceField(
        choices=GateFunctional.values, required=False, help_text="What the score estimates, as sent; absent: not sent."
    )


class DecisionClaim(serializers.Serializer):
    text = serializers.CharField()
    citations = serializers.ListField(child=serializers.CharField())


class ClaimCheck(serializers.Serializer):
    """One claim of the answer with its span check: the claims as sent, else the claim's units."""

    index = serializers.IntegerField(min_value=0, help_text="The claim's place, from 0 (the labels API's index).")
    text = serializers.CharField()
    citations = serializers.ListField(child=serializers.CharField(), help_text="The passage ids it cites.")
    supported = serializers.BooleanField(
        allow_null=True, help_text="Found word for word in a logged passage; null until verified."
    )
    found_in = serializers.ListField(
        child=serializers.CharField(), help_text="The retriever ids of the passages it was found in, by rank."
    )
    cited_supported = serializers.BooleanField(
        allow_null=True, help_text="Found in a passage it cites; null when it cites none or before verification."
    )


class DecisionPassage(serializers.Serializer):
    passage_id = serializers.IntegerField(help_text="The console's id of the passage (for /verify and disputes).")
    id = serializers.CharField(help_text="The retriever's id, as sent.")
    rank = serializers.IntegerField(min_value=1)
    retrieval_score = serializers.FloatField(allow_null=True)
    text = serializers.CharField(allow_blank=True)
    sha256 = serializers.CharField()
    source = serializers.CharField(allow_blank=True)
    uri = serializers.CharField(allow_blank=True)
    corpus_snapshot = serializers.CharField(allow_blank=True)


class SpanCheck(serializers.Serializer):
    passage_id = serializers.IntegerField()
    unit_index = serializers.IntegerField(min_value=0)
    unit = serializers.CharField(allow_blank=True, help_text="The claim unit searched for.")
    supported = serializers.BooleanField()
    match_ranges = serializers.ListField(child=_Range(), help_text="[start, end) byte offsets into the passage.")
    char_ranges = serializers.ListField(child=_Range(), help_text="[start, end) code-point offsets into the passage.")
    truncated = serializers.BooleanField()
    verifier_version = serializers.CharField(allow_blank=True)


class DecisionSupport(serializers.Serializer):
    status = serializers.CharField()
    units = serializers.IntegerField(min_value=0)
    units_supported = serializers.IntegerField(min_value=0)
    expected_support = serializers.FloatField(allow_null=True)
    fully_supported = serializers.BooleanField()
    no_supporting_passage = serializers.BooleanField()
    verifier_version = serializers.CharField(allow_blank=True)
    error = serializers.CharField(allow_blank=True)
    verified_at = serializers.DateTimeField(allow_null=True)


class DecisionShadowRun(serializers.Serializer):
    id = serializers.IntegerField()
    pipeline = serializers.CharField()
    pipeline_version = serializers.CharField(allow_blank=True)
    status = serializers.CharField(help_text="queued, running, succeeded or failed.")
    attempts = serializers.IntegerField(min_value=0)
    error = serializers.CharField(allow_blank=True)
    answer = serializers.CharField(allow_null=True)
    passages_sha256 = serializers.CharField(allow_null=True)
    latency_ms = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class SignedPolicyInForce(serializers.Serializer):
    id = serializers.IntegerField()
    version = serializers.IntegerField()
    cutoff = serializers.FloatField()
    owner = serializers.CharField()
    signed_at = serializers.DateTimeField()
    gate_followed = serializers.BooleanField(help_text="The decision's logged cutoff was the signed one.")


class DecisionGrade(serializers.Serializer):
    grader = serializers.CharField()
    verdict = serializers.CharField()
    note = serializers.CharField(allow_blank=True)
    seconds_spent = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()


class DecisionFinalLabel(serializers.Serializer):
    verdict = serializers.CharField()
    method = serializers.CharField(help_text="unanimous, majority, adjudicated or imported.")
    source = serializers.CharField(allow_null=True, help_text="The graded set's name, for imported labels.")
    decided_by = serializers.CharField(allow_null=True)
    note = serializers.CharField(allow_blank=True)
    decided_at = serializers.DateTimeField()


class Decision(serializers.Serializer):
    """A decision with everything the console knows of it. `grades`, `final_label` and
    `signed_policy` are left out for a caller who may not read the route's statistics."""

    id = serializers.IntegerField()
    route = serializers.SlugField()
    request_id = serializers.CharField()
    occurred_at = serializers.DateTimeField()
    ingested_at = serializers.DateTimeField()
    question = serializers.CharField()
    claim = serializers.CharField()
    gate = DecisionGate()
    outcome = serializers.ChoiceField(choices=list(OUTCOMES))
    served_answer = serializers.CharField(allow_null=True)
    versions = serializers.DictField(child=serializers.CharField(allow_blank=True))
    segments = serializers.DictField(child=SegmentValue(), help_text="Strings, numbers or booleans.")
    content_hash = serializers.CharField()
    claims = DecisionClaim(many=True, required=False, help_text="A long answer's claims as sent; absent: none sent.")
    expected_claims = serializers.IntegerField(required=False, help_text="K as sent; absent: not sent.")
    passages = DecisionPassage(many=True)
    span_checks = SpanCheck(many=True)
    claim_checks = ClaimCheck(many=True)
    support = DecisionSupport(allow_null=True)
    shadow_run = DecisionShadowRun(allow_null=True)
    signed_policy = SignedPolicyInForce(allow_null=True, required=False)
    grades = DecisionGrade(many=True, required=False)
    final_label = DecisionFinalLabel(allow_null=True, required=False)
