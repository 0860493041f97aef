"""API v1: operating points, certified cutoff and calibration of a route (README "API").

Each view checks access (graders 403, unknown or unreadable route 404), parses its parameters
(400 naming every bad one) and returns the stored or freshly computed document.
"""

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.views import APIView

from console.analysis import params, reports, selectors
from console.core.api import ERROR_SCHEMA as ERROR

_FILTERS = [
    OpenApiParameter("from", OpenApiTypes.DATE, description="First day of the window (UTC, inclusive)."),
    OpenApiParameter("to", OpenApiTypes.DATE, description="Last day of the window (UTC, inclusive)."),
    OpenApiParameter(
        "version.model",
        str,
        description="Keep decisions with this model version; any "
        "version.<key> works the same way (retriever, corpus, gate, ...).",
    ),
    OpenApiParameter(
        "segment.language",
        str,
        description="Keep decisions with this segment value; any "
        "segment.<key> works the same way (query_type, source, ...).",
    ),
]
_ERRORS = {400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR}


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
        parameters=[
            OpenApiParameter(
                "cutoffs", str, description="Comma-separated, 1 to 50 distinct numbers. Default 0.5,0.7,0.85,0.9,0.95."
            ),
            OpenApiParameter("confidence", float, description="Two-sided confidence level, default 0.95."),
            OpenApiParameter(
                "interval",
                str,
                enum=["wilson", "clopper_pearson", "jeffreys", "agresti_coull"],
                description="Interval method, default wilson.",
            ),
            *_FILTERS,
        ],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="The table"), **_ERRORS},
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
        parameters=[
            OpenApiParameter("alpha", float, description="Risk level to certify, default 0.1 (0.001 to 0.999)."),
            OpenApiParameter("delta", float, description="Error probability, default 0.05 (0.0001 to 0.5)."),
            OpenApiParameter(
                "grid",
                str,
                description=(
                    "Cutoffs to scan, comma-separated: numbers and start:stop:step ranges (stop included when "
                    "on the step), up to 1001 in all, no repeats. Default 0:0.99:0.01 (0.00, 0.01, ..., 0.99); "
                    "e.g. 0.5:0.99:0.01 or 0:0.5:0.1,0.95. A range is computed in decimal, so 0.5:0.99:0.01 "
                    "gives exactly the cutoffs 0.5,0.51,...,0.99 would."
                ),
            ),
            *_FILTERS,
        ],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="The certification"), **_ERRORS},
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
        parameters=[
            OpenApiParameter("bins", int, description="Equal-width bins on [0, 1], 1 to 100, default 10."),
            OpenApiParameter("by", str, description="segment.<key> or version.<key>: one report per value."),
            OpenApiParameter(
                "points",
                int,
                description="Thin the risk-coverage curve to at most this many "
                "points (2 to 100,000); AURC always uses every distinct score.",
            ),
            *_FILTERS,
        ],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="The calibration report"), **_ERRORS},
    )
    def get(self, request: Request, slug: str) -> HttpResponse:
        route = selectors.route_for_reader(request.user, slug)
        query = params.calibration_query(request.query_params)
        return _json(reports.calibration_report_for(route, query))
