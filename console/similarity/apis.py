import copy

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts import permissions
from console.accounts.models import Route
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.errors import Forbidden, InvalidInput
from console.core.paging import whole
from console.ledger.models import Outcome
from console.ledger.selectors import get_decision_for_user
from console.similarity import selectors

MAX_K = 50
_OUTCOMES = [*Outcome.values, "any"]

_SIMILAR = inline_serializer(
    "SimilarRefusals",
    {
        "results": serializers.ListField(
            child=inline_serializer(
                "SimilarDecision",
                {
                    "id": serializers.IntegerField(),
                    "request_id": serializers.CharField(),
                    "similarity": serializers.FloatField(help_text="Cosine similarity of the questions, -1 to 1."),
                    "occurred_at": serializers.DateTimeField(),
                    "outcome": serializers.CharField(),
                    "question": serializers.CharField(),
                    "no_supporting_passage": serializers.BooleanField(
                        allow_null=True, help_text="Null until span verification has run."
                    ),
                    "dispute": inline_serializer(
                        "SimilarDecisionDispute",
                        {
                            "status": serializers.ChoiceField(
                                choices=["open", "upheld", "overturned", "withdrawn"],
                                help_text="open while any dispute is open, else how the last resolved one ended.",
                            ),
                            "count": serializers.IntegerField(help_text="Disputes and appeals of the decision."),
                        },
                        allow_null=True,
                        help_text="Null when never disputed.",
                    ),
                    "label": serializers.ChoiceField(
                        choices=["correct", "incorrect"],
                        allow_null=True,
                        required=False,
                        help_text="The final label; null when not graded. Only for readers of the route's "
                        "statistics: absent for the `reader` role.",
                    ),
                },
            )
        ),
        "vectors": inline_serializer(
            "QuestionVectorSpace",
            {
                "source": serializers.CharField(help_text="Where the route's vectors come from (sent or built in)."),
                "dimension": serializers.IntegerField(min_value=1),
                "embedder_version": serializers.IntegerField(allow_null=True),
                "decision_has_vector": serializers.BooleanField(),
            },
            allow_null=True,
            help_text="The route's question vectors; null when the route has none.",
        ),
        "similar_form_30d": inline_serializer(
            "SimilarForm30d",
            {
                "count": serializers.IntegerField(min_value=0),
                "at_least": serializers.BooleanField(help_text="The count stopped at its cap."),
                "threshold": serializers.FloatField(),
            },
            help_text="Decisions of the last 30 days at least `threshold` similar.",
        ),
        "reason": serializers.ChoiceField(
            choices=["no_vectors", "no_vector", "zero_vector"],
            allow_null=True,
            help_text="Why results is empty, when known before searching: the route has no question vectors yet; "
            "this decision has none; or its vector is all zeros (a question of numbers, punctuation or emoji only, "
            "which the built-in embedder cannot place, or zeros sent as its question_embedding), so no similarity "
            "can be computed. Null otherwise. Decisions with a zero vector are never listed as neighbours.",
        ),
        "next": serializers.URLField(allow_null=True, help_text="Always null: `k` bounds the list (1 to 50)."),
    },
)


def neighbour_dict(neighbour) -> dict:
    decision = neighbour.decision
    support = getattr(decision, "support", None)
    return {
        "id": decision.pk,
        "request_id": decision.request_id,
        "similarity": round(neighbour.similarity, 6),
        "occurred_at": decision.occurred_at.isoformat(),
        "outcome": decision.outcome,
        "question": decision.question,
        "no_supporting_passage": support.no_supporting_passage if support and support.status == "done" else None,
        **neighbour.facts,  # "dispute" and, for readers of the statistics, "label"
    }


def similar_as_dict(result) -> dict:
    space = result.space
    return {
        **whole([neighbour_dict(n) for n in result.neighbours]),  # the k nearest: one page
        "vectors": None
        if space is None
        else {
            "source": space.source,
            "dimension": space.dimension,
            "embedder_version": space.embedder_number,
            "decision_has_vector": result.has_vector,
        },
        "similar_form_30d": {
            "count": result.similar_form_count,
            "at_least": result.similar_form_capped,
            "threshold": result.threshold,
        },
        "reason": result.reason,
    }


class SimilarDecisionsApi(APIView):
    """The nearest questions of the same route (refusals by default), for readers of the route."""

    @extend_schema(
        parameters=[
            OpenApiParameter("k", {"type": "integer", "minimum": 1, "maximum": MAX_K}, description="Default 10."),
            OpenApiParameter("outcome", str, enum=_OUTCOMES, description="default refused"),
        ],
        responses={200: _SIMILAR, 400: ERROR, 403: ERROR, 404: ERROR},
        examples=[
            OpenApiExample(
                "One neighbour",
                response_only=True,
                value={
                    "results": [
                        {
                            "id": 42,
                            "request_id": "q-000311",
                            "similarity": 0.93,
                            "occurred_at": "2026-11-02T08:15:00+00:00",
                            "outcome": "refused",
                            "question": "How can I reset my MFA device?",
                            "no_supporting_passage": False,
                            "dispute": None,
                        }
                    ],
                    "next": None,
                    "vectors": {
                        "source": "builtin",
                        "dimension": 256,
                        "embedder_version": 1,
                        "decision_has_vector": True,
                    },
                    "similar_form_30d": {"count": 3, "at_least": False, "threshold": 0.9},
                    "reason": None,
                },
            )
        ],
        summary="Similar refusals of a decision",
    )
    def get(self, request: Request, decision_id: int) -> Response:
        decision = get_decision_for_user(request.user, pk=decision_id, passages=False)
        if not permissions.can_read_similar(request.user, decision.route):
            raise Forbidden("Your role does not allow reading this route's decisions.")
        raw_k = request.query_params.get("k", "10")
        if not raw_k.isdigit() or not 1 <= int(raw_k) <= MAX_K:
            raise InvalidInput(f"k must be a whole number from 1 to {MAX_K}.", code="invalid_k")
        outcome = request.query_params.get("outcome", Outcome.REFUSED)
        if outcome not in _OUTCOMES:
            raise InvalidInput(f"outcome must be one of {', '.join(_OUTCOMES)}.", code="invalid_outcome")
        result = selectors.similar_refusals_for_user(
            request.user, decision, k=int(raw_k), outcome=None if outcome == "any" else outcome
        )
        return Response(similar_as_dict(result))


