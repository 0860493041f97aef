"""Writes of candidate gate trials: start, make the calls, mark lost calls, finish.

Exactly once per (trial, item, repeat): every call is a `TrialCall` row created when the trial
starts (unique on trial, decision, repeat) and claimed by a conditional UPDATE (queued -> calling,
``FOR UPDATE SKIP LOCKED``) before the HTTP request goes out, so two jobs running at once, or a job
delivered twice after a worker died, each take different calls. A call left in ``calling`` by a
worker that died is not made again (the candidate may have seen it): once it is older than the
candidate's timeout plus a grace period it is marked an error, "worker lost", and the trial goes
on. The result of a call that comes back after that is dropped (the save is conditional too).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import Forbidden, InvalidInput, detail
from console.core.jobs import enqueue
from console.trials import candidates, hooks, selectors
from console.trials.models import (
    CallErrorKind,
    CallStatus,
    Candidate,
    CandidateKind,
    Trial,
    TrialCall,
    TrialStatus,
)
from console.trials.validation import TrialSpec

logger = logging.getLogger(__name__)

# How many jobs work on one trial at once (each takes calls until none is left).
PARALLEL_JOBS = 2
# A job stops claiming after this long and queues its successor, so no job nears its time limit.
JOB_BUDGET_SECONDS = 240

_CLAIM_SQL = (
    f"UPDATE {TrialCall._meta.db_table} SET status = 'calling', claimed_at = %s WHERE id = ("
    f"SELECT id FROM {TrialCall._meta.db_table} WHERE trial_id = %s AND status = 'queued' "
    "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) AND status = 'queued' RETURNING id"
)


def candidate_register(*, actor: Actor, user, route: Route, spec: TrialSpec) -> Candidate:
    """Create or replace the route's candidate of this name; headers are stored encrypted."""
    candidate = Candidate.objects.select_for_update().filter(route=route, name=spec.name).first()
    old = None
    if candidate is None:
        candidate = Candidate(route=route, name=spec.name, created_by=user)
    else:
        old = {"kind": candidate.kind, "url": candidate.url, "timeout_s": candidate.timeout_s}
    candidate.kind = spec.kind
    candidate.url = spec.url
    candidate.headers_encrypted = candidates.headers_encrypt(spec.headers)
    candidate.headers_env = spec.headers_env
    candidate.timeout_s = spec.timeout_s
    candidate.full_clean()
    candidate.save()
    new = {
        "kind": candidate.kind,
        "url": candidate.url,
        "timeout_s": candidate.timeout_s,
        "headers": sorted(spec.headers),
        "headers_env": spec.headers_env,
    }  # header names only, never values
    if old != {k: new[k] for k in ("kind", "url", "timeout_s")}:
        audit_record(
            actor=actor,
            action=Action.CANDIDATE_REGISTERED,
            object_type="candidate",
            object_id=candidate.pk,
            payload={
                "name": candidate.name,
                **field_changes(old=old, new={k: new[k] for k in ("kind", "url", "timeout_s")}),
                # Header names only, never values; what they were before is not kept (they are stored
                # encrypted), so they are what the candidate sends from now on rather than a change.
                "headers": new["headers"],
                "headers_env": new["headers_env"],
            },
            route=route.slug,
        )
    return candidate


