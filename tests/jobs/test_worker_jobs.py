"""Jobs on real Celery workers: killed mid-job, duplicated, and compared with what was logged."""

import time

import pytest

from audit.models import AuditEvent
from audit.selectors import audit_chain_verify
from audit.services import Actor
from console.ledger.models import Decision
from console.shadow import services as shadow_services
from console.shadow import tasks as shadow_tasks
from console.shadow.models import ShadowRun
from console.shadow.pipelines import PipelinePassage, passages_sha256
from console.shadow.selectors import logged_passages_sha256
from console.verification import tasks as verification_tasks
from console.verification.models import DecisionSupport
from console.verification.selectors import span_checks_as_list
from tests.factories import ingest, make_route, record
from tests.jobs.conftest import wait_for
from tests.standin import StandInPipeline

pytestmark = pytest.mark.django_db(transaction=True)

PASSAGES = [
    {"id": "kb/vpn#1", "text": "The VPN client is installed from the portal.", "rank": 2},
    {"id": "kb/mfa#2", "text": "To reset MFA, open Settings › Security and choose Reset.", "rank": 1},
]
CLAIM = "Open Settings › Security and choose Reset. Then reboot."


def _events(action: str, run: ShadowRun) -> int:
    return AuditEvent.objects.filter(action=action, object_id=str(run.pk)).count()


def _route_with(standin: StandInPipeline):
    route = make_route("it-support", "IT support")
    shadow_services.route_shadow_set(
        actor=Actor.system("tests"), route=route, config={"kind": "http", "url": standin.url}
    )
    return route


def test_a_worker_killed_mid_job_loses_nothing_and_the_job_completes_once(start_worker):
    with StandInPipeline("hold", answer="Open Settings, then Security.") as standin:
        _route_with(standin)
        first = start_worker(SHADOW_HTTP_TIMEOUT_MS=20_000, SHADOW_HTTP_RETRIES=0, SHADOW_RUN_TIMEOUT_SECONDS=60)
        [decision_id] = ingest([record(claim=CLAIM, passages=PASSAGES)])  # commits, then queues the jobs
        assert standin.received.wait(30), "the worker never called the pipeline"

        run = ShadowRun.objects.get(decision_id=decision_id)
        assert (run.status, run.attempts) == ("running", 1)
        first.kill()  # mid-job: the pipeline is still working on the request
        standin.behaviour = "answer"
        standin.release.set()
        time.sleep(0.5)
        run.refresh_from_db()
        assert (run.status, run.answer) == ("running", "")  # the killed job wrote nothing

        # A new worker with beat: the sweeper finds the run presumed dead and queues it again.
        start_worker(
            beat=True,
            JOBS_SWEEP_SECONDS=1,
            JOBS_REQUEUE_AFTER_SECONDS=1,
            SHADOW_RUN_TIMEOUT_SECONDS=2,
            SHADOW_HTTP_TIMEOUT_MS=1_000,
            SHADOW_HTTP_RETRIES=0,
        )
        wait_for(lambda: ShadowRun.objects.filter(pk=run.pk, status="succeeded").exists(), what="the run to succeed")
        time.sleep(2.5)  # a few more sweeps: nothing runs twice once it succeeded

    run.refresh_from_db()
    assert ShadowRun.objects.filter(decision_id=decision_id).count() == 1
    assert (run.status, run.attempts, run.answer, run.error) == ("succeeded", 2, "Open Settings, then Security.", "")
    assert _events("shadow_run_started", run) == 2 and _events("shadow_run_succeeded", run) == 1
    requeued = AuditEvent.objects.get(action="shadow_runs_requeued")
    assert requeued.payload["presumed_dead"] == [run.pk] and requeued.actor == "system:shadow_runs_sweep"

    # Both calls (the killed one and the one that finished) got exactly the logged passages.
    decision = Decision.objects.get(pk=decision_id)
    logged = [{"id": p["id"], "text": p["text"]} for p in sorted(PASSAGES, key=lambda p: p["rank"])]
    expected = {
        "request_id": decision.request_id,
        "question": decision.question,
        "gate": "disabled",
        "passages": logged,
    }
    assert standin.bodies == [expected, expected]
    received = passages_sha256([PipelinePassage(p["id"], p["text"]) for p in standin.bodies[-1]["passages"]])
    assert run.passages_sha256 == received == logged_passages_sha256(decision)

    support = DecisionSupport.objects.get(decision_id=decision_id)
    assert (support.status, support.units, support.units_supported) == ("done", 2, 1)
    assert audit_chain_verify()["ok"]


