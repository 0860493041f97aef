"""The statistics documents as the OpenAPI schema states them: operating points, certified cutoff
and calibration (docs/statistics.md defines every figure). The views return the stored JSON text
as it is; these serializers describe it, and the contract test holds the two together."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from console.analysis.params import INTERVAL_METHODS, MAX_BINS, MAX_CUTOFFS, MAX_GRID
from console.core.openapi import empty_is_absent
from console.core.params import PAIR_KEY, PAIR_VALUE_SCHEMA


class Estimate(serializers.Serializer):
    """An estimate with its interval at the document's confidence."""

    value = serializers.FloatField(allow_null=True, help_text="null inside an exchange_rate: unbounded.")
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True, help_text="null inside an exchange_rate: unbounded.")


class Band(serializers.Serializer):
    lower = serializers.FloatField(allow_null=True, help_text="The previous row's cutoff; null below the first.")
    upper = serializers.FloatField()
    graded = serializers.IntegerField(min_value=0)
    correct = serializers.IntegerField(min_value=0)
    wrong = serializers.IntegerField(min_value=0)


class Filters(serializers.Serializer):
    from_ = serializers.DateField(allow_null=True)
    to = serializers.DateField(allow_null=True)
    versions = serializers.DictField(child=serializers.CharField())
    segments = serializers.DictField(child=serializers.CharField())

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields


class LabelCounts(serializers.Serializer):
    imported = serializers.IntegerField(min_value=0, help_text="Final labels imported from an existing graded set.")
    blind = serializers.IntegerField(min_value=0, help_text="Final labels from the console's blind grading.")
    imported_sources = serializers.ListField(child=serializers.CharField())
    by_method = serializers.DictField(child=serializers.IntegerField(min_value=0))


class _Document(serializers.Serializer):
    route = serializers.SlugField()
    filters = Filters()
    labels = LabelCounts()
    computed_at = serializers.DateTimeField(required=False)
    data_version = serializers.CharField(required=False, help_text="The data the document was computed from.")


class OperatingPointRow(serializers.Serializer):
    cutoff = serializers.FloatField(allow_null=True, help_text="null: the no-gate row, always first.")
    refused = serializers.IntegerField(min_value=0)
    served = serializers.IntegerField(min_value=0)
    abstention_rate = Estimate()
    false_abstention_rate = Estimate(allow_null=True)
    graded_refused = serializers.IntegerField(min_value=0)
    graded_served = serializers.IntegerField(min_value=0)
    correct_withheld_per_1000 = Estimate(allow_null=True)
    wrong_served_per_1000 = Estimate(allow_null=True)
    exchange_rate = Estimate(allow_null=True, help_text="vs the previous row; null on the no-gate row.")
    band = Band(allow_null=True)
    # Long routes only (docs/statistics.md, "Long answers"): over graded served answers.
    graded_served_verifiable = serializers.IntegerField(
        min_value=0,
        required=False,
        help_text="Long routes: graded served answers with at least one verifiable claim, the answers "
        "E[S] and Pr(S = 1) are read over.",
    )
    expected_support = Estimate(required=False, help_text="Long routes: E[S], the mean support fraction.")
    p_fully_supported = Estimate(required=False, help_text="Long routes: Pr(S = 1), every claim supported.")
    p_support_at_least = Estimate(required=False, help_text="Long routes whose harm model names s0: Pr(S >= s0).")
    claim_support_rate = Estimate(required=False, help_text="Long routes: supported claims per verifiable claim.")
    unsupported_claims_per_1000 = Estimate(
        required=False, help_text="Long routes: unsupported claims served per 1,000 decisions."
    )
    functional_false_abstention_rate = Estimate(
        required=False, allow_null=True, help_text="Long routes: the false-abstention rate under `functional`."
    )
    utility_per_1000 = Estimate(
        required=False,
        allow_null=True,
        help_text="Long routes: value per 1,000 decisions under the harm model at `costs` (refusals cost c_a).",
    )


class ClaimCountRow(serializers.Serializer):
    claims = serializers.IntegerField(min_value=1, help_text="n, verifiable claims per answer.")
    answers = serializers.IntegerField(min_value=0)
    p_fully_supported = Estimate()
    claim_support_rate = Estimate()
    independence = serializers.FloatField(allow_null=True, help_text="claim_support_rate ** n.")
    frechet_low = serializers.FloatField(allow_null=True)
    frechet_high = serializers.FloatField(allow_null=True)
    support_needed = serializers.FloatField(allow_null=True, help_text="tau ** (1/n).")


class LongCosts(serializers.Serializer):
    c_w = serializers.FloatField()
    c_a = serializers.FloatField()
    tau = serializers.FloatField(allow_null=True)


