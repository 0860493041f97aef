from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent
from audit.selectors import audit_chain_verify
from audit.services import Actor
from console.accounts.models import Route
from console.ledger.models import Decision
from console.shadow import services, tasks
from console.shadow.models import ShadowRun, ShadowStatus
from console.shadow.pipelines import PipelinePassage, ReferencePipeline, passages_sha256
from console.shadow.selectors import logged_passages_sha256, route_shadow_config
from tests.factories import ingest, make_token, make_user, record, served_record
from tests.jobs_inline import ingest_with_jobs, run_jobs
from tests.standin import StandInPipeline

ACTOR = Actor.system("tests")
# Sent out of rank order on purpose, with non-ASCII text: the pipeline must get them by rank.
PASSAGES = [
    {"id": "kb/vpn#1", "text": "The VPN client is installed from the portal.", "rank": 2},
    {"id": "kb/mfa#2", "text": "To reset MFA, open Settings › Security and choose Reset. Straße 5.", "rank": 1},
    {"id": "kb/misc", "text": "Laptops are replaced every four years.", "rank": 3},
]


@pytest.fixture
def fast_http(settings):
    settings.SHADOW_HTTP_TIMEOUT_MS = 300
    settings.SHADOW_HTTP_RETRIES = 1
    settings.SHADOW_HTTP_BACKOFF_MS = 10
    return settings


@pytest.fixture
def standin(fast_http):
    with StandInPipeline(answer="Open Settings, then Security.") as server:
        yield server


@pytest.fixture
def http_route(route, standin):
    services.route_shadow_set(actor=ACTOR, route=route, config={"kind": "http", "url": standin.url})
    return route


def _page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_every_refusal_gets_exactly_one_run_handed_the_logged_passages(http_route, standin):
    refused, served = ingest_with_jobs([record(passages=PASSAGES), served_record(passages=PASSAGES)])
    run = ShadowRun.objects.get()
    assert run.decision_id == refused and not ShadowRun.objects.filter(decision_id=served).exists()
    assert (run.status, run.attempts, run.answer, run.error) == (
        ShadowStatus.SUCCEEDED,
        1,
        "Open Settings, then Security.",
        "",
    )
    assert (run.pipeline, run.pipeline_version) == ("http", "http-1") and run.latency_ms > 0
    [body] = standin.bodies
    decision = Decision.objects.get(pk=refused)
    assert body == {
        "request_id": decision.request_id,
        "question": decision.question,
        "gate": "disabled",
        "passages": [{"id": p["id"], "text": p["text"]} for p in sorted(PASSAGES, key=lambda p: p["rank"])],
    }
    received = passages_sha256([PipelinePassage(p["id"], p["text"]) for p in body["passages"]])
    assert run.passages_sha256 == received == logged_passages_sha256(decision)


def test_opening_runs_twice_opens_nothing_twice(http_route, standin):
    [decision_id] = ingest([record()])
    with run_jobs():
        first = services.shadow_runs_open(actor=ACTOR, decision_ids=[decision_id])
        again = services.shadow_runs_open(actor=ACTOR, decision_ids=[decision_id, decision_id])
        tasks.shadow_run_execute.delay(first[0])
    assert len(first) == 1 and again == []
    run = ShadowRun.objects.get()
    assert run.attempts == 1 and len(standin.requests) == 1
    assert AuditEvent.objects.filter(action="shadow_run_succeeded", object_id=str(run.pk)).count() == 1


def test_a_second_run_for_one_decision_is_refused_by_the_database(http_route):
    [decision_id] = ingest([record()])
    ShadowRun.objects.create(decision_id=decision_id, pipeline="http")
    with pytest.raises(IntegrityError), transaction.atomic():
        ShadowRun.objects.create(decision_id=decision_id, pipeline="reference")


@pytest.mark.parametrize(
    "fields",
    [
        {"status": ShadowStatus.SUCCEEDED, "answer": "", "passages_sha256": "a" * 64},
        {"status": ShadowStatus.SUCCEEDED, "answer": "yes", "passages_sha256": ""},
        {"status": ShadowStatus.FAILED, "answer": "a fake answer", "error": "HTTP 500"},
    ],
)
def test_the_database_refuses_a_fake_answer(route, fields):
    [decision_id] = ingest([record()])
    with pytest.raises(IntegrityError), transaction.atomic():
        ShadowRun.objects.create(decision_id=decision_id, pipeline="http", **fields)