def test_duplicate_jobs_on_concurrent_workers_yield_one_result(start_worker, live_broker):
    with StandInPipeline(answer="Use the portal.", delay=0.5) as standin:
        _route_with(standin)
        start_worker(pool="prefork", concurrency=2, SHADOW_HTTP_RETRIES=0)
        [decision_id] = ingest([record(claim=CLAIM, passages=PASSAGES)])
        run = wait_for(lambda: ShadowRun.objects.filter(decision_id=decision_id).first(), what="the run to open")
        for _ in range(3):  # duplicates of every job, racing the originals
            shadow_tasks.shadow_run_execute.delay(run.pk)
            shadow_tasks.shadow_runs_open.delay([decision_id])
            verification_tasks.decisions_verify.delay([decision_id])
        wait_for(lambda: ShadowRun.objects.filter(pk=run.pk, status="succeeded").exists(), what="the run to succeed")
        wait_for(
            lambda: DecisionSupport.objects.filter(decision_id=decision_id, status="done").exists(), what="verification"
        )
        wait_for(lambda: live_broker.queued() == 0, what="the queue to drain")
        time.sleep(1.5)  # let the last duplicates finish

    run.refresh_from_db()
    assert ShadowRun.objects.filter(decision_id=decision_id).count() == 1
    assert (run.status, run.attempts, run.answer) == ("succeeded", 1, "Use the portal.")
    assert len(standin.requests) == 1
    assert _events("shadow_run_started", run) == 1 and _events("shadow_run_succeeded", run) == 1
    assert AuditEvent.objects.filter(action="shadow_runs_queued").count() == 1
    support = DecisionSupport.objects.get(decision_id=decision_id)
    assert support.attempts == 1 and len(span_checks_as_list(Decision.objects.get(pk=decision_id))) == 2 * 2
    verified = AuditEvent.objects.filter(
        action="decisions_verified", payload__contains={"objects": {"decision": [decision_id]}}
    )
    assert verified.count() == 1
    assert audit_chain_verify()["ok"]


def test_a_failing_pipeline_on_a_real_worker_ends_failed_with_its_error(start_worker, reviewer_token_client):
    with StandInPipeline("error") as standin:
        _route_with(standin)
        start_worker(SHADOW_HTTP_RETRIES=1, SHADOW_HTTP_BACKOFF_MS=50)
        [decision_id] = ingest([record(passages=PASSAGES)])
        wait_for(
            lambda: ShadowRun.objects.filter(decision_id=decision_id, status="failed").exists(), what="the run to fail"
        )
        run = ShadowRun.objects.get(decision_id=decision_id)
        assert run.answer == "" and "HTTP 500 from the pipeline" in run.error and "2 tries" in run.error
        assert len(standin.requests) == 2

        standin.behaviour = "answer"
        response = reviewer_token_client.post(f"/api/v1/shadow-runs/{run.pk}/retry")
        assert response.status_code == 202 and response.json()["status"] == "queued"
        wait_for(lambda: ShadowRun.objects.filter(pk=run.pk, status="succeeded").exists(), what="the retry")
    run.refresh_from_db()
    assert (run.attempts, run.answer, run.error) == (2, standin.answer, "")


@pytest.fixture
def reviewer_token_client():
    from rest_framework.test import APIClient

    from tests.factories import make_token, make_user

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(make_user('reviewer', 'reviewer'))}")
    return client