class PrecisionRecall(serializers.Serializer):
    answers_with_k = serializers.IntegerField(min_value=0)
    precision = serializers.FloatField(allow_null=True)
    recall = serializers.FloatField(allow_null=True)
    f1 = serializers.FloatField(allow_null=True)


class OperatingPoints(_Document):
    population = serializers.IntegerField(min_value=0)
    graded = serializers.IntegerField(min_value=0)
    confidence = serializers.FloatField()
    interval = serializers.ChoiceField(choices=list(INTERVAL_METHODS))
    exchange_rate_interval = serializers.CharField()
    tie_policy = serializers.CharField()
    estimator = serializers.CharField(help_text="proportion, or hajek when inclusion probabilities differ.")
    rows = OperatingPointRow(many=True)
    # Long routes only.
    answer_form = serializers.CharField(required=False, help_text="long: the route's answers are graded by claim.")
    harm_model = serializers.CharField(required=False)
    functional = serializers.CharField(required=False, help_text="What the functional columns read.")
    declared_functional = serializers.CharField(
        required=False, help_text="The route's gate functional; empty: unspecified."
    )
    functional_mismatch = serializers.BooleanField(required=False)
    support_threshold = serializers.FloatField(required=False, allow_null=True)
    long_interval = serializers.CharField(required=False)
    costs = LongCosts(required=False)
    expected_claims = serializers.IntegerField(required=False, allow_null=True)
    full_support_by_claims = ClaimCountRow(many=True, required=False)
    precision_recall = PrecisionRecall(required=False)


class CertificationStep(serializers.Serializer):
    cutoff = serializers.FloatField()
    graded_served = serializers.IntegerField(min_value=0)
    wrong_served = serializers.IntegerField(min_value=0)
    outcome = serializers.CharField(help_text="certified, failed or skipped_small_sample.")
    p_value = serializers.FloatField(allow_null=True)
    upper_bound = serializers.FloatField(allow_null=True)


class CertifiedCutoff(_Document):
    certified = serializers.BooleanField()
    cutoff = serializers.FloatField(allow_null=True)
    upper_bound = serializers.FloatField(allow_null=True)
    graded_served = serializers.IntegerField(allow_null=True)
    wrong_served = serializers.IntegerField(allow_null=True)
    alpha = serializers.FloatField()
    delta = serializers.FloatField()
    n_start = serializers.IntegerField(help_text="The smallest graded served count that may certify.")
    risk = serializers.CharField()
    interval = serializers.CharField()
    reason_code = serializers.CharField(allow_null=True, help_text="Why nothing is certified; null when certified.")
    reason = serializers.CharField(allow_null=True)
    steps = CertificationStep(many=True)
    confidence = serializers.FloatField()
    tie_policy = serializers.CharField()
    statement = serializers.CharField(help_text="What is certified, in the words shown to the owner.")
    versions = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))


class CalibrationBin(serializers.Serializer):
    low = serializers.FloatField()
    high = serializers.FloatField()
    count = serializers.IntegerField(min_value=0)
    mean_score = serializers.FloatField(allow_null=True)
    accuracy = serializers.FloatField(allow_null=True)


class RiskCoveragePoint(serializers.Serializer):
    cutoff = serializers.FloatField()
    coverage = serializers.FloatField()
    risk = serializers.FloatField(allow_null=True)


class _CalibrationFigures(serializers.Serializer):
    n = serializers.IntegerField(min_value=0)
    auroc = serializers.FloatField(allow_null=True)
    ece = serializers.FloatField(allow_null=True)
    brier = serializers.FloatField(allow_null=True)
    reliability = serializers.FloatField(allow_null=True)
    resolution = serializers.FloatField(allow_null=True)
    uncertainty = serializers.FloatField(allow_null=True)
    within_bin_variance = serializers.FloatField(allow_null=True)
    within_bin_covariance = serializers.FloatField(allow_null=True)
    bins = CalibrationBin(many=True)
    risk_coverage = RiskCoveragePoint(many=True)
    aurc = serializers.FloatField(allow_null=True)


class CalibrationSegment(_CalibrationFigures):
    value = serializers.CharField(help_text="The segment's or version's value.")


class Calibration(_Document, _CalibrationFigures):
    binning = serializers.CharField()
    tie_policy = serializers.CharField()
    weighted = serializers.BooleanField()
    note = serializers.CharField(required=False)
    by = serializers.CharField(required=False, help_text="With ?by=: the key the report is split by.")
    segments = CalibrationSegment(many=True, required=False, help_text="With ?by=: one report per value.")
    long_answers = serializers.DictField(
        required=False,
        help_text="Long routes: the score as a forecast of E[S] (reliability against S), Pr(S = 1) and Pr(S >= s0) "
        '(Brier and its decomposition); docs/statistics.md, "Calibration per functional".',
    )


