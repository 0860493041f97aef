from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts import permissions
from console.core.api import ERROR_SCHEMA as ERROR
from console.ledger.selectors import get_decision_for_user
from console.review.selectors import decision_as_dict

_DECISION = inline_serializer(
    "Decision",
    {
        "id": serializers.IntegerField(),
        "route": serializers.CharField(),
        "request_id": serializers.CharField(),
        "passages": serializers.ListField(child=serializers.JSONField()),
    },
)


# What a `reader` is not shown of a decision: its grades, final label and the signed policy's evidence.
_MEASURED_KEYS = ("grades", "final_label", "signed_policy")


def _for(user, decision) -> dict:
    data = decision_as_dict(decision)
    if not permissions.can_read_stats(user, decision.route):
        for key in _MEASURED_KEYS:
            data.pop(key, None)
    return data


class DecisionDetailApi(APIView):
    @extend_schema(responses={200: _DECISION, 403: ERROR, 404: ERROR}, summary="Look up a decision")
    def get(self, request: Request, decision_id: int) -> Response:
        decision = get_decision_for_user(request.user, pk=decision_id)
        return Response(_for(request.user, decision))


class DecisionByRequestApi(APIView):
    @extend_schema(
        responses={200: _DECISION, 403: ERROR, 404: ERROR}, summary="Look up a decision by route and request_id"
    )
    def get(self, request: Request, slug: str, request_id: str) -> Response:
        decision = get_decision_for_user(request.user, route_slug=slug, request_id=request_id)
        return Response(_for(request.user, decision))
