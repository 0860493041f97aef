"""Reads of shadow evaluation. Access is decided in console.accounts.permissions, applied here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef
from django.http import Http404

from console.accounts import permissions
from console.core.errors import Forbidden
from console.ledger.models import Decision, Outcome
from console.ledger.selectors import readable_decisions
from console.shadow.models import RouteShadowSettings, ShadowRun, ShadowStatus
from console.shadow.pipelines import PipelinePassage, PipelineRequest, passages_sha256


def route_shadow_config(route) -> dict:
    """The route's shadow pipeline config; `{}` (none) when the route has no settings row. Reads the
    row once per route instance (cached on it; `select_related("shadow_settings")` saves the query)."""
    settings = getattr(route, "shadow_settings", None)
    return dict(settings.config) if settings is not None else {}


def routes_with_pipeline(route_ids) -> set[int]:
    """Which of these routes name a shadow pipeline (their refusals wait for a shadow run)."""
    return set(
        RouteShadowSettings.objects.filter(route_id__in=list(route_ids), config__has_key="kind").values_list(
            "route_id", flat=True
        )
    )


def logged_pipeline_request(decision: Decision) -> PipelineRequest:
    """What a pipeline is handed: the question and exactly the logged passages, in rank order."""
    return PipelineRequest(
        request_id=decision.request_id,
        question=decision.question,
        passages=tuple(
            PipelinePassage(id=link.passage.external_id, text=link.passage.text) for link in decision.ranked_passages
        ),
    )


def shadow_failed_condition() -> Exists:
    """For the refusals list's filter: the decision's shadow run failed (and waits for a retry)."""
    return Exists(ShadowRun.objects.filter(decision=OuterRef("pk"), status=ShadowStatus.FAILED))


def logged_passages_sha256(decision: Decision) -> str:
    """The checksum recomputed from the ledger; a run's `passages_sha256` must equal it."""
    return passages_sha256(logged_pipeline_request(decision).passages)


def shadow_run_of(decision: Decision) -> ShadowRun | None:
    return ShadowRun.objects.filter(decision=decision).first()


def can_retry(user, route) -> bool:
    return permissions.can_retry_shadow(user, route)


def get_shadow_run_for_retry(user, pk: int) -> ShadowRun:
    """The run if the user may retry it: 404 when they may not read its decision, else 403."""
    if not permissions.can_read_decisions(user):
        raise Forbidden("Your role does not allow reading decisions.")
    run = (
        ShadowRun.objects.select_related("decision__route").filter(pk=pk, decision__in=readable_decisions(user)).first()
    )
    if run is None:
        raise Http404("No such shadow run.")
    if not can_retry(user, run.decision.route):
        raise Forbidden("Only reviewers and admins may retry a shadow run.")
    return run


# A refusal's run (one at most) and its route's pipeline, in one row whether or not either exists.
_RUN_AND_PIPELINE_SQL = f"""
SELECT r.*, s.config ->> 'kind' AS route_pipeline
FROM (SELECT 1) AS one
LEFT JOIN {ShadowRun._meta.db_table} r ON r.decision_id = %s
LEFT JOIN {RouteShadowSettings._meta.db_table} s ON s.route_id = %s
"""


def shadow_context(user, decision: Decision) -> dict[str, Any]:
    """What the refusal detail page shows about the decision's shadow run (one query, for a refusal):
    the run, or, while it has none, whether its route names a pipeline."""
    run, pipeline = None, ""
    if decision.outcome == Outcome.REFUSED:
        [row] = ShadowRun.objects.raw(_RUN_AND_PIPELINE_SQL, [decision.pk, decision.route_id])
        run, pipeline = (row if row.pk is not None else None), row.route_pipeline or ""
    logged = [
        PipelinePassage(id=link.passage.external_id, text=link.passage.text) for link in decision.ranked_passages
    ]  # prefetched in rank order: no query
    logged_sha256 = passages_sha256(logged) if run and run.passages_sha256 else ""
    return {
        "shadow_run": run,
        "shadow_pipeline": pipeline,
        "shadow_checksum_matches": bool(run and run.passages_sha256 and run.passages_sha256 == logged_sha256),
        "shadow_can_retry": bool(run and run.status == ShadowStatus.FAILED and can_retry(user, decision.route)),
    }


def shadow_run_as_dict(run: ShadowRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "id": run.pk,
        "pipeline": run.pipeline,
        "pipeline_version": run.pipeline_version,
        "status": run.status,
        "attempts": run.attempts,
        "error": run.error,
        "answer": run.answer or None,
        "passages_sha256": run.passages_sha256 or None,
        "latency_ms": run.latency_ms,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
    }


def decisions_awaiting_shadow_run(*, ingested_before: datetime, limit: int) -> list[int]:
    """Refused decisions of routes with a pipeline that have no run yet (lost jobs, new pipelines)."""
    return list(
        Decision.objects.filter(
            outcome=Outcome.REFUSED,
            route__shadow_settings__config__has_key="kind",
            shadow_runs__isnull=True,
            ingested_at__lt=ingested_before,
        )
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