# A day, or empty for none (as the pages' forms send an unset field).
_DAY = {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "maxLength": 0}]}
# The query parameters every statistics document takes to narrow its window.
FILTERS = [
    OpenApiParameter("from", _DAY, description="First day of the window (UTC, inclusive); empty: no bound."),
    OpenApiParameter(
        "to", _DAY, description="Last day of the window (UTC, inclusive), not before `from`; empty: no bound."
    ),
    OpenApiParameter(
        "version.model",
        PAIR_VALUE_SCHEMA,
        description="Keep decisions with this model version; any version.<key> works the same way (retriever, "
        "corpus, gate, ...): a key of letters, digits, `_` or `-` (at most 64), a value of 1 to 200 characters.",
    ),
    OpenApiParameter(
        "segment.language",
        PAIR_VALUE_SCHEMA,
        description="Keep decisions with this segment value; any segment.<key> works the same way "
        "(query_type, source, ...).",
    ),
]
# A finite number the reader takes (at most 1e12 in size, so at most 12 digits before the point).
_NUMBER = r"\s*[-+]?(\d{1,12}(\.\d*)?|\.\d+)([eE]-\d{1,2})?\s*"
CUTOFFS = OpenApiParameter(
    "cutoffs",
    {"type": "string", "pattern": rf"^{_NUMBER}(,{_NUMBER}){{0,{MAX_CUTOFFS - 1}}}$"},
    description=f"Comma-separated, 1 to {MAX_CUTOFFS} distinct finite numbers (at most 1e12 in size). "
    "Default 0.5,0.7,0.85,0.9,0.95.",
)
CONFIDENCE = OpenApiParameter(
    "confidence",
    {"type": "number", "exclusiveMinimum": True, "minimum": 0, "exclusiveMaximum": True, "maximum": 1},
    description="Two-sided confidence level, strictly between 0 and 1; default 0.95.",
)
INTERVAL = OpenApiParameter(
    "interval", str, enum=list(INTERVAL_METHODS), description="Interval method, default wilson."
)
C_W = OpenApiParameter(
    "c_w",
    {"type": "number", "minimum": 0, "maximum": 1e6},
    description="Cost of a wrong answer for a long route's utility column, default 20.",
)
C_A = OpenApiParameter(
    "c_a",
    {"type": "number", "minimum": 0, "maximum": 1e6},
    description="Cost of a refusal for a long route's utility column, default 0.5.",
)
ALPHA = OpenApiParameter(
    "alpha",
    {"type": "number", "minimum": 0.001, "maximum": 0.999},
    description="Risk level to certify, default 0.1.",
)
DELTA = OpenApiParameter(
    "delta", {"type": "number", "minimum": 0.0001, "maximum": 0.5}, description="Error probability, default 0.05."
)
_GRID_PART = rf"{_NUMBER}(:{_NUMBER}:{_NUMBER})?"
GRID = OpenApiParameter(
    "grid",
    {"type": "string", "pattern": rf"^{_GRID_PART}(,{_GRID_PART})*$"},
    description=(
        f"Cutoffs to scan, comma-separated: numbers and start:stop:step ranges (stop included when on the step), "
        f"up to {MAX_GRID} in all, no repeats. Default 0:0.99:0.01 (0.00, 0.01, ..., 0.99); e.g. 0.5:0.99:0.01 "
        "or 0:0.5:0.1,0.95. A range is computed in decimal, so 0.5:0.99:0.01 gives exactly the cutoffs "
        "0.5,0.51,...,0.99 would."
    ),
)
BINS = OpenApiParameter(
    "bins", {"type": "integer", "minimum": 1, "maximum": MAX_BINS}, description="Equal-width bins on [0, 1]."
)
POINTS = OpenApiParameter(
    "points",
    {"type": "integer", "minimum": 2, "maximum": 100_000},
    description="Thin the risk-coverage curve to at most this many points; AURC always uses every distinct score.",
)
BY = OpenApiParameter(
    "by",
    {"type": "string", "pattern": "^((segment|version)\\." + PAIR_KEY.pattern.strip("^$") + ")?$"},
    description="segment.<key> or version.<key>: one report per value, under `segments`; empty: one report.",
)
# The statistics readers take each of these sent empty as absent (its default), as the page's form sends it.
for _parameter in (CONFIDENCE, INTERVAL, C_W, C_A, ALPHA, DELTA, BINS, POINTS):
    empty_is_absent(_parameter)