def get_route_for_gaps(user, slug: str) -> Route:
    return permissions.route_for(
        user,
        slug,
        allowed=permissions.can_read_gaps,
        refused="Corpus gaps are for reviewers and policy owners.",
        missing=f"No route {slug!r} you may read.",
    )


def cluster_dict(cluster) -> dict:
    return {
        "id": cluster.pk,
        "rank": cluster.rank,
        "size": cluster.size,
        "size_this_week": cluster.size_this_week,
        "size_last_week": cluster.size_last_week,
        "no_support_share": round(cluster.no_support_share, 4),
        "verified": cluster.verified,
        "examples": cluster.examples,
        "terms": cluster.terms,
        # members with a final label, and the share of them graded correct-when-answered
        "graded": cluster.graded,
        "correct_share": None if cluster.correct_share is None else round(cluster.correct_share, 4),
    }


_GAP_CLUSTER = inline_serializer(
    "GapCluster",
    {
        "id": serializers.IntegerField(),
        "rank": serializers.IntegerField(),
        "size": serializers.IntegerField(min_value=0),
        "size_this_week": serializers.IntegerField(min_value=0),
        "size_last_week": serializers.IntegerField(min_value=0),
        "no_support_share": serializers.FloatField(),
        "verified": serializers.IntegerField(min_value=0, help_text="Members whose span check has run."),
        "examples": serializers.ListField(
            child=inline_serializer(
                "GapExample",
                {"id": serializers.IntegerField(), "question": serializers.CharField()},
            ),
            help_text="Refused questions nearest the cluster's centre.",
        ),
        "terms": serializers.ListField(child=serializers.CharField()),
        "graded": serializers.IntegerField(min_value=0),
        "correct_share": serializers.FloatField(allow_null=True),
    },
)


_GAP_EXAMPLE = {
    "id": 1,
    "rank": 1,
    "size": 14,
    "size_this_week": 5,
    "size_last_week": 3,
    "no_support_share": 0.86,
    "verified": 14,
    "examples": [{"id": 42, "question": "How can I reset my MFA device?"}],
    "terms": ["mfa", "reset", "device"],
    "graded": 4,
    "correct_share": 0.75,
}


class RouteGapsApi(APIView):
    """The latest clustering of the route's refused questions, largest no-support gaps first."""

    @extend_schema(
        examples=[
            OpenApiExample(
                "One gap",
                response_only=True,
                value={
                    "computed_at": "2026-11-06T03:00:00+00:00",
                    "results": [_GAP_EXAMPLE],
                    "next": None,
                    "clusters": [_GAP_EXAMPLE],
                    "reason": None,
                },
            )
        ],
        responses={
            200: inline_serializer(
                "CorpusGaps",
                {
                    "computed_at": serializers.DateTimeField(allow_null=True),
                    "results": serializers.ListField(
                        child=copy.deepcopy(_GAP_CLUSTER), help_text="The clusters, as `clusters` gives them."
                    ),
                    "next": serializers.URLField(allow_null=True, help_text="Always null: one run's clusters."),
                    "clusters": serializers.ListField(child=copy.deepcopy(_GAP_CLUSTER)),
                    "reason": serializers.ChoiceField(
                        choices=["not_computed", "no_refusals", "too_few_refusals", "no_groups"],
                        allow_null=True,
                        help_text="Why clusters is empty: no run yet; no refusal with a question vector in the "
                        "window; fewer than 3 (no group can form); or no refusals close enough to each other "
                        "(none alike enough). Null when there are clusters.",
                    ),
                },
            ),
            403: ERROR,
            404: ERROR,
        },
        summary="Corpus gaps of a route",
    )
    def get(self, request: Request, slug: str) -> Response:
        route = get_route_for_gaps(request.user, slug)
        run = selectors.latest_gap_run(route)
        if run is None:
            return Response(
                {"computed_at": None, **whole([]), "clusters": [], "reason": selectors.gaps_reason(None, [])}
            )
        clusters = selectors.gap_clusters(run)
        rows = [cluster_dict(c) for c in clusters]
        return Response(
            {
                **whole(rows),
                "computed_at": run.computed_at.isoformat(),
                "window": {"from": run.window_from.isoformat(), "to": run.window_to.isoformat()},
                "refusals": run.refusals,
                "unclustered": run.unclustered,
                "source": run.source,
                "clusters": rows,
                "reason": selectors.gaps_reason(run, clusters),
            }
        )
