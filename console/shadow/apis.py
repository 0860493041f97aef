from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import Actor
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.parsers import body_checked
from console.shadow import selectors, services

_SHADOW_RUN = inline_serializer(
    "ShadowRun",
    {
        "id": serializers.IntegerField(),
        "pipeline": serializers.CharField(),
        "pipeline_version": serializers.CharField(),
        "status": serializers.CharField(),
        "attempts": serializers.IntegerField(),
        "error": serializers.CharField(),
        "answer": serializers.CharField(allow_null=True),
        "passages_sha256": serializers.CharField(allow_null=True),
        "latency_ms": serializers.FloatField(allow_null=True),
    },
)


class ShadowRunRetryApi(APIView):
    """Send a failed shadow run back to its route's pipeline (reviewers and admins; audited)."""

    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = frozenset()

    @extend_schema(
        request=None,
        responses={202: _SHADOW_RUN, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR},
        examples=[
            OpenApiExample(
                "Queued again",
                response_only=True,
                status_codes=["202"],
                value={
                    "id": 9,
                    "pipeline": "http",
                    "pipeline_version": "2026-11",
                    "status": "queued",
                    "attempts": 3,
                    "error": "",
                    "answer": None,
                    "passages_sha256": None,
                    "latency_ms": None,
                },
            )
        ],
        summary="Retry a failed shadow run",
    )
    def post(self, request: Request, run_id: int) -> Response:
        body_checked(request)
        run = selectors.get_shadow_run_for_retry(request.user, run_id)
        run = services.shadow_run_retry(actor=Actor.from_request(request), run=run)
        run.refresh_from_db()
        return Response(selectors.shadow_run_as_dict(run), status=202)