def test_routes_without_a_pipeline_get_no_runs(route):
    ingest_with_jobs([record(), record()])
    assert not ShadowRun.objects.exists()


@pytest.mark.parametrize(
    "behaviour, error",
    [
        ("error", "HTTP 500 from the pipeline: internal error in the stand-in (gave up after 2 tries)"),
        ("slow", "no answer within 0.3 s (gave up after 2 tries)"),
        ("malformed", "Malformed JSON in the response"),
        ("no_answer", 'The response has no "answer" member'),
        ("number", '"answer" is int, not a string.'),
    ],
)
def test_a_failing_pipeline_ends_in_a_visible_failure_never_an_answer(http_route, standin, reviewer, behaviour, error):
    standin.behaviour, standin.delay = behaviour, (2 if behaviour == "slow" else 0)
    [decision_id] = ingest_with_jobs([record(passages=PASSAGES)])
    run = ShadowRun.objects.get()
    assert run.status == ShadowStatus.FAILED and run.answer == "" and error in run.error
    assert run.passages_sha256 == logged_passages_sha256(run.decision)
    shown = reviewer.get(f"/api/v1/decisions/{decision_id}").json()["shadow_run"]
    assert shown["status"] == "failed" and shown["answer"] is None and error in shown["error"]
    page = _page(make_user("page-reviewer", "reviewer")).get(f"/decisions/{decision_id}/").content.decode()
    assert "Failed" in page and "Retry the shadow run" in page
    assert AuditEvent.objects.filter(action="shadow_run_failed", object_id=str(run.pk)).exists()


def test_a_reviewer_retries_a_failed_run_through_the_api(http_route, standin, reviewer):
    standin.behaviour = "error"
    ingest_with_jobs([record()])
    run = ShadowRun.objects.get()
    standin.behaviour = "answer"
    with run_jobs():
        response = reviewer.post(f"/api/v1/shadow-runs/{run.pk}/retry")
    assert response.status_code == 202
    run.refresh_from_db()
    assert (run.status, run.attempts, run.answer, run.error) == ("succeeded", 2, standin.answer, "")
    retried = AuditEvent.objects.get(action="shadow_run_retried", object_id=str(run.pk))
    assert retried.actor.startswith("token:") and retried.payload["status"] == {"old": "failed", "new": "queued"}
    assert "HTTP 500" in retried.payload["error"]["old"] and retried.payload["error"]["new"] == ""
    again = reviewer.post(f"/api/v1/shadow-runs/{run.pk}/retry")
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_failed"
    assert audit_chain_verify()["ok"]


def test_only_reviewers_and_admins_may_retry(http_route, other_route, standin, grader, integrator, anonymous):
    standin.behaviour = "error"
    ingest_with_jobs([record()])
    run = ShadowRun.objects.get()
    url = f"/api/v1/shadow-runs/{run.pk}/retry"
    assert grader.post(url).status_code == 403
    assert integrator.post(url).status_code == 403  # reads decisions, may not retry
    assert anonymous.post(url).status_code == 401
    anonymous.credentials(HTTP_AUTHORIZATION=f"Token {make_token(make_user('hr-rev', 'reviewer', other_route))}")
    assert anonymous.post(url).status_code == 404
    assert anonymous.post("/api/v1/shadow-runs/987654/retry").status_code == 404
    admin = make_user("boss", "admin")
    anonymous.credentials(HTTP_AUTHORIZATION=f"Token {make_token(admin)}")
    with run_jobs():
        assert anonymous.post(url).status_code == 202
    assert ShadowRun.objects.get().status == ShadowStatus.FAILED and ShadowRun.objects.get().attempts == 2


