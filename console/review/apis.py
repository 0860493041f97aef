from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts import permissions
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.openapi import link, links
from console.ledger.selectors import get_decision_for_user
from console.review.schemas import Decision
from console.review.selectors import decision_as_dict

_EXAMPLE = OpenApiExample(
    "A refusal",
    response_only=True,
    value={
        "id": 1,
        "route": "it-support",
        "request_id": "q-000123",
        "occurred_at": "2026-11-01T12:00:00+00:00",
        "ingested_at": "2026-11-01T12:00:03+00:00",
        "question": "How do I reset MFA?",
        "claim": "Open Settings > Security and choose Reset.",
        "gate": {"name": "entailment", "score": 0.62, "cutoff": 0.85},
        "outcome": "refused",
        "served_answer": None,
        "versions": {"model": "gen-2026-10", "retriever": "hybrid-3", "corpus": "snap-2026-11-01", "gate": "nli-4"},
        "segments": {"query_type": "how-to", "language": "en"},
        "content_hash": "c8e9f2ef1cd48916cf3045fdfe22e7df7deeec12addde2a49f479f657674aedf",
        "passages": [
            {
                "passage_id": 12,
                "id": "kb/mfa#2",
                "rank": 1,
                "retrieval_score": 0.81,
                "text": "To reset MFA, open Settings > Security and choose Reset.",
                "sha256": "63c5499f6cb4b626f836f2d9e9284ca6257664453a87a7921cdf8c8c709e2ca3",
                "source": "runbook",
                "uri": "https://intranet/kb/mfa",
                "corpus_snapshot": "snap-2026-11-01",
            }
        ],
        "span_checks": [],
        "claim_checks": [
            {
                "index": 0,
                "text": "Open Settings > Security and choose Reset.",
                "citations": [],
                "supported": None,
                "found_in": [],
                "cited_supported": None,
            }
        ],
        "support": None,
        "shadow_run": None,
        "signed_policy": None,
        "grades": [],
        "final_label": None,
    },
)


_BY_ID = {"decision_id": "$response.body#/id"}
_NEXT = {
    "SimilarRefusals": link("/api/v1/decisions/{decision_id}/similar", parameters=_BY_ID),
    "DisputeIt": link("/api/v1/decisions/{decision_id}/disputes", method="post", parameters=_BY_ID),
}


# What a `reader` is not shown of a decision: its grades, final label and the signed policy's evidence.
_MEASURED_KEYS = ("grades", "final_label", "signed_policy")


def _for(user, decision) -> dict:
    data = decision_as_dict(decision)
    if not permissions.can_read_stats(user, decision.route):
        for key in _MEASURED_KEYS:
            data.pop(key, None)
    return data


class DecisionDetailApi(APIView):
    @extend_schema(
        responses={200: Decision, 403: ERROR, 404: ERROR},
        summary="Look up a decision",
        extensions=links({200: _NEXT}),
        description="Never for a caller whose only role is grader (403).",
        examples=[_EXAMPLE],
    )
    def get(self, request: Request, decision_id: int) -> Response:
        decision = get_decision_for_user(request.user, pk=decision_id)
        return Response(_for(request.user, decision))


class DecisionByRequestApi(APIView):
    @extend_schema(
        responses={200: Decision, 403: ERROR, 404: ERROR},
        summary="Look up a decision by route and request_id",
        extensions=links(
            {
                200: {
                    **_NEXT,
                    "ByItsId": link(
                        "/api/v1/decisions/{decision_id}", parameters={"decision_id": "$response.body#/id"}
                    ),
                }
            }
        ),
        examples=[_EXAMPLE],
    )
    def get(self, request: Request, slug: str, request_id: str) -> Response:
        decision = get_decision_for_user(request.user, route_slug=slug, request_id=request_id)
        return Response(_for(request.user, decision))
