"""A broker that accepts connections but never answers (Redis stopped with SIGSTOP) must not hold
up ingest: the decisions are stored before anything is published, and the sweepers queue the
work later. A real embedded Redis is started for this, paused, and resumed afterwards."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from django.db import connections

from console import embedded
from console.celery import app
from console.core import jobs
from console.ledger.models import Decision
from tests.factories import record

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# "A few seconds": the publish gives up quickly, and the batch's other jobs are not tried again.
ANSWER_WITHIN = 5.0


@pytest.fixture
def paused_broker(tmp_path, integrator):
    """A broker that answered a first batch (so the app is warm and holds a pooled connection to
    it), then was paused."""
    process = embedded.start_redis(tmp_path)
    previous = app.conf.broker_url, app.conf.task_always_eager
    _forget_connections()
    app.conf.broker_url = embedded.redis_url(tmp_path)
    app.conf.task_always_eager = False
    jobs.broker_recovered()
    try:
        warm = integrator.post("/api/v1/decisions", {"decisions": [record()]}, format="json")
        assert warm.status_code == 201, warm.content
        os.kill(process.pid, signal.SIGSTOP)
        yield process
    finally:
        os.kill(process.pid, signal.SIGCONT)
        _forget_connections()
        app.conf.broker_url, app.conf.task_always_eager = previous
        jobs.broker_recovered()
        embedded.stop_process(process)


def _forget_connections() -> None:
    """Drop pooled broker connections, so the next publish connects to the broker now configured."""
    app.pool.force_close_all()
    app._pool = None
    app.amqp._producer_pool = None


def _post_in_thread(client, records):
    outcome = {}

    def post():
        started = time.monotonic()
        try:
            outcome["response"] = client.post("/api/v1/decisions", {"decisions": records}, format="json")
            outcome["seconds"] = time.monotonic() - started
        finally:
            # The thread's own database connection: the test client leaves it open, and left to
            # garbage collection it can outlive the session and block dropping the test database.
            connections.close_all()

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread, outcome


def test_ingest_answers_quickly_while_the_broker_is_paused(integrator, paused_broker):
    thread, outcome = _post_in_thread(integrator, [record(), record()])
    thread.join(ANSWER_WITHIN + 5)  # bounded, so a hang fails the test instead of stalling the run
    assert not thread.is_alive(), "ingest still waiting on the paused broker"
    assert outcome["response"].status_code == 201, outcome["response"].content
    assert outcome["seconds"] < ANSWER_WITHIN
    assert Decision.objects.count() == 3  # the warm-up batch and these two


def test_later_requests_do_not_wait_on_the_broker_again_for_a_while(integrator, paused_broker):
    first, _ = _post_in_thread(integrator, [record()])
    first.join(ANSWER_WITHIN + 5)
    started = time.monotonic()
    response = integrator.post("/api/v1/decisions", {"decisions": [record()]}, format="json")
    assert response.status_code == 201
    assert time.monotonic() - started < 1.0
