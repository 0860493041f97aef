"""One Celery queue per kind of work: every task is routed to a named queue, and a worker that
consumes only the verification queue checks decisions while the shadow queue is backed up."""

import os
from pathlib import Path

import pytest

from console.celery import app
from console.core.queues import GRADABLE_PATH_QUEUES, QUEUE_OF_PREFIX, QUEUE_OF_TASK, QUEUES, queue_for
from console.run import worker_commands, worker_environments
from console.verification.models import DecisionSupport
from grading.models import GradingItem
from tests.factories import ingest, make_route, served_record
from tests.jobs.conftest import wait_for


def _registered_tasks() -> list[str]:
    app.loader.import_default_modules()
    return sorted(name for name in app.tasks if not name.startswith("celery."))


def test_every_registered_task_is_routed_to_a_named_queue():
    names = _registered_tasks()
    assert {
        "grading.grading_pool_sweep",
        "shadow.shadow_run_execute",
        "verification.decisions_verify",
        "analysis.stats_recompute",
        "notify.notification_deliver",
        "audit.audit_checkpoint",
    } <= set(names)
    for name in names:
        # What Celery itself would publish to, not our own reading of the routes.
        queue = app.amqp.router.route({}, name)["queue"].name
        assert queue in QUEUES, f"{name} goes to {queue!r}, which no worker consumes"
        assert queue == QUEUE_OF_TASK.get(name, QUEUE_OF_PREFIX[name.split(".")[0]]) == queue_for(name)


def test_the_kinds_of_work_have_their_own_queues():
    assert {"verification", "shadow", "pool", "statistics", "notifications", "monitoring"} <= set(QUEUES)
    assert (
        len(
            {
                app.amqp.router.route({}, name)["queue"].name
                for name in (
                    "grading.grading_pool_sweep",
                    "shadow.shadow_run_execute",
                    "verification.decisions_verify",
                    "analysis.stats_recompute",
                )
            }
        )
        == 4
    )


def _queues_of(command: list[str]) -> list[str]:
    return command[command.index("-Q") + 1].split(",")


def test_make_run_workers_consume_every_queue_once_with_the_gradable_path_and_trials_on_their_own(tmp_path):
    gradable, background, trials = worker_commands(tmp_path)
    assert sorted(_queues_of(gradable) + _queues_of(background) + _queues_of(trials)) == sorted(QUEUES)
    assert set(_queues_of(gradable)) == set(GRADABLE_PATH_QUEUES) == {"verification", "pool"}
    # a slow candidate gate can hold only the trial worker, never notifications or escalations; an
    # embedder refit holds that worker too, never the one that makes fresh question vectors
    assert _queues_of(trials) == ["trials", "refits"]
    assert "similarity" in _queues_of(background)
    assert {"notifications", "disputes", "monitoring"} <= set(_queues_of(background))
    # beat runs once, on the worker that does not carry the ingest path
    assert "--beat" in background and "--beat" not in gradable and "--beat" not in trials
    hostnames = {command[command.index("--hostname") + 1] for command in (gradable, background, trials)}
    assert len(hostnames) == 3


def test_a_trial_job_is_published_to_a_queue_that_no_escalation_webhook_or_checkpoint_shares(live_broker, tmp_path):
    """As Celery publishes them (to the embedded Redis, no worker): a trial's job lands on the trials
    queue alone, and the worker `make run` gives that queue consumes nothing else, so a candidate
    gate that drips or never answers holds only that worker; the escalation clock, webhook and email
    deliveries and the audit checkpoint land on queues the background worker takes."""
    from audit.tasks import audit_checkpoint
    from console.disputes.tasks import disputes_escalate
    from console.notify.tasks import notification_deliver
    from console.trials.tasks import trial_advance

    trial_advance.delay(1)
    others = {
        "escalation": disputes_escalate.delay,
        "delivery": lambda: notification_deliver.delay(1),
        "checkpoint": audit_checkpoint.delay,
    }
    landed = {}
    for what, publish in others.items():
        before = {queue: live_broker.client.llen(queue) for queue in (*QUEUES, "celery")}
        publish()
        (landed[what],) = [q for q in before if live_broker.client.llen(q) == before[q] + 1]
    assert live_broker.client.llen("trials") == 1  # the trial's job, and nothing else went there
    assert "trials" not in landed.values()
    _gradable, background, trials = worker_commands(tmp_path)
    assert not set(landed.values()) & set(_queues_of(trials))
    assert set(landed.values()) <= set(_queues_of(background))


