"""The lookup shape of a decision (API v1): the ledger's record with what every app adds to it."""

from __future__ import annotations

from typing import Any

from console.ledger.models import Decision
from console.shadow.selectors import shadow_run_as_dict, shadow_run_of
from console.verification.selectors import span_checks_as_list, support_as_dict
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
        **decision_grading(decision.pk),  # "grades" and "final_label"
    }


def adjudication_backlog(user) -> int:
    """Items waiting for adjudication in the routes the user reviews: one count on an index."""
    from console.accounts import permissions
    from grading.models import GradingItem, ItemStatus

    return permissions.visible(GradingItem.objects.filter(status=ItemStatus.ADJUDICATION), user,
                               permissions.LABEL_REVIEWERS).count()
