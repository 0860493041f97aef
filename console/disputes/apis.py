"""API v1 of disputes: opening one on a refusal, the inbox, taking and resolving, appeal links."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import Actor
from console.accounts import permissions
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.errors import Conflict, InvalidInput, detail
from console.core.paging import Keyset, page_parameters, page_schema
from console.disputes import selectors, services
from console.disputes.models import USER_KINDS, Kind, Status
from console.disputes.validation import parse_dispute, parse_resolution
from console.ledger.selectors import get_decision_for_user

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
        "evidence": serializers.JSONField(allow_null=True),
        "quote_ranges": serializers.JSONField(allow_null=True),
        "opened_at": serializers.DateTimeField(),
        "due_by": serializers.DateTimeField(),
        "escalated_at": serializers.DateTimeField(allow_null=True),
        "overdue": serializers.BooleanField(),
        "no_signed_escalation_path": serializers.BooleanField(),
        "assigned_to": serializers.CharField(allow_null=True),
        "note": serializers.CharField(),
    },
)
_OPEN = inline_serializer(
    "DisputeOpen",
    {
        "kind": serializers.ChoiceField(USER_KINDS),
        "reason": serializers.CharField(max_length=5000),
        "evidence": serializers.JSONField(
            allow_null=True, help_text='{"passage_id", "quote"} | {"url", "quote"} | null'
        ),
        "contact": serializers.CharField(required=False),
    },
)
_RESOLVE = inline_serializer(
    "DisputeResolve",
    {"resolution": serializers.ChoiceField(["upheld", "overturned", "withdrawn"]), "note": serializers.CharField()},
)
_LIST = page_schema("DisputeList", _DISPUTE, also_as="disputes")
# Soonest due first, as the inbox reads them.
_DISPUTE_PAGES = Keyset("disputes.disputes", "due_by", "pk")
_LINK = inline_serializer("AppealLink", {"url": serializers.CharField()})
_ERRORS = {401: ERROR, 403: ERROR, 404: ERROR}


def _as_dict(request: Request, dispute_id: int) -> dict:
    return selectors.dispute_as_dict(selectors.get_dispute_for_user(request.user, dispute_id), request.user)


class DecisionDisputesApi(APIView):
    @extend_schema(
        summary="Dispute a refusal",
        description="Every role that may read the route's decisions, `reader` included. A quote from a logged "
        "passage is checked by the span verifier and its byte and character ranges stored; not found: "
        "400 `quote_not_found`. A served decision: 400 `not_refused`. A second open dispute of the same "
        "decision by the same person: 409 `already_open` with the first's id in `details`.",
        request=_OPEN,
        responses={201: _DISPUTE, 400: ERROR, 409: ERROR, **_ERRORS},
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
            OpenApiParameter("status", str, enum=[*Status.values, "all"]),
            OpenApiParameter("kind", str, enum=Kind.values),
            OpenApiParameter("overdue", bool),
            OpenApiParameter("mine", bool),
            *page_parameters(500),
        ],
        responses={200: _LIST, **_ERRORS},
    )
    def get(self, request: Request) -> Response:
        disputes = selectors.dispute_list(request.user, selectors.DisputeFilters.from_params(request.query_params))
        page, next_url = _DISPUTE_PAGES.page(request, disputes, default_limit=500)
        rows = [selectors.dispute_as_dict(d, request.user) for d in page]
        return Response({"results": rows, "next": next_url, "disputes": rows})


class DisputeDetailApi(APIView):
    @extend_schema(summary="One dispute", responses={200: _DISPUTE, **_ERRORS})
    def get(self, request: Request, dispute_id: int) -> Response:
        return Response(_as_dict(request, dispute_id))


class DisputeAssignApi(APIView):
    @extend_schema(
        summary="Take a dispute (assign it to me)",
        description="Reviewers and policy owners of the route.",
        request=None,
        responses={200: _DISPUTE, 409: ERROR, **_ERRORS},
    )
    def post(self, request: Request, dispute_id: int) -> Response:
        dispute = selectors.get_dispute_for_user(request.user, dispute_id)
        services.dispute_assign(actor=Actor.from_request(request), user=request.user, dispute=dispute)
        return Response(_as_dict(request, dispute_id))


class DisputeResolveApi(APIView):
    @extend_schema(
        summary="Resolve a dispute",
        description="`upheld` or `overturned` by reviewers and policy owners "
        "of the route; `withdrawn` by its opener. A note is required. The opener and an appellant who left "
        "an email are notified.",
        request=_RESOLVE,
        responses={200: _DISPUTE, 400: ERROR, 409: ERROR, **_ERRORS},
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
