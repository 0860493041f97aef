"""API v1: start a candidate gate trial and read it (README "Candidate gate trials").

Reviewers and policy owners of the route only: graders get 403, a route or trial the user may not
see 404.
"""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import Actor
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.openapi import link, links
from console.trials import schemas, selectors, services
from console.trials.validation import trial_spec

_ERRORS = {400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR}


class GateTrialStartApi(APIView):
    @extend_schema(
        summary="Start a candidate gate trial",
        extensions=links(
            {
                202: {
                    "FollowTheTrial": link(
                        "/api/v1/gate-trials/{trial_id}", parameters={"trial_id": "$response.body#/id"}
                    )
                }
            }
        ),
        description="Runs the candidate over the route's graded items; read its progress and result at "
        "GET /api/v1/gate-trials/{id}. Reviewers and policy owners of the route.",
        request=schemas.TrialStart,
        responses={202: schemas.TrialStarted, **_ERRORS},
        examples=[
            OpenApiExample(
                "An HTTP candidate",
                request_only=True,
                value={
                    "name": "nli-5",
                    "url": "https://gates.example.org/nli-5",
                    "timeout_s": 10,
                    "repeats": 3,
                    "gates": {"max_unsafe_upper": 0.05, "min_coverage": None, "min_stability": 0.9},
                },
            ),
            OpenApiExample("Started", response_only=True, status_codes=["202"], value={"id": 7}),
        ],
    )
    def post(self, request: Request, slug: str) -> Response:
        route = selectors.route_for_trials(request.user, slug)
        spec = trial_spec(request.data)
        trial = services.trial_start(actor=Actor.user(request.user), user=request.user, route=route, spec=spec)
        return Response({"id": trial.pk}, status=202)


class GateTrialApi(APIView):
    @extend_schema(
        summary="A candidate gate trial: progress, figures beside the current gate, promotion gates",
        responses={200: schemas.Trial, **_ERRORS},
        examples=[
            OpenApiExample(
                "Running",
                response_only=True,
                value={
                    "id": 7,
                    "route": "it-support",
                    "candidate_name": "nli-5",
                    "status": "running",
                    "error": None,
                    "items": 120,
                    "repeats": 3,
                    "calls": {"made": 210, "errors": 2, "total": 360},
                    "candidate": None,
                    "current": None,
                    "mcnemar": None,
                    "gates": [],
                    "passed": None,
                    "created_at": "2026-11-06T09:00:00+00:00",
                },
            )
        ],
    )
    def get(self, request: Request, trial_id: int) -> Response:
        return Response(selectors.trial_as_dict(selectors.get_trial_for_user(request.user, trial_id)))
