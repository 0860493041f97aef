"""A gate trial on real Celery workers: the worker is SIGKILLed while the candidate holds a call."""

import time
from collections import Counter

import pytest

from audit.models import AuditEvent
from audit.selectors import audit_chain_verify
from audit.services import Actor
from console.trials import services
from console.trials.models import CallErrorKind, Trial, TrialCall
from console.trials.validation import trial_spec
from tests.factories import make_route, make_user
from tests.jobs.conftest import wait_for
from tests.trials.conftest import graded_items
from tests.trials.standin import StandInCandidate

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_killed_mid_trial_never_calls_twice_for_one_item_and_repeat(start_worker):
    route = make_route("it-support", "IT support")
    items = graded_items([(True, 0.9), (False, 0.4), (True, 0.8)])
    with StandInCandidate({}, hold_first=True) as standin:
        first = start_worker()
        user = make_user("rev-worker", "reviewer")
        spec = trial_spec({"name": "held", "url": standin.url, "timeout_s": 1, "repeats": 2})
        trial = services.trial_start(actor=Actor.user(user), user=user, route=route, spec=spec)  # commits, queues
        assert standin.received.wait(30), "the worker never called the candidate"
        first.kill()  # mid-call: the candidate has the request, the worker is gone
        standin.release.set()
        time.sleep(0.5)
        assert TrialCall.objects.filter(trial=trial, status="calling").count() == 1

        # A new worker with beat: the sweeper marks the held call lost and queues the rest.
        start_worker(beat=True, JOBS_SWEEP_SECONDS=1, TRIALS_LOST_GRACE_SECONDS=1)
        wait_for(
            lambda: Trial.objects.filter(pk=trial.pk, status="done").exists(), timeout=60, what="the trial to finish"
        )
        time.sleep(2.5)  # a few more sweeps: nothing is called again
        calls = Counter(body["request_id"] for body in standin.bodies)

    assert calls == {item.request_id: 2 for item in items}  # 3 items x 2 repeats, each exactly once
    lost = TrialCall.objects.get(trial=trial, status="error")
    assert lost.error_kind == CallErrorKind.WORKER_LOST
    assert TrialCall.objects.filter(trial=trial, status="done").count() == 5
    assert AuditEvent.objects.filter(action="trial_finished", object_id=str(trial.pk)).count() == 1
    assert AuditEvent.objects.filter(action="trial_calls_lost", object_id=str(trial.pk)).count() == 1
    assert audit_chain_verify()["ok"]