@transaction.atomic
def trial_start(
    *, actor: Actor, user, route: Route, spec: TrialSpec, cutoff: tuple[float | None, str] | None = None
) -> Trial:
    """Register the candidate, create one queued call per (graded item, repeat) and queue the jobs.

    ``cutoff`` is ``(signed cutoff, source)`` to compare the current gate at; by default the
    cutoff in force (hooks.cutoff_in_force), else each decision's logged cutoff.
    """
    if spec.headers_env and not permissions.can_name_header_variable(user):
        raise Forbidden(
            "Only an admin may name an environment variable a candidate's header is read from.",
            details=[
                detail("headers_env", "admin_only", "Ask an admin to start this trial, or send the header itself.")
            ],
        )
    decision_ids = selectors.graded_decision_ids(route, spec.window())
    if not decision_ids:
        raise InvalidInput("The route has no graded items in this subset; grade some first.", code="no_graded_items")
    candidate = candidate_register(actor=actor, user=user, route=route, spec=spec)
    value, source = cutoff if cutoff is not None else hooks.cutoff_in_force(route)
    trial = Trial(
        route=route,
        candidate=candidate,
        repeats=spec.repeats,
        subset=spec.subset,
        gates=spec.gates,
        cutoff=value,
        cutoff_source=source,
        items=len(decision_ids),
        created_by=user,
    )
    trial.full_clean()
    trial.save()
    TrialCall.objects.bulk_create(
        [TrialCall(trial=trial, decision_id=d, repeat=r) for d in decision_ids for r in range(1, spec.repeats + 1)],
        batch_size=1000,
    )
    audit_record(
        actor=actor,
        action=Action.TRIAL_STARTED,
        object_type="trial",
        object_id=trial.pk,
        payload={
            "candidate": candidate.name,
            "kind": candidate.kind,
            "items": trial.items,
            "repeats": trial.repeats,
            "subset": trial.subset,
            "gates": trial.gates,
            "cutoff": trial.cutoff,
            "cutoff_source": trial.cutoff_source,
        },
        route=route.slug,
    )
    for _ in range(min(PARALLEL_JOBS, trial.items * trial.repeats)):
        enqueue("trials.trial_advance", trial.pk)
    return trial


def trial_advance(*, trial_id: int, budget_s: float = JOB_BUDGET_SECONDS) -> int:
    """Make queued calls of the trial until none is left (or the budget is spent: then the next job
    is queued); finish the trial when no call is pending. Returns how many calls this job made."""
    trial = Trial.objects.select_related("candidate", "route").filter(pk=trial_id).first()
    if trial is None or trial.status != TrialStatus.RUNNING:
        return 0
    calls_mark_lost(trial=trial)
    started = time.monotonic()
    made = 0
    while True:
        if time.monotonic() - started > budget_s:
            enqueue("trials.trial_advance", trial.pk)
            return made
        call_id = _claim(trial.pk)
        if call_id is None:
            break
        _make_call(trial, call_id)
        made += 1
    if not TrialCall.objects.filter(trial=trial, status__in=[CallStatus.QUEUED, CallStatus.CALLING]).exists():
        trial_finish(trial_id=trial.pk)
    return made


def _claim(trial_id: int) -> int | None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CLAIM_SQL, [timezone.now(), trial_id])
        row = cursor.fetchone()
    return row[0] if row else None


def _make_call(trial: Trial, call_id: int) -> None:
    call = TrialCall.objects.select_related("decision").get(pk=call_id)
    started = time.monotonic()
    fields: dict = {}
    try:
        request = _call_request(call)
        candidate = trial.candidate
        if candidate.kind == CandidateKind.REFERENCE:
            reply = candidates.call_reference(request)
        else:
            headers = {
                **candidates.headers_decrypt(candidate.headers_encrypted),
                **candidates.headers_from_env(candidate.headers_env),
            }
            reply = candidates.call_http(request, url=candidate.url, headers=headers, timeout_s=candidate.timeout_s)
        fields = {
            "status": CallStatus.DONE,
            "verdict": reply.verdict,
            "score": reply.score,
            "citations": reply.citations,
        }
    except candidates.CitationError as exc:
        fields = {"status": CallStatus.ERROR, "error_kind": CallErrorKind.CITATION, "error": str(exc)[:4000]}
    except candidates.CallFailed as exc:
        fields = {"status": CallStatus.ERROR, "error_kind": CallErrorKind.CALL, "error": str(exc)[:4000]}
    except SoftTimeLimitExceeded:  # the job is out of time: the call stays claimed and is later marked lost
        raise
    except Exception as exc:  # a bug or a bad row must not leave the call claimed forever
        logger.exception("trial call %s failed", call_id)
        fields = {
            "status": CallStatus.ERROR,
            "error_kind": CallErrorKind.CALL,
            "error": f"internal error: {exc!r}"[:4000],
        }
    fields.update(finished_at=timezone.now(), latency_ms=(time.monotonic() - started) * 1000)
    # Conditional: a call already marked lost keeps that mark.
    TrialCall.objects.filter(pk=call_id, status=CallStatus.CALLING).update(**fields)


