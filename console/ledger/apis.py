from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
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
from console.core.openapi import empty_is_absent, link, links
from console.core.paging import MAX_LIMIT, Keyset, page_parameters, page_schema
from console.core.params import PAIR_VALUE_SCHEMA, QueryReader
from console.ledger import selectors, services
from console.ledger.hooks import decision_filters
from console.ledger.models import GateFunctional, Outcome
from console.ledger.schemas import (
    SAMPLE_RECORD,
    AnswerSettings,
    AnswerSettingsOutput,
    DecisionBatch,
    IngestResult,
    RouteSummary,
)
from console.ledger.validation import validate_batch


class DecisionIngestApi(APIView):
    """Store a batch of gated decisions (served and refused) atomically."""

    # Reports a lone surrogate as its own field error (console/core/parsers.py).
    reports_lone_surrogates = True

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


# A day, or empty for none (as the refusals page's form sends an unset field).
_DAY = {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "maxLength": 0}]}
_ROUTE_LIST = page_schema("RouteList", RouteSummary(), also_as="routes")
_ROUTE_EXAMPLE = {"slug": "it-support", "name": "IT support", "graders_per_item": 2}
_ROUTE_PAGES = Keyset("ledger.routes", "slug")


class RouteListApi(APIView):
    @extend_schema(
        responses={200: _ROUTE_LIST, 401: ERROR, 403: ERROR},
        parameters=page_parameters(100),
        summary="List routes",
        examples=[
            OpenApiExample(
                "Routes",
                value={"results": [_ROUTE_EXAMPLE], "next": None, "routes": [_ROUTE_EXAMPLE]},
                response_only=True,
            )
        ],
    )
    def get(self, request: Request) -> Response:
        if not permissions.can_read_decisions(request.user):
            raise Forbidden("Your role does not allow reading routes.")
        # The apps above add their fields of a route (grading: graders_per_item) through accounts' hook.
        fields = route_fields()
        page, next_url = _ROUTE_PAGES.page(request, with_route_fields(selectors.readable_routes(request.user)))
        rows = [{"slug": r.slug, "name": r.name, **{f.name: getattr(r, f.name) for f in fields}} for r in page]
        return Response({"results": rows, "next": next_url, "routes": rows})


class DecisionRecordSerializer(serializers.Serializer):
    """One decision of the list: the lookup's shape without what other apps add (passages, span
    checks, shadow run, grades); `GET /api/v1/decisions/{id}` gives the whole of it."""

    class GateSerializer(serializers.Serializer):
        name = serializers.CharField()
        score = serializers.FloatField()
        cutoff = serializers.FloatField()
        functional = serializers.ChoiceField(
            choices=GateFunctional.values, required=False, help_text="As the decision sent it; absent: not sent."
        )

    class ClaimSerializer(serializers.Serializer):
        text = serializers.CharField()
        citations = serializers.ListField(child=serializers.CharField())

    id = serializers.IntegerField()
    route = serializers.CharField(help_text="The route's slug.")
    request_id = serializers.CharField()
    occurred_at = serializers.DateTimeField()
    ingested_at = serializers.DateTimeField()
    question = serializers.CharField()
    claim = serializers.CharField()
    gate = GateSerializer()
    outcome = serializers.ChoiceField(choices=Outcome.values)
    served_answer = serializers.CharField(allow_null=True)
    versions = serializers.DictField(child=serializers.CharField())
    segments = serializers.DictField(child=serializers.JSONField())
    content_hash = serializers.CharField(help_text="SHA-256 (hex) of the decision as sent; replays compare it.")
    claims = ClaimSerializer(many=True, required=False, help_text="The answer's claims as sent; absent: none sent.")
    expected_claims = serializers.IntegerField(required=False, help_text="K as the decision sent it; absent: not sent.")


class DecisionPageSerializer(serializers.Serializer):
    results = DecisionRecordSerializer(many=True)
    next = serializers.URLField(allow_null=True, help_text="The next page (same filters); null on the last page.")


# The sample record as the list gives it back: stored, with what the console adds, without passages.
_LISTED_EXAMPLE = {
    "id": 1,
    **{key: value for key, value in SAMPLE_RECORD.items() if key != "passages"},
    "ingested_at": "2026-11-01T12:00:01+00:00",
    "content_hash": "5d41402abc4b2a76b9719d911017c592e4a2b1c3d5e6f708192a3b4c5d6e7f80",
}
# Newest first; the id breaks ties of one instant and makes each position unique.
_DECISION_PAGES = Keyset("ledger.decisions", "-occurred_at", "-pk")
_OUTCOME_CHOICES = (*Outcome.values, "any")
_LIST_PARAMETERS = (
    "outcome",
    "score_min",
    "score_max",
    "from",
    "to",
    "q",
    "no_supporting_passage",
    "limit",
    "cursor",
)


def _list_filters(reader: QueryReader, route_slug: str) -> selectors.DecisionFilters:
    """The refusals page's filters from the API's parameters (every bad one reported together)."""
    named = tuple(hook.name for hook in decision_filters())
    reader.refuse_unknown((*_LIST_PARAMETERS, *named), ("version.", "segment."))
    outcome = reader.choice("outcome", "any", _OUTCOME_CHOICES)
    score_min = reader.number("score_min", None, -1e12, 1e12, closed=True)
    score_max = reader.number("score_max", None, -1e12, 1e12, closed=True)
    if score_min is not None and score_max is not None and score_min > score_max:
        reader.error("score_min", f"({score_min:g}) is above score_max ({score_max:g}).")
    date_from, date_to = reader.day("from"), reader.day("to")
    if date_from and date_to and date_from > date_to:
        reader.error("from", f"({date_from}) is after to ({date_to}).")
    return selectors.DecisionFilters(
        route=route_slug,
        outcome=None if outcome == "any" else outcome,
        score_min=score_min,
        score_max=score_max,
        date_from=date_from,
        date_to=date_to,
        versions=dict(reader.pairs("version.")) or None,
        segments=dict(reader.pairs("segment.")) or None,
        text=reader.text("q", max_length=200),
        no_supporting_passage=reader.flag("no_supporting_passage"),
        extra=tuple(name for name in named if reader.flag(name)),
    )


