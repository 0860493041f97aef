"""API v1: operating points, certified cutoff and calibration of a route (README "API").

Each view checks access (graders 403, unknown or unreadable route 404), parses its parameters
(400 naming every bad one) and returns the stored or freshly computed document.
"""

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.views import APIView

from console.analysis import params, reports, schemas, selectors
from console.core.api import ERROR_SCHEMA as ERROR

_ERRORS = {400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR}
_COMMON = {
    "route": "it-support",
    "filters": {"from": None, "to": None, "versions": {}, "segments": {}},
    "labels": {"imported": 0, "blind": 800, "imported_sources": [], "by_method": {"unanimous": 800}},
    "computed_at": "2026-11-02T08:00:00+00:00",
    "data_version": "d12000.a4711.l800",
}
_EXAMPLE_OPERATING_POINTS = OpenApiExample(
    "A table",
    response_only=True,
    value={
        **_COMMON,
        "population": 12000,
        "graded": 800,
        "confidence": 0.95,
        "interval": "wilson",
        "exchange_rate_interval": "clopper_pearson",
        "tie_policy": "serve_if_score_gte_cutoff",
        "estimator": "proportion",
        "rows": [
            {
                "cutoff": None,
                "refused": 0,
                "served": 12000,
                "abstention_rate": {"value": 0.0, "low": 0.0, "high": 0.0003},
                "false_abstention_rate": None,
                "graded_refused": 0,
                "graded_served": 800,
                "correct_withheld_per_1000": {"value": 0.0, "low": 0.0, "high": 0.0},
                "wrong_served_per_1000": {"value": 290.0, "low": 262.1, "high": 319.7},
                "exchange_rate": None,
                "band": None,
            }
        ],
    },
)
_EXAMPLE_CERTIFIED = OpenApiExample(
    "Certified",
    response_only=True,
    value={
        **_COMMON,
        "certified": True,
        "cutoff": 0.8,
        "upper_bound": 0.093,
        "graded_served": 412,
        "wrong_served": 27,
        "alpha": 0.1,
        "delta": 0.05,
        "n_start": 76,
        "risk": "wrong-answer rate among served answers",
        "interval": "clopper_pearson_one_sided",
        "reason_code": None,
        "reason": None,
        "steps": [
            {
                "cutoff": 0.8,
                "graded_served": 412,
                "wrong_served": 27,
                "outcome": "certified",
                "p_value": 0.01,
                "upper_bound": 0.093,
            }
        ],
        "confidence": 0.95,
        "tie_policy": "serve_if_score_gte_cutoff",
        "statement": "At cutoff 0.8 the wrong-answer rate among served answers is at most 0.093 with 95% confidence.",
        "versions": {"model": ["gen-2026-10"]},
    },
)
_EXAMPLE_CALIBRATION = OpenApiExample(
    "Two bins",
    response_only=True,
    value={
        **_COMMON,
        "n": 100,
        "auroc": 0.81,
        "ece": 0.05,
        "brier": 0.16,
        "reliability": 0.01,
        "resolution": 0.07,
        "uncertainty": 0.22,
        "within_bin_variance": 0.01,
        "within_bin_covariance": 0.0,
        "bins": [
            {"low": 0.0, "high": 0.5, "count": 50, "mean_score": 0.25, "accuracy": 0.3},
            {"low": 0.5, "high": 1.0, "count": 50, "mean_score": 0.75, "accuracy": 0.8},
        ],
        "risk_coverage": [
            {"cutoff": 0.5, "coverage": 0.5, "risk": 0.2},
            {"cutoff": 0.0, "coverage": 1.0, "risk": 0.45},
        ],
        "aurc": 0.28,
        "binning": "equal-width bins on [0, 1], left-closed, the last bin also closed",
        "tie_policy": "serve_if_score_gte_cutoff",
        "weighted": False,
    },
)


def _json(document: reports.Document) -> HttpResponse:
    """The stored JSON as it is: no parse and re-encode of a document that can hold 20,000 points."""
    return HttpResponse(document.text, content_type="application/json")


class OperatingPointsApi(APIView):
    @extend_schema(
        summary="Operating-point table with intervals",
        description="The no-gate row, then one row per cutoff (ascending). Tie policy: served when "
        "score >= cutoff. Population counts are exact on the window; shares among the graded "
        "are Hájek-weighted when inclusion probabilities differ. In an exchange_rate, a null "
        "high (or value) means unbounded: the band has no wrong answer.",
        parameters=[schemas.CUTOFFS, schemas.CONFIDENCE, schemas.INTERVAL, schemas.C_W, schemas.C_A, *schemas.FILTERS],
        responses={200: schemas.OperatingPoints, **_ERRORS},
        examples=[_EXAMPLE_OPERATING_POINTS],
    )
    def get(self, request: Request, slug: str) -> HttpResponse:
        route = selectors.route_for_reader(request.user, slug)
        query = params.operating_points_query(request.query_params)
        return _json(reports.operating_points_report(route, query))


class CertifiedCutoffApi(APIView):
    @extend_schema(
        summary="Certified cutoff (fixed-sequence Clopper–Pearson)",
        description="Scans the grid from high to low, skips cutoffs with fewer than n_start graded served "
        "answers, certifies while P(Bin(n, alpha) <= wrong) <= delta and stops at the first "
        "failure. Risk: wrong-answer rate among served answers. Needs a uniform graded sample.",
        parameters=[schemas.ALPHA, schemas.DELTA, schemas.GRID, *schemas.FILTERS],
        responses={200: schemas.CertifiedCutoff, **_ERRORS},
        examples=[_EXAMPLE_CERTIFIED],
    )
    def get(self, request: Request, slug: str) -> HttpResponse:
        route = selectors.route_for_reader(request.user, slug)
        query = params.certified_cutoff_query(request.query_params)
        return _json(reports.certified_cutoff_report(route, query))


class CalibrationApi(APIView):
    @extend_schema(
        summary="Calibration and failure prediction of the gate score",
        description="AUROC (ties 1/2), ECE over equal-width bins, Brier with Murphy's decomposition "
        "(plus within-bin terms), the risk-coverage curve over distinct scores and its AURC.",
        parameters=[schemas.BINS, schemas.BY, schemas.POINTS, *schemas.FILTERS],
        responses={200: schemas.Calibration, **_ERRORS},
        examples=[_EXAMPLE_CALIBRATION],
    )
    def get(self, request: Request, slug: str) -> HttpResponse:
        route = selectors.route_for_reader(request.user, slug)
        query = params.calibration_query(request.query_params)
        return _json(reports.calibration_report_for(route, query))