def _call_request(call: TrialCall) -> candidates.CallRequest:
    decision = call.decision
    passages = [{"id": link.passage.external_id, "text": link.passage.text} for link in decision.ranked_passages]
    return candidates.CallRequest(
        request_id=decision.request_id,
        question=decision.question,
        passages=passages,
        draft_answer=selectors.draft_answer(decision),
    )


def calls_mark_lost(*, trial: Trial) -> int:
    """Calls claimed longer ago than the timeout plus grace: errors, "worker lost"; never made again."""
    limit = timezone.now() - timedelta(seconds=trial.candidate.timeout_s + settings.TRIALS_LOST_GRACE_SECONDS)
    with transaction.atomic():
        lost = list(
            TrialCall.objects.select_for_update(skip_locked=True)
            .filter(trial=trial, status=CallStatus.CALLING, claimed_at__lt=limit)
            .values_list("pk", flat=True)
        )
        if not lost:
            return 0
        TrialCall.objects.filter(pk__in=lost, status=CallStatus.CALLING).update(
            status=CallStatus.ERROR,
            error_kind=CallErrorKind.WORKER_LOST,
            finished_at=timezone.now(),
            error="worker lost: the call was claimed but no result was saved; it is not made again, "
            "so that no (item, repeat) is asked twice",
        )
        audit_record(
            actor=Actor.system("trials_sweep"),
            action=Action.TRIAL_CALLS_LOST,
            object_type="trial",
            object_id=trial.pk,
            payload={"calls": len(lost)},
            route=trial.route.slug,
        )
    return len(lost)


def trial_finish(*, trial_id: int) -> Trial | None:
    """Compute and store the result document once (the first job to get here wins)."""
    with transaction.atomic():
        trial = Trial.objects.select_for_update().select_related("candidate", "route").filter(pk=trial_id).first()
        if trial is None or trial.status != TrialStatus.RUNNING:
            return None
        if TrialCall.objects.filter(trial=trial, status__in=[CallStatus.QUEUED, CallStatus.CALLING]).exists():
            return None
        document = selectors.trial_result(trial)
        trial.result_text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        trial.result_sha256 = hashlib.sha256(trial.result_text.encode("utf-8")).hexdigest()
        trial.passed = document["passed"]
        trial.status = TrialStatus.DONE
        trial.finished_at = timezone.now()
        trial.save()
        audit_record(
            actor=Actor.system("trial_advance"),
            action=Action.TRIAL_FINISHED,
            object_type="trial",
            object_id=trial.pk,
            payload={
                "passed": trial.passed,
                "sha256": trial.result_sha256,
                "calls": document["calls"],
                "gates": document["gates"],
            },
            route=trial.route.slug,
        )
    return trial


def trials_sweep() -> dict[str, int]:
    """For running trials: mark lost calls, queue a job where calls wait, finish where none does."""
    counts = {"lost": 0, "queued": 0, "finished": 0}
    for trial in Trial.objects.select_related("candidate", "route").filter(status=TrialStatus.RUNNING):
        counts["lost"] += calls_mark_lost(trial=trial)
        pending = set(
            TrialCall.objects.filter(trial=trial)
            .filter(Q(status=CallStatus.QUEUED) | Q(status=CallStatus.CALLING))
            .values_list("status", flat=True)
            .distinct()
        )
        if CallStatus.QUEUED in pending:
            enqueue("trials.trial_advance", trial.pk)
            counts["queued"] += 1
        elif not pending and trial_finish(trial_id=trial.pk):
            counts["finished"] += 1
    return counts
