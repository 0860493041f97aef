"""Writes of shadow evaluation. Each service is one transaction with its audit event.

Life of a run: `shadow_runs_open` creates it `queued` (one per refused decision, enforced by a
unique constraint) and queues a job; `shadow_run_execute` claims it with a conditional UPDATE
(queued -> running, attempts + 1), calls the pipeline outside any transaction, and writes the
outcome only if it still holds the claim (status running with its own attempt number).
`shadow_runs_sweep` (beat) opens runs whose job was lost, queues again runs whose message was
lost, and puts back to `queued` runs left `running` past SHADOW_RUN_TIMEOUT_SECONDS by a worker
that died; a slow worker that comes back after that finds its claim gone and drops its result.
`shadow_run_retry` sends a failed run back to `queued` on a reviewer's request.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, EventSpec, audit_record, audit_record_many
from console.accounts.models import Route
from console.core.errors import Conflict
from console.core.jobs import enqueue
from console.ledger.models import Decision, Outcome
from console.shadow import selectors
from console.shadow.models import RouteShadowSettings, ShadowRun, ShadowStatus
from console.shadow.pipelines import PipelineError, passages_sha256, pipeline_for, validate_shadow_config

logger = logging.getLogger(__name__)

_MAX_ERROR_CHARS = 4_000
_SWEEP_LIMIT = 500

_OPEN_SQL = (
    f"INSERT INTO {ShadowRun._meta.db_table} (decision_id, pipeline, pipeline_version, status, attempts, error, "
    "answer, passages_sha256, created_at, queued_at) "
    "SELECT decision_id, pipeline, '', 'queued', 0, '', '', '', now(), now() "
    "FROM unnest(%s::bigint[], %s::text[]) AS t(decision_id, pipeline) "
    "ON CONFLICT (decision_id) DO NOTHING RETURNING id, decision_id"
)

# Queued by name: the tasks module wraps these services, so the services do not import it.
EXECUTE_JOB = "shadow.shadow_run_execute"


def route_shadow_set(*, actor: Actor, route: Route, config: dict | None) -> bool:
    """Choose the route's shadow pipeline ({} for none); True when it changed (and was audited).
    New refusals get runs from now on, and the sweeper opens runs for the route's earlier
    refusals, a few hundred per sweep. The choice is the shadow app's own row of the route
    (`RouteShadowSettings`), created on the first change."""
    new = validate_shadow_config(config or {})
    with transaction.atomic():
        # The route's row is the lock two concurrent choices of its pipeline queue on.
        Route.objects.select_for_update().filter(pk=route.pk).first()
        settings = RouteShadowSettings.objects.filter(route_id=route.pk).first()
        old = settings.config if settings is not None else {}
        if old == new:
            return False
        if settings is None:
            settings = RouteShadowSettings(route=route)
        settings.config = new
        settings.full_clean(validate_unique=False)
        settings.save()
        route.shadow_settings = settings
        audit_record(
            actor=actor,
            action=Action.SHADOW_PIPELINE_SET,
            object_type="route",
            object_id=route.pk,
            route=route.slug,
            payload={"slug": route.slug, "shadow_config": {"old": old, "new": new}},
        )
    return True


def shadow_runs_open(*, actor: Actor, decision_ids: Sequence[int]) -> list[int]:
    """Open one queued run per refused decision among `decision_ids` whose route names a pipeline.

    A decision that has a run already keeps it (ON CONFLICT DO NOTHING on the unique constraint),
    so opening twice opens nothing twice. Returns the new run ids; a job is queued for each.
    """
    candidates = sorted(
        Decision.objects.filter(
            pk__in=list(decision_ids), outcome=Outcome.REFUSED, route__shadow_settings__config__has_key="kind"
        ).values_list("pk", "route__shadow_settings__config__kind", "route__slug")
    )
    if not candidates:
        return []
    slugs = {pk: slug for pk, _, slug in candidates}
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_OPEN_SQL, [[pk for pk, _, _ in candidates], [str(kind)[:100] for _, kind, _ in candidates]])
            opened = cursor.fetchall()
        by_route: dict[str, list[tuple[int, int]]] = {}
        for run_id, decision_id in opened:
            by_route.setdefault(slugs[decision_id], []).append((run_id, decision_id))
        audit_record_many(
            actor=actor,
            events=[
                EventSpec(
                    Action.SHADOW_RUNS_QUEUED,
                    "route",
                    slug,
                    route=slug,
                    payload={
                        "objects": {"decision": [d for _, d in pairs], "shadow_run": [r for r, _ in pairs]},
                        "opened": len(pairs),
                    },
                )
                for slug, pairs in sorted(by_route.items())
            ],
        )
        # One message per run, not one per batch: each run waits on the external pipeline, so separate
        # messages spread the runs over every shadow worker (`--scale worker-shadow=N`), and a killed
        # worker holds back one run. These publishes happen here, in this job, never in the ingest request.
        for run_id, _ in opened:
            enqueue(EXECUTE_JOB, run_id)
    return [run_id for run_id, _ in opened]


def shadow_run_execute(*, run_id: int) -> ShadowRun | None:
    """Run the route's pipeline for one queued run and store its answer or its error.

    Returns None without doing anything when the run is not queued (done, or held by another
    job), and when this job lost its claim while the pipeline was working.
    """
    run = _claim(run_id)
    if run is None:
        return None
    decision = run.decision
    request = selectors.logged_pipeline_request(decision)
    checksum = passages_sha256(request.passages)
    name, version, answer, error = run.pipeline, run.pipeline_version, "", ""
    started = time.monotonic()
    try:
        pipeline = pipeline_for(selectors.route_shadow_config(decision.route))
        if pipeline is None:
            raise PipelineError("The route no longer names a shadow pipeline.")
        name, version = pipeline.name, pipeline.version
        answer = pipeline.run(request)
    except PipelineError as exc:
        error = str(exc)
    except Exception as exc:  # a broken adapter must end in a visible failure, not a run stuck in 'running'
        logger.exception("shadow run %s: the pipeline raised", run_id)
        error = f"The pipeline raised {exc!r}"
    latency_ms = (time.monotonic() - started) * 1000
    return _finish(
        run,
        name=name,
        version=version,
        answer=answer,
        error=error[:_MAX_ERROR_CHARS],
        checksum=checksum,
        latency_ms=latency_ms,
    )


def _claim(run_id: int) -> ShadowRun | None:
    with transaction.atomic():
        claimed = ShadowRun.objects.filter(pk=run_id, status=ShadowStatus.QUEUED).update(
            status=ShadowStatus.RUNNING, attempts=F("attempts") + 1, started_at=timezone.now(), finished_at=None
        )
        if not claimed:
            return None
        run = ShadowRun.objects.select_related("decision__route").get(pk=run_id)
        audit_record(
            actor=Actor.system("shadow_run_execute"),
            action=Action.SHADOW_RUN_STARTED,
            object_type="shadow_run",
            object_id=run.pk,
            route=run.decision.route.slug,
            payload={
                "objects": {"decision": [run.decision_id]},
                "attempt": run.attempts,
                "status": {"old": ShadowStatus.QUEUED, "new": ShadowStatus.RUNNING},
            },
        )
    return run


def _finish(
    run: ShadowRun, *, name: str, version: str, answer: str, error: str, checksum: str, latency_ms: float
) -> ShadowRun | None:
    status = ShadowStatus.FAILED if error else ShadowStatus.SUCCEEDED
    with transaction.atomic():
        # Only the job holding the claim may write: status still running with our attempt number.
        updated = ShadowRun.objects.filter(pk=run.pk, status=ShadowStatus.RUNNING, attempts=run.attempts).update(
            status=status,
            answer="" if error else answer,
            error=error,
            passages_sha256=checksum,
            latency_ms=latency_ms,
            finished_at=timezone.now(),
            pipeline=name[:100],
            pipeline_version=version[:100],
        )
        if not updated:
            logger.warning(
                "shadow run %s: attempt %s lost its claim while the pipeline ran; result dropped", run.pk, run.attempts
            )
            return None
        payload = {
            "objects": {"decision": [run.decision_id]},
            "attempt": run.attempts,
            "pipeline": name,
            "pipeline_version": version,
            "passages_sha256": checksum,
            "latency_ms": round(latency_ms, 1),
            "status": {"old": ShadowStatus.RUNNING, "new": status},
        }
        if error:
            payload["error"] = error
        else:
            payload["answer_sha256"] = hashlib.sha256(answer.encode("utf-8")).hexdigest()
        audit_record(
            actor=Actor.system("shadow_run_execute"),
            action=Action.SHADOW_RUN_FAILED if error else Action.SHADOW_RUN_SUCCEEDED,
            object_type="shadow_run",
            object_id=run.pk,
            route=run.decision.route.slug,
            payload=payload,
        )
    return ShadowRun.objects.get(pk=run.pk)


def shadow_run_retry(*, actor: Actor, run: ShadowRun) -> ShadowRun:
    """Send a failed run back to its route's pipeline. Conflict unless it failed."""
    with transaction.atomic(durable=True):
        locked = ShadowRun.objects.select_for_update().select_related("decision__route").get(pk=run.pk)
        if locked.status != ShadowStatus.FAILED:
            raise Conflict(f"Only a failed shadow run can be retried; this one is {locked.status}.", code="not_failed")
        if not selectors.route_shadow_config(locked.decision.route):
            raise Conflict("The route names no shadow pipeline any more; set one first.", code="no_pipeline")
        old_error = locked.error
        locked.status, locked.error, locked.queued_at = ShadowStatus.QUEUED, "", timezone.now()
        locked.full_clean()
        locked.save(update_fields=["status", "error", "queued_at"])
        audit_record(
            actor=actor,
            action=Action.SHADOW_RUN_RETRIED,
            object_type="shadow_run",
            object_id=locked.pk,
            route=locked.decision.route.slug,
            payload={
                "objects": {"decision": [locked.decision_id]},
                **field_changes(
                    old={"status": ShadowStatus.FAILED, "error": old_error},
                    new={"status": ShadowStatus.QUEUED, "error": ""},
                ),
            },
        )
        enqueue(EXECUTE_JOB, locked.pk)
    return locked