def test_the_retry_button_posts_with_csrf_and_is_audited(http_route, standin):
    standin.behaviour = "error"
    [decision_id] = ingest_with_jobs([record()])
    run = ShadowRun.objects.get()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(make_user("page-reviewer", "reviewer"))
    page = browser.get(f"/decisions/{decision_id}/").content.decode()
    assert f'action="/shadow-runs/{run.pk}/retry/"' in page
    assert browser.post(f"/shadow-runs/{run.pk}/retry/").status_code == 403  # no CSRF token
    assert browser.get(f"/shadow-runs/{run.pk}/retry/").status_code == 405
    standin.behaviour = "answer"
    token = browser.cookies["csrftoken"].value
    with run_jobs():
        response = browser.post(f"/shadow-runs/{run.pk}/retry/", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 302 and response["Location"] == f"/decisions/{decision_id}/"
    page = browser.get(f"/decisions/{decision_id}/").content.decode()
    assert "Succeeded" in page and standin.answer in page and "matches the logged passages" in page
    assert "Retry the shadow run" not in page
    assert "Shadow run retry requested by user:page-reviewer" in page  # the decision's audit history


def test_readers_who_may_not_retry_see_no_button(http_route, standin):
    standin.behaviour = "error"
    [decision_id] = ingest_with_jobs([record()])
    page = _page(make_user("page-auditor", "auditor")).get(f"/decisions/{decision_id}/").content.decode()
    assert "Failed" in page and "Retry the shadow run" not in page
    run = ShadowRun.objects.get()
    assert _page(make_user("page-auditor-2", "auditor")).post(f"/shadow-runs/{run.pk}/retry/").status_code == 403


def test_the_reference_pipeline_answers_refusals_for_the_demo(route):
    call_command("create_route", "it-support", "--shadow", "reference")
    [decision_id] = ingest_with_jobs([record(question="How do I reset MFA?", passages=PASSAGES)])
    run = ShadowRun.objects.get(decision_id=decision_id)
    assert run.status == ShadowStatus.SUCCEEDED and (run.pipeline, run.pipeline_version) == (
        "reference",
        "extractive-2",
    )
    assert run.answer == "To reset MFA, open Settings › Security and choose Reset."


def _pipeline_of(slug: str) -> dict:
    return route_shadow_config(Route.objects.get(slug=slug))


def test_create_route_sets_and_validates_the_pipeline(db, capsys):
    call_command("create_route", "billing", "--name", "Billing", "--shadow-url", "https://pipeline.internal/a")
    assert _pipeline_of("billing") == {"kind": "http", "url": "https://pipeline.internal/a"}
    call_command("create_route", "billing", "--shadow", "reference")
    assert _pipeline_of("billing") == {"kind": "reference"}
    assert capsys.readouterr().out.splitlines() == [
        "Created route billing (Billing).",
        "Route billing: shadow pipeline set to {'kind': 'reference'}.",
    ]
    event = AuditEvent.objects.filter(action="shadow_pipeline_set").latest("seq")
    assert event.payload["shadow_config"]["old"]["kind"] == "http"
    assert event.payload["shadow_config"]["new"] == {"kind": "reference"}
    call_command("create_route", "billing", "--shadow", "none")
    assert _pipeline_of("billing") == {}
    assert "shadow pipeline set to none" in capsys.readouterr().out
    with pytest.raises(CommandError, match="http"):
        call_command("create_route", "billing", "--shadow-url", "ftp://files/x")
    with pytest.raises(CommandError, match="--name is required"):
        call_command("create_route", "new-one", "--shadow", "reference")
    with pytest.raises(CommandError):
        call_command("create_route", "billing", "--shadow", "reference", "--shadow-url", "https://x.example")


def test_the_admin_edits_the_pipeline_through_the_audited_service(route):
    admin = make_user("root", "admin")
    admin.is_staff = True
    admin.is_superuser = True
    admin.save()
    browser = _page(admin)
    url = f"/admin/accounts/route/{route.pk}/change/"
    assert browser.get(url).status_code == 200
    bad = browser.post(url, {"shadow_kind": "http", "shadow_url": "javascript:alert(1)"})
    assert bad.status_code == 200 and "Not an http(s) URL" in bad.content.decode()
    response = browser.post(url, {"shadow_kind": "http", "shadow_url": "http://127.0.0.1:9000/answer"})
    assert response.status_code == 302
    assert _pipeline_of(route.slug) == {"kind": "http", "url": "http://127.0.0.1:9000/answer"}
    assert AuditEvent.objects.get(action="shadow_pipeline_set").actor == "user:root"


def test_the_sweeper_opens_runs_for_earlier_refusals_of_a_route_given_a_pipeline(route, settings):
    settings.JOBS_REQUEUE_AFTER_SECONDS = 60
    old, recent = ingest_with_jobs([record(), record()])
    Decision.objects.filter(pk=old).update(ingested_at=timezone.now() - timedelta(minutes=5))
    services.route_shadow_set(actor=ACTOR, route=route, config={"kind": "reference"})
    with run_jobs():
        assert tasks.shadow_runs_sweep.delay().get() == {"opened": 1, "requeued": 0}
    assert ShadowRun.objects.get().decision_id == old and ShadowRun.objects.get().status == "succeeded"


def test_the_sweeper_requeues_lost_and_presumed_dead_runs(route, settings):
    settings.JOBS_REQUEUE_AFTER_SECONDS = 60
    settings.SHADOW_RUN_TIMEOUT_SECONDS = 120
    services.route_shadow_set(actor=ACTOR, route=route, config={"kind": "reference"})
    lost, dead, alive = ingest([record(), record(), record()])
    services.shadow_runs_open(actor=ACTOR, decision_ids=[lost, dead, alive])  # jobs never ran
    long_ago = timezone.now() - timedelta(minutes=10)
    ShadowRun.objects.filter(decision_id=lost).update(queued_at=long_ago)
    ShadowRun.objects.filter(decision_id=dead).update(status="running", attempts=1, started_at=long_ago)
    ShadowRun.objects.filter(decision_id=alive).update(status="running", attempts=1, started_at=timezone.now())
    with run_jobs():
        assert services.shadow_runs_sweep(actor=ACTOR) == {"opened": 0, "requeued": 2}
    runs = {run.decision_id: run for run in ShadowRun.objects.all()}
    assert (runs[lost].status, runs[lost].attempts) == ("succeeded", 1)
    assert (runs[dead].status, runs[dead].attempts) == ("succeeded", 2)
    assert runs[alive].status == "running"
    event = AuditEvent.objects.get(action="shadow_runs_requeued")
    assert event.payload["presumed_dead"] == [runs[dead].pk] and event.payload["lost_in_queue"] == [runs[lost].pk]


def test_a_job_that_lost_its_claim_drops_its_result(route, monkeypatch):
    services.route_shadow_set(actor=ACTOR, route=route, config={"kind": "reference"})
    [decision_id] = ingest([record()])
    [run_id] = services.shadow_runs_open(actor=ACTOR, decision_ids=[decision_id])

    class SlowPipeline:
        name, version = "slow", "1"

        def run(self, request):
            # While this job works, the sweeper presumes it dead and another job takes the run over.
            ShadowRun.objects.filter(pk=run_id).update(status="queued")
            monkeypatch.setattr(services, "pipeline_for", lambda config: ReferencePipeline())
            services.shadow_run_execute(run_id=run_id)
            return "stale answer"

    monkeypatch.setattr(services, "pipeline_for", lambda config: SlowPipeline())
    assert services.shadow_run_execute(run_id=run_id) is None
    run = ShadowRun.objects.get(pk=run_id)
    assert (run.status, run.attempts, run.pipeline) == ("succeeded", 2, "reference")
    assert run.answer != "stale answer"
    assert AuditEvent.objects.filter(action="shadow_run_succeeded").count() == 1


def test_the_detail_page_costs_the_same_queries_with_a_run_and_support(route, django_assert_num_queries):
    services.route_shadow_set(actor=ACTOR, route=route, config={"kind": "reference"})
    [one] = ingest_with_jobs([record(passages=PASSAGES[:1])])
    [many] = ingest_with_jobs([record(passages=[{"id": f"p{i}", "text": f"x{i}.", "rank": i + 1} for i in range(30)])])
    assert ShadowRun.objects.filter(status="succeeded").count() == 2
    browser = _page(make_user("page-reviewer", "reviewer"))
    # The first refusal page a route serves makes its appeal secret (the appeal link's key) once.
    browser.get(f"/decisions/{one}/")
    with django_assert_num_queries(100, exact=False) as first:
        browser.get(f"/decisions/{one}/")
    with django_assert_num_queries(len(first.captured_queries)):
        browser.get(f"/decisions/{many}/")


def test_the_lookup_api_returns_the_shadow_run(route, reviewer):
    services.route_shadow_set(actor=ACTOR, route=route, config={"kind": "reference"})
    [decision_id] = ingest_with_jobs([record(passages=PASSAGES)])
    shown = reviewer.get(f"/api/v1/decisions/{decision_id}").json()["shadow_run"]
    run = ShadowRun.objects.get()
    assert shown["id"] == run.pk and shown["status"] == "succeeded" and shown["answer"] == run.answer
    assert shown["passages_sha256"] == run.passages_sha256 and shown["attempts"] == 1


def test_a_run_id_beyond_the_database_range_is_404_not_500(route, reviewer):
    response = reviewer.post(f"/api/v1/shadow-runs/{10**30}/retry")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
