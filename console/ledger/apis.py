from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import Actor
from console.accounts import permissions
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.batches import batch_records, raise_batch_invalid
from console.core.errors import Forbidden
from console.core.openapi import link, links
from console.ledger import selectors, services
from console.ledger.schemas import SAMPLE_RECORD, DecisionBatch, IngestResult, RouteList
from console.ledger.validation import validate_batch


class DecisionIngestApi(APIView):
    """Store a batch of gated decisions (served and refused) atomically."""

    @extend_schema(
        request=DecisionBatch,
        responses={
            201: IngestResult,
            400: OpenApiResponse(ERROR, description="An item is invalid or names an unknown route; nothing written."),
            401: ERROR,
            403: ERROR,
            409: OpenApiResponse(ERROR, description="A request_id already stored with other content; nothing written."),
            413: OpenApiResponse(ERROR, description="More than 1,000 decisions, or a body past the size limit."),
        },
        summary="Ingest decisions",
        extensions=links(
            {
                201: {
                    "LookUpTheFirstDecision": link(
                        "/api/v1/routes/{slug}/decisions/{request_id}",
                        parameters={
                            "slug": "$request.body#/decisions/0/route",
                            "request_id": "$request.body#/decisions/0/request_id",
                        },
                        description="The stored decision, by its route and request_id.",
                    )
                }
            }
        ),
        description="Atomic per batch and idempotent per `(route, request_id)`: a replay of a stored decision "
        "counts as `unchanged`; the same request_id with other content is 409 and nothing is written. "
        "Each created decision can be read at `GET /api/v1/routes/{route}/decisions/{request_id}`.",
        examples=[
            OpenApiExample("One refusal", value={"decisions": [SAMPLE_RECORD]}, request_only=True),
            OpenApiExample("Stored", value={"created": 1, "unchanged": 0}, response_only=True, status_codes=["201"]),
        ],
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
    @extend_schema(
        responses={200: RouteList, 403: ERROR},
        summary="List routes",
        examples=[
            OpenApiExample(
                "Routes",
                value={"routes": [{"slug": "it-support", "name": "IT support", "graders_per_item": 2}]},
                response_only=True,
            )
        ],
    )
    def get(self, request: Request) -> Response:
        if not permissions.can_read_decisions(request.user):
            raise Forbidden("Your role does not allow reading routes.")
        routes = selectors.readable_routes(request.user)
        return Response(
            {"routes": [{"slug": r.slug, "name": r.name, "graders_per_item": r.graders_per_item} for r in routes]}
        )
