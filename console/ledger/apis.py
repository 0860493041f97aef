from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import Actor
from console.accounts import permissions
from console.accounts.hooks import route_fields, with_route_fields
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.batches import batch_records, raise_batch_invalid
from console.core.errors import Forbidden
from console.ledger import selectors, services
from console.ledger.validation import validate_batch


class DecisionIngestApi(APIView):
    """Store a batch of gated decisions (served and refused) atomically."""

    # Reports a lone surrogate as its own field error (console/core/parsers.py).
    reports_lone_surrogates = True

    class InputSerializer(serializers.Serializer):
        decisions = serializers.ListField(child=serializers.JSONField(), max_length=1000)

    class OutputSerializer(serializers.Serializer):
        created = serializers.IntegerField()
        unchanged = serializers.IntegerField()

    @extend_schema(
        request=InputSerializer,
        responses={201: OutputSerializer, 400: ERROR, 401: ERROR, 403: ERROR, 409: ERROR, 413: ERROR},
        summary="Ingest decisions",
    )
    def post(self, request: Request) -> Response:
        if not permissions.can_ingest(request.user, None):
            raise Forbidden("Your role may not ingest decisions.")
        records = batch_records(request.data, "decisions")
        items, errors = validate_batch(records)
        # A route the token may not ingest into is reported as unknown, word for word, so a token
        # cannot learn which other routes exist.
        routes, route_errors = services.routes_for_items(
            items, usable=lambda route: permissions.can_ingest(request.user, route)
        )
        if errors or route_errors:
            raise_batch_invalid(
                total=len(records),
                records_noun="decisions",
                errors=errors,
                unknown=route_errors,
                unknown_code="unknown_route",
                unknown_noun="route(s)",
            )
        result = services.decision_ingest(actor=Actor.from_request(request), items=items, routes=routes)
        return Response({"created": result.created, "unchanged": result.unchanged}, status=201)


class RouteListApi(APIView):
    @extend_schema(responses={200: OpenApiResponse(description="Routes the caller may read")}, summary="List routes")
    def get(self, request: Request) -> Response:
        if not permissions.can_read_decisions(request.user):
            raise Forbidden("Your role does not allow reading routes.")
        # The apps above add their fields of a route (grading: graders_per_item) through accounts' hook.
        fields = route_fields()
        routes = with_route_fields(selectors.readable_routes(request.user))
        return Response(
            {
                "routes": [
                    {"slug": r.slug, "name": r.name, **{f.name: getattr(r, f.name) for f in fields}} for r in routes
                ]
            }
        )
