"""The lookup shape of a decision (API v1): the ledger's record with what every app adds to it."""

from __future__ import annotations

from typing import Any

from console.accounts import permissions
from console.governance.selectors import signed_policy_as_dict
from console.ledger.models import Decision
from console.shadow.selectors import shadow_run_as_dict, shadow_run_of
from console.similarity.selectors import similar_refusals
from console.verification.selectors import span_checks_as_list, support_as_dict
from grading.models import FinalLabel
from grading.selectors import decision_grading


def decision_as_dict(decision: Decision) -> dict[str, Any]:
    return {
        "id": decision.pk,
        "route": decision.route.slug,
        "request_id": decision.request_id,
        "occurred_at": decision.occurred_at.isoformat(),
        "ingested_at": decision.ingested_at.isoformat(),
        "question": decision.question,
        "claim": decision.claim,
        "gate": {"name": decision.gate_name, "score": decision.gate_score, "cutoff": decision.cutoff},
        "outcome": decision.outcome,
        "served_answer": decision.served_answer,
        "versions": decision.versions,
        "segments": decision.segments,
        "content_hash": decision.content_hash,
        "passages": [
            {
                "passage_id": link.passage.pk,
                "id": link.passage.external_id,
                "rank": link.rank,
                "retrieval_score": link.retrieval_score,
                "text": link.passage.text,
                "sha256": link.passage.text_sha256,
                "source": link.passage.source,
                "uri": link.passage.uri,
                "corpus_snapshot": link.passage.corpus_snapshot,
            }
            for link in decision.ranked_passages.all()
        ],
        "span_checks": span_checks_as_list(decision),
        "support": support_as_dict(decision),
        "shadow_run": shadow_run_as_dict(shadow_run_of(decision)),
        "signed_policy": signed_policy_as_dict(decision),  # the signed cutoff in force at occurred_at
        **decision_grading(decision.pk),  # "grades" and "final_label"
    }


def similar_refusals_context(user, decision: Decision) -> dict[str, Any]:
    """The refusal page's "similar refusals" section: similarity finds the neighbours of the same
    route; the final label of each comes from grading, which similarity may not import."""
    if not permissions.can_read_similar(user, decision.route):
        return {"similar": None}
    similar = similar_refusals(decision)
    labels = dict(
        FinalLabel.objects.filter(decision_id__in=[n.decision.pk for n in similar.neighbours]).values_list(
            "decision_id", "correct"
        )
    )
    rows = [
        {
            "neighbour": n,
            "support": getattr(n.decision, "support", None),
            "label": None if n.decision.pk not in labels else ("correct" if labels[n.decision.pk] else "incorrect"),
        }
        for n in similar.neighbours
    ]
    return {"similar": similar, "similar_rows": rows}


def gap_cluster_labels(run_id: int) -> dict[int, dict]:
    """Per cluster of a gap run: members with a final label, and the share of those graded
    correct (for a refusal: the withheld answer would have been right). One query."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.id, count(*), count(*) FILTER (WHERE l.correct) FROM similarity_gapcluster c "
            "CROSS JOIN LATERAL unnest(c.decision_ids) AS m(decision_id) "
            "JOIN grading_finallabel l ON l.decision_id = m.decision_id WHERE c.run_id = %s GROUP BY c.id",
            [run_id],
        )
        return {
            cluster_id: {"graded": graded, "correct_share": correct / graded}
            for cluster_id, graded, correct in cursor.fetchall()
        }


def adjudication_backlog(user) -> int:
    """Items waiting for adjudication in the routes the user reviews: one count on an index."""
    from console.accounts import permissions
    from grading.models import GradingItem, ItemStatus

    return permissions.visible(
        GradingItem.objects.filter(status=ItemStatus.ADJUDICATION), user, permissions.LABEL_REVIEWERS
    ).count()