def test_a_refit_is_published_where_fresh_vectors_never_wait_behind_it(live_broker, tmp_path):
    """As Celery publishes them: a refit (which re-embeds every question of its route, a minute and
    more) lands on a queue of its own, taken by the trials' worker; the vectors of newly ingested
    decisions land on the similarity queue, taken by the background worker."""
    from console.similarity.tasks import embedder_fit, vectors_embed

    embedder_fit.delay(1)
    vectors_embed.delay([1, 2])
    assert (live_broker.client.llen("refits"), live_broker.client.llen("similarity")) == (1, 1)
    _gradable, background, trials = worker_commands(tmp_path)
    assert "refits" in _queues_of(trials) and "refits" not in _queues_of(background)
    assert "similarity" in _queues_of(background) and "similarity" not in _queues_of(trials)


@pytest.mark.django_db(transaction=True)
def test_span_checks_are_not_starved_by_a_backed_up_shadow_queue(start_worker, live_broker):
    make_route("it-support", "IT support")
    for run_id in range(50):  # shadow work nobody is consuming
        app.send_task("shadow.shadow_run_execute", args=[10_000_000 + run_id])
    assert live_broker.client.llen("shadow") == 50
    start_worker(queues=("verification",))
    [decision_id] = ingest([served_record()])
    assert GradingItem.objects.filter(decision_id=decision_id).exists()  # entered with the batch, no worker
    wait_for(lambda: DecisionSupport.objects.filter(decision_id=decision_id, status="done").exists(), what="checks")
    assert live_broker.client.llen("shadow") >= 50  # still waiting: the verification worker took none


def test_make_run_lowers_the_cpu_priority_of_trials_and_refits_only(monkeypatch):
    # Fresh question vectors run on the background worker: at a lower priority they fell behind a
    # stream of ingest; refits, which take a core for minutes, run lower on the trials' worker.
    monkeypatch.delenv("CELERY_BACKGROUND_NICE", raising=False)
    monkeypatch.delenv("CELERY_TRIALS_NICE", raising=False)
    gradable, background, trials = worker_environments()
    assert "CELERY_WORKER_NICE" not in gradable and "CELERY_WORKER_NICE" not in background
    assert trials["CELERY_WORKER_NICE"] == "10"
    monkeypatch.setenv("CELERY_BACKGROUND_NICE", "5")
    monkeypatch.setenv("CELERY_TRIALS_NICE", "0")
    gradable, background, trials = worker_environments()
    assert background["CELERY_WORKER_NICE"] == "5"
    assert "CELERY_WORKER_NICE" not in gradable and "CELERY_WORKER_NICE" not in trials


@pytest.mark.django_db(transaction=True)
def test_a_worker_told_to_be_nice_runs_its_pool_at_that_priority(start_worker):
    worker = start_worker(pool="prefork", concurrency=1, queues=("similarity",), CELERY_WORKER_NICE="7")
    pid = worker.process.pid
    children = [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    assert children, "the prefork pool has a child"
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    for process in [pid, *children]:
        assert os.getpriority(os.PRIO_PROCESS, process) == min(mine + 7, 19)


def test_the_worker_builds_the_verifier_tables_before_forking_its_pool():
    from celery.signals import worker_init

    from console.verification import tasks
    from console.verification.folding import fold_tables

    assert tasks._fold_tables_before_fork in [receiver() for _, receiver in worker_init.receivers]
    fold_tables.cache_clear()
    tasks._fold_tables_before_fork()
    assert fold_tables.cache_info().currsize == 1