class RouteDecisionListApi(APIView):
    @extend_schema(
        operation_id="v1_routes_decisions_list",
        summary="List a route's decisions, newest first",
        description="The refusals page's filters over every decision of the route (all outcomes unless "
        "`outcome` says otherwise), paged by cursor: follow `next` until it is null. Unknown and bad "
        "parameters are a 400 naming each. A route the caller may not read answers 404 as an unknown "
        "one does; a role that reads no decisions (grader) gets 403.",
        parameters=[
            # Sent empty, each of these reads as absent, as the refusals page's form sends it.
            empty_is_absent(
                OpenApiParameter("outcome", str, enum=list(_OUTCOME_CHOICES), description="Default `any`.")
            ),
            empty_is_absent(OpenApiParameter("score_min", float, description="Gate score at least this.")),
            empty_is_absent(OpenApiParameter("score_max", float, description="Gate score at most this.")),
            OpenApiParameter("from", _DAY, description="First day (UTC, inclusive); empty: no bound."),
            OpenApiParameter("to", _DAY, description="Last day (UTC, inclusive); empty: no bound."),
            OpenApiParameter(
                "q", str, description='Words in the question or claim: "a phrase", or, -word (at most 200 characters).'
            ),
            empty_is_absent(
                OpenApiParameter(
                    "no_supporting_passage",
                    bool,
                    description="Only decisions whose claim no logged passage supports (verified). The page's "
                    "other named filters work the same way: `disputed=true`, `shadow_failed=true`, "
                    "`not_following_policy=true`.",
                )
            ),
            OpenApiParameter(
                "version.model",
                PAIR_VALUE_SCHEMA,
                description="Keep decisions with this model version; any version.<key> works the same way.",
            ),
            OpenApiParameter(
                "segment.language",
                PAIR_VALUE_SCHEMA,
                description="Keep decisions with this segment value; any segment.<key> works the same way.",
            ),
            *page_parameters(100),
        ],
        responses={200: DecisionPageSerializer, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 429: ERROR},
        examples=[
            OpenApiExample(
                "A page of refusals",
                response_only=True,
                value={
                    "results": [_LISTED_EXAMPLE],
                    "next": "https://console.example/api/v1/routes/it-support/decisions?outcome=refused&cursor=WzFd.sig",
                },
            )
        ],
    )
    def get(self, request: Request, slug: str) -> Response:
        route = permissions.route_for(
            request.user,
            slug,
            allowed=permissions.can_read_decisions,
            refused="Your role does not allow reading decisions.",
        )
        reader = QueryReader(request.query_params)
        filters = _list_filters(reader, route.slug)
        limit = reader.integer("limit", 100, 1, MAX_LIMIT)
        reader.finish()
        rows, next_url = _DECISION_PAGES.page(request, selectors.route_decisions(request.user, filters), limit=limit)
        return Response({"results": [selectors.decision_record(d) for d in rows], "next": next_url})


_SETTINGS_EXAMPLE = {
    "route": "it-support",
    "answer_form": "long",
    "harm_model": "all_or_nothing",
    "support_threshold": None,
    "expected_claims": 12,
    "gate_functional": "p_fully_supported",
}


def _answer_settings_response(route) -> Response:
    return Response({"route": route.slug, **services.answer_settings_dict(selectors.answer_settings(route))})


class RouteAnswerSettingsApi(APIView):
    """How a route's answers are judged: one verdict each or claim by claim, the harm model, and
    what its gate's score estimates."""

    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = frozenset(services.ANSWER_SETTINGS)

    @extend_schema(
        operation_id="v1_routes_settings_retrieve",
        responses={200: AnswerSettingsOutput, 401: ERROR, 403: ERROR, 404: ERROR},
        summary="A route's answer settings",
        examples=[OpenApiExample("Long answers", value=_SETTINGS_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, slug: str) -> Response:
        route = permissions.route_for(
            request.user,
            slug,
            allowed=permissions.can_read_stats,
            refused="Your role does not allow reading a route's settings.",
        )
        return _answer_settings_response(route)

    @extend_schema(
        operation_id="v1_routes_settings_partial_update",
        request=AnswerSettings,
        responses={200: AnswerSettingsOutput, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR},
        summary="Change a route's answer settings",
        description="Admins and the route's policy owners. Absent fields stay as they are; the settings must "
        "hold together afterwards (`at_least` needs `support_threshold`). Audited as one "
        "`route_answer_settings_changed` event with each changed field's old and new value.",
        examples=[
            OpenApiExample(
                "Long answers, all-or-nothing harm",
                value={"answer_form": "long", "harm_model": "all_or_nothing", "gate_functional": "p_fully_supported"},
                request_only=True,
            ),
            OpenApiExample("Changed", value=_SETTINGS_EXAMPLE, response_only=True, status_codes=["200"]),
        ],
    )
    def patch(self, request: Request, slug: str) -> Response:
        route = permissions.route_for(
            request.user,
            slug,
            allowed=permissions.can_set_answer_settings,
            refused=lambda route: "Only the route's policy owners and admins change its answer settings.",
        )
        serializer = AnswerSettings(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.route_answer_settings_set(actor=Actor.from_request(request), route=route, **serializer.validated_data)
        return _answer_settings_response(route)