def shadow_runs_sweep(*, actor: Actor, limit: int = _SWEEP_LIMIT) -> dict[str, int]:
    """Beat job: nothing stays lost. Opens missing runs, re-queues lost and presumed-dead ones."""
    lost_before = timezone.now() - timedelta(seconds=settings.JOBS_REQUEUE_AFTER_SECONDS)
    opened = shadow_runs_open(
        actor=actor, decision_ids=selectors.decisions_awaiting_shadow_run(ingested_before=lost_before, limit=limit)
    )
    requeued = shadow_runs_requeue(actor=actor, limit=limit)
    return {"opened": len(opened), "requeued": len(requeued)}


def shadow_runs_requeue(*, actor: Actor, limit: int = _SWEEP_LIMIT) -> list[int]:
    """Queue again runs queued too long ago (message lost) and runs running past the timeout
    (worker presumed dead: they go back to queued, so a new job can claim them)."""
    now = timezone.now()
    lost_before = now - timedelta(seconds=settings.JOBS_REQUEUE_AFTER_SECONDS)
    dead_before = now - timedelta(seconds=settings.SHADOW_RUN_TIMEOUT_SECONDS)
    waiting = Q(status=ShadowStatus.QUEUED) & (Q(queued_at__lt=lost_before) | Q(queued_at__isnull=True))
    stuck = Q(status=ShadowStatus.RUNNING, started_at__lt=dead_before)
    with transaction.atomic():
        rows = list(
            ShadowRun.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(waiting | stuck)
            .order_by("pk")
            .values_list("pk", "status", "attempts", "decision_id", "decision__route__slug")[:limit]
        )
        if not rows:
            return []
        ShadowRun.objects.filter(pk__in=[row[0] for row in rows]).update(status=ShadowStatus.QUEUED, queued_at=now)
        by_route: dict[str, list[tuple]] = {}
        for row in rows:
            by_route.setdefault(row[4], []).append(row)
        audit_record_many(
            actor=actor,
            events=[
                EventSpec(
                    Action.SHADOW_RUNS_REQUEUED,
                    "route",
                    slug,
                    route=slug,
                    payload={
                        "objects": {"decision": [r[3] for r in group], "shadow_run": [r[0] for r in group]},
                        "lost_in_queue": [r[0] for r in group if r[1] == ShadowStatus.QUEUED],
                        "presumed_dead": [r[0] for r in group if r[1] == ShadowStatus.RUNNING],
                    },
                )
                for slug, group in sorted(by_route.items())
            ],
        )
        for row in rows:
            enqueue(EXECUTE_JOB, row[0])
    return [row[0] for row in rows]
