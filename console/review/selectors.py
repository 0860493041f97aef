"""The lookup shape of a decision (API v1): the ledger's record with what every app adds to it."""

from __future__ import annotations

from typing import Any

from console.accounts import permissions
from console.governance.selectors import signed_policy_as_dict
from console.ledger.models import Decision
from console.ledger.selectors import decision_record
from console.shadow.selectors import shadow_run_as_dict, shadow_run_of
from console.verification.selectors import claim_checks_as_list, span_checks_as_list, support_as_dict
from grading.models import FinalLabel
from grading.selectors import decision_grading


def decision_as_dict(decision: Decision) -> dict[str, Any]:
    span_checks = span_checks_as_list(decision)
    return {
        **decision_record(decision),
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
            for link in decision.ranked_passages
        ],
        "span_checks": span_checks,
        # a long answer's claims (as sent, else the claim's units), each with its span check
        "claim_checks": claim_checks_as_list(decision, span_checks),
        "support": support_as_dict(decision),
        "shadow_run": shadow_run_as_dict(shadow_run_of(decision)),
        "signed_policy": signed_policy_as_dict(decision),  # the signed cutoff in force at occurred_at
        **decision_grading(decision.pk),  # "grades" and "final_label"
    }


def final_label_annotations() -> dict[str, Any]:
    """For a query of decisions: "label_correct", the final label (NULL when ungraded). For the
    similar-refusals list, since similarity may not import grading."""
    from django.db.models import OuterRef, Subquery

    return {"label_correct": Subquery(FinalLabel.objects.filter(decision_id=OuterRef("pk")).values("correct")[:1])}


def final_label_of(decision: Decision) -> str | None:
    if decision.label_correct is None:
        return None
    return "correct" if decision.label_correct else "incorrect"


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
    from grading.models import GradingItem, ItemStatus

    return permissions.visible(
        GradingItem.objects.filter(status=ItemStatus.ADJUDICATION), user, permissions.LABEL_REVIEWERS
    ).count()
