from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import Actor
from console.accounts import permissions
from console.accounts.models import Role
from console.api_batches import batch_records, raise_batch_invalid
from console.errors import Forbidden
from console.ledger import selectors, services
from console.ledger.validation import validate_batch

_ERROR = inline_serializer("Error", {"error": inline_serializer("ErrorBody", {
    "code": serializers.CharField(), "message": serializers.CharField(), "details": serializers.JSONField(),
})})


class DecisionIngestApi(APIView):
    """Store a batch of gated decisions (served and refused) atomically."""

    class InputSerializer(serializers.Serializer):
        decisions = serializers.ListField(child=serializers.JSONField(), max_length=1000)

    class OutputSerializer(serializers.Serializer):
        created = serializers.IntegerField()
        unchanged = serializers.IntegerField()

    @extend_schema(
        request=InputSerializer,
        responses={201: OutputSerializer, 400: _ERROR, 401: _ERROR, 403: _ERROR, 409: _ERROR, 413: _ERROR},
        summary="Ingest decisions",
    )
    def post(self, request: Request) -> Response:
        records = batch_records(request.data, "decisions")
        items, errors = validate_batch(records)
        routes, route_errors = services.routes_for_items(items)
        if errors or route_errors:
            raise_batch_invalid(total=len(records), records_noun="decisions", errors=errors, unknown=route_errors,
                                unknown_code="unknown_route", unknown_noun="route(s)")
        denied = sorted(slug for slug, route in routes.items()
                        if not permissions.has_role(request.user, [Role.INTEGRATOR], route))
        if denied:
            raise Forbidden(f"Your token may not ingest into route(s): {', '.join(denied)}.")
        result = services.decision_ingest(actor=Actor.from_request(request), items=items, routes=routes)
        return Response({"created": result.created, "unchanged": result.unchanged}, status=201)


_DECISION = inline_serializer("Decision", {"id": serializers.IntegerField(), "route": serializers.CharField(),
                                           "request_id": serializers.CharField(),
                                           "passages": serializers.ListField(child=serializers.JSONField())})


class DecisionDetailApi(APIView):
    @extend_schema(responses={200: _DECISION, 403: _ERROR, 404: _ERROR}, summary="Look up a decision")
    def get(self, request: Request, decision_id: int) -> Response:
        decision = selectors.get_decision_for_user(request.user, pk=decision_id)
        return Response(selectors.decision_as_dict(decision))


class DecisionByRequestApi(APIView):
    @extend_schema(responses={200: _DECISION, 403: _ERROR, 404: _ERROR},
                   summary="Look up a decision by route and request_id")
    def get(self, request: Request, slug: str, request_id: str) -> Response:
        decision = selectors.get_decision_for_user(request.user, route_slug=slug, request_id=request_id)
        return Response(selectors.decision_as_dict(decision))


class RouteListApi(APIView):
    @extend_schema(responses={200: OpenApiResponse(description="Routes the caller may read")},
                   summary="List routes")
    def get(self, request: Request) -> Response:
        if not permissions.can_read_decisions(request.user):
            raise Forbidden("Your role does not allow reading routes.")
        routes = selectors.readable_routes(request.user)
        return Response({"routes": [{"slug": r.slug, "name": r.name, "graders_per_item": r.graders_per_item}
                                    for r in routes]})
