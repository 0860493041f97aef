"""API v1 of disputes: opening one on a refusal, the inbox, taking and resolving, appeal links."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import Actor
from console.accounts import permissions
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.errors import Conflict, InvalidInput, detail
from console.core.openapi import empty_is_absent, link, links
from console.core.paging import Keyset, page_parameters, page_schema
from console.core.parsers import body_checked
from console.disputes import selectors, services
from console.disputes.models import MAX_NOTE, MAX_QUOTE, MAX_REASON, USER_KINDS, Kind, Status
from console.disputes.validation import parse_dispute, parse_resolution
from console.ledger.selectors import get_decision_for_user

_QUOTE = {"type": "string", "minLength": 1, "maxLength": MAX_QUOTE, "pattern": r"^[^\x00]*[^\s\x00][^\x00]*$"}


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "object",
                "title": "From a logged passage",
                "required": ["passage_id", "quote"],
                "properties": {
                    "passage_id": {"type": "integer", "minimum": 1, "description": "One of the decision's passages."},
                    "quote": _QUOTE,
                },
                "not": {"required": ["url"]},
            },
            {
                "type": "object",
                "title": "From an outside source",
                "required": ["url", "quote"],
                "properties": {
                    "url": {"type": "string", "maxLength": 2000, "pattern": r"^[hH][tT][tT][pP][sS]?:[^\x00]*$"},
                    "quote": _QUOTE,
                },
                "not": {"required": ["passage_id"]},
            },
        ]
    }
)
class DisputeEvidence(serializers.Field):
    """A quote from a logged passage or from a URL; null for kinds that need none (retrieval_missed, other)."""


_RANGES = serializers.ListField(
    child=serializers.ListField(child=serializers.IntegerField(min_value=0), min_length=2, max_length=2)
)
_DISPUTE = inline_serializer(
    "Dispute",
    {
        "id": serializers.IntegerField(),
        "route": serializers.CharField(),
        "request_id": serializers.CharField(),
        "decision": serializers.IntegerField(allow_null=True),
        "kind": serializers.ChoiceField(Kind.values),
        "status": serializers.ChoiceField(Status.values),
        "reason": serializers.CharField(
            allow_null=True, help_text="Null on an appeal for who is not a reviewer or policy owner of the route."
        ),
        "appellant_email": serializers.CharField(
            allow_null=True, help_text="An appeal's reply address: the route's reviewers and policy owners only."
        ),
        "outcome": serializers.CharField(
            allow_null=True, help_text="The resolution in plain words, e.g. `the refusal stands`; null while open."
        ),
        "evidence": DisputeEvidence(allow_null=True),
        "quote_ranges": inline_serializer(
            "QuoteRanges",
            {"bytes": _RANGES, "chars": _RANGES},
            allow_null=True,
            help_text="Where the quote was found in the passage: [start, end) bytes of its UTF-8 and characters.",
        ),
        "opened_at": serializers.DateTimeField(),
        "due_by": serializers.DateTimeField(),
        "escalated_at": serializers.DateTimeField(allow_null=True),
        "overdue": serializers.BooleanField(),
        "no_signed_escalation_path": serializers.BooleanField(),
        "assigned_to": serializers.CharField(allow_null=True),
        "note": serializers.CharField(),
    },
)
_DISPUTE_EXAMPLE = {
    "id": 5,
    "route": "it-support",
    "request_id": "q-000123",
    "decision": 1,
    "kind": "answerable_from_passages",
    "status": "open",
    "reason": "The runbook says how.",
    "appellant_email": None,
    "outcome": None,
    "evidence": {"passage_id": 12, "quote": "open Settings > Security"},
    "quote_ranges": {"bytes": [[14, 38]], "chars": [[14, 38]]},
    "opened_at": "2026-11-02T10:00:00+00:00",
    "due_by": "2026-11-03T10:00:00+00:00",
    "escalated_at": None,
    "overdue": False,
    "no_signed_escalation_path": False,
    "assigned_to": None,
    "note": "",
}


def _dispute_example(**changes) -> OpenApiExample:
    return OpenApiExample("A dispute", response_only=True, value={**_DISPUTE_EXAMPLE, **changes})


_OPEN = inline_serializer(
    "DisputeOpen",
    {
        "kind": serializers.ChoiceField(USER_KINDS),
        "reason": serializers.CharField(max_length=MAX_REASON),
        "evidence": DisputeEvidence(allow_null=True, required=False),
        "contact": serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=300),
    },
)
_RESOLVE = inline_serializer(
    "DisputeResolve",
    {
        "resolution": serializers.ChoiceField(["upheld", "overturned", "withdrawn"]),
        "note": serializers.CharField(
            required=False,
            allow_null=True,
            allow_blank=True,
            max_length=MAX_NOTE,
            help_text="Why; required (not empty) unless the resolution is withdrawn.",
        ),
    },
)
_LIST = page_schema("DisputeList", _DISPUTE, also_as="disputes")
# Soonest due first, as the inbox reads them.
_DISPUTE_PAGES = Keyset("disputes.disputes", "due_by", "pk")
_LINK = inline_serializer("AppealLink", {"url": serializers.CharField()})
_ERRORS = {401: ERROR, 403: ERROR, 404: ERROR}


def _as_dict(request: Request, dispute_id: int) -> dict:
    return selectors.dispute_as_dict(selectors.get_dispute_for_user(request.user, dispute_id), request.user)


class DecisionDisputesApi(APIView):
    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = {"kind", "reason", "contact", "evidence"}

    @extend_schema(
        summary="Dispute a refusal",
        extensions=links(
            {
                201: {
                    "ReadTheDispute": link(
                        "/api/v1/disputes/{dispute_id}", parameters={"dispute_id": "$response.body#/id"}
                    ),
                    "TakeTheDispute": link(
                        "/api/v1/disputes/{dispute_id}/assign",
                        method="post",
                        parameters={"dispute_id": "$response.body#/id"},
                    ),
                    "ResolveTheDispute": link(
                        "/api/v1/disputes/{dispute_id}/resolve",
                        method="post",
                        parameters={"dispute_id": "$response.body#/id"},
                    ),
                }
            }
        ),
        description="Every role that may read the route's decisions, `reader` included. A quote from a logged "
        "passage is checked by the span verifier and its byte and character ranges stored; not found: "
        "400 `quote_not_found`. A served decision: 400 `not_refused`. A second open dispute of the same "
        "decision by the same person: 409 `already_open` with the first's id in `details`.",
        request=_OPEN,
        responses={201: _DISPUTE, 400: ERROR, 409: ERROR, **_ERRORS},
        examples=[
            OpenApiExample(
                "With a quote",
                request_only=True,
                value={
                    "kind": "answerable_from_passages",
                    "reason": "The runbook says how.",
                    "evidence": {"passage_id": 12, "quote": "open Settings > Security"},
                },
            ),
            _dispute_example(),
        ],
    )
    def post(self, request: Request, decision_id: int) -> Response:
        decision = get_decision_for_user(request.user, pk=decision_id)
        data = parse_dispute(request.data)
        dispute = services.dispute_open(
            actor=Actor.from_request(request), user=request.user, decision=decision, data=data
        )
        created = selectors.get_dispute_for_user(request.user, dispute.pk)
        return Response(selectors.dispute_as_dict(created, request.user), status=201)


class DisputeListApi(APIView):
    @extend_schema(
        operation_id="v1_disputes_list",
        summary="Disputes, soonest due first (open ones unless `status` says otherwise)",
        parameters=[
            OpenApiParameter("route", str),
            # Each read sent empty as absent, as the disputes page's form sends an unset filter.
            empty_is_absent(OpenApiParameter("status", str, enum=[*Status.values, "all"])),
            empty_is_absent(OpenApiParameter("kind", str, enum=Kind.values)),
            empty_is_absent(OpenApiParameter("overdue", bool)),
            empty_is_absent(OpenApiParameter("mine", bool)),
            *page_parameters(500),
        ],
        responses={200: _LIST, 400: ERROR, **_ERRORS},
        examples=[
            OpenApiExample(
                "The inbox",
                response_only=True,
                value={"results": [_DISPUTE_EXAMPLE], "next": None, "disputes": [_DISPUTE_EXAMPLE]},
            )
        ],
    )
    def get(self, request: Request) -> Response:
        _refuse_unknown_filter_values(request.query_params)
        disputes = selectors.dispute_list(request.user, selectors.DisputeFilters.from_params(request.query_params))
        page, next_url = _DISPUTE_PAGES.page(request, disputes, default_limit=500)
        rows = [selectors.dispute_as_dict(d, request.user) for d in page]
        return Response({"results": rows, "next": next_url, "disputes": rows})


_FILTER_VALUES = {
    "status": {*Status.values, "all", ""},
    "kind": {*Kind.values, ""},
    "overdue": {"1", "true", "yes", "on", "0", "false", "no", "off", ""},
    "mine": {"1", "true", "yes", "on", "0", "false", "no", "off", ""},
}
_CASELESS = {"overdue", "mine"}


def _refuse_unknown_filter_values(params) -> None:
    """400 for a filter value the list does not know. The inbox page drops such a value (a stale link
    still opens); a client of the API is told, so a misspelt `status` does not read as "no disputes"."""
    bad = [
        detail(name, "invalid_parameter", f"must be one of {', '.join(sorted(v for v in allowed if v))}")
        for name, allowed in _FILTER_VALUES.items()
        if (params.get(name, "").lower() if name in _CASELESS else params.get(name, "")) not in allowed
    ]
    if bad:
        raise InvalidInput("Unknown filter value: " + ", ".join(d["field"] for d in bad) + ".", details=bad)


class DisputeDetailApi(APIView):
    @extend_schema(summary="One dispute", responses={200: _DISPUTE, **_ERRORS}, examples=[_dispute_example()])
    def get(self, request: Request, dispute_id: int) -> Response:
        return Response(_as_dict(request, dispute_id))


class DisputeAssignApi(APIView):
    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = frozenset()

    @extend_schema(
        summary="Take a dispute (assign it to me)",
        description="Reviewers and policy owners of the route.",
        request=None,
        responses={200: _DISPUTE, 409: ERROR, **_ERRORS},
        examples=[_dispute_example(assigned_to="reviewer-ann")],
    )
    def post(self, request: Request, dispute_id: int) -> Response:
        body_checked(request)
        dispute = selectors.get_dispute_for_user(request.user, dispute_id)
        services.dispute_assign(actor=Actor.from_request(request), user=request.user, dispute=dispute)
        return Response(_as_dict(request, dispute_id))


class DisputeResolveApi(APIView):
    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = {"resolution", "note"}

    @extend_schema(
        summary="Resolve a dispute",
        description="`upheld` or `overturned` by reviewers and policy owners "
        "of the route; `withdrawn` by its opener. A note is required. The opener and an appellant who left "
        "an email are notified.",
        request=_RESOLVE,
        responses={200: _DISPUTE, 400: ERROR, 409: ERROR, **_ERRORS},
        examples=[
            OpenApiExample(
                "Overturn",
                request_only=True,
                value={"resolution": "overturned", "note": "The runbook answers it; the refusal was wrong."},
            ),
            _dispute_example(
                status="overturned",
                outcome="the refusal was wrong",
                note="The runbook answers it; the refusal was wrong.",
            ),
        ],
    )
    def post(self, request: Request, dispute_id: int) -> Response:
        dispute = selectors.get_dispute_for_user(request.user, dispute_id)
        resolution, note = parse_resolution(request.data)
        services.dispute_resolve(
            actor=Actor.from_request(request), user=request.user, dispute=dispute, resolution=resolution, note=note
        )
        return Response(_as_dict(request, dispute_id))


class AppealLinkApi(APIView):
    @extend_schema(
        summary="The appeal link of a decision",
        description="For the answering system to show in its "
        "refusal message; works before the decision is ingested. Integrators, reviewers and policy owners "
        "of the route. A link a reviewer revoked: 409 `appeal_link_revoked`.",
        responses={200: _LINK, 409: ERROR, **_ERRORS},
        examples=[OpenApiExample("A link", response_only=True, value={"url": "/appeal/it-support/q-000123/Zm9vYmFy"})],
    )
    def get(self, request: Request, slug: str, request_id: str) -> Response:
        route = permissions.route_for(request.user, slug, allowed=permissions.can_read_appeal_link)
        if not services.storable_request_id(request_id):
            raise InvalidInput(
                "request_id must be 1 to 200 characters of valid Unicode without NUL.",
                details=[detail("request_id", "invalid", "not a storable request id")],
            )
        if services.revoked(route, request_id):
            raise Conflict("A reviewer revoked this refusal's appeal link.", code="appeal_link_revoked")
        return Response({"url": services.appeal_path(route, request_id)})
