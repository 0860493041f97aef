"""Exactly one call per (trial, item, repeat): two jobs at once, a job delivered twice, a lost worker."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import Actor
from console.trials import services
from console.trials.models import CallErrorKind, CallStatus, Trial, TrialCall, TrialStatus
from console.trials.validation import trial_spec
from tests.factories import make_user
from tests.trials.conftest import graded_items
from tests.trials.standin import StandInCandidate


def _trial_without_jobs(route, url: str, monkeypatch, repeats: int = 3) -> Trial:
    monkeypatch.setattr(services, "enqueue", lambda *args, **kwargs: None)
    user = make_user("rev-once", "reviewer")
    spec = trial_spec({"name": "c", "url": url, "timeout_s": 2, "repeats": repeats})
    return services.trial_start(actor=Actor.user(user), user=user, route=route, spec=spec)


@pytest.mark.django_db(transaction=True)
def test_two_jobs_running_at_once_never_call_twice_for_one_item_and_repeat(route, monkeypatch):
    items = graded_items([(True, 0.9)] * 12)
    with StandInCandidate({}, delay=0.02) as standin:
        trial = _trial_without_jobs(route, standin.url, monkeypatch)
        made: list[int] = []

        def work() -> None:
            try:
                made.append(services.trial_advance(trial_id=trial.pk))
            finally:
                connection.close()

        threads = [threading.Thread(target=work) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        # A copy of the job delivered again after the others finished finds nothing to do.
        assert services.trial_advance(trial_id=trial.pk) == 0
        calls = standin.calls_per_request()
    assert sum(made) == 36 and all(n > 0 for n in made), made  # the jobs really shared the work
    assert calls == {item.request_id: 3 for item in items}
    trial.refresh_from_db()
    assert trial.status == TrialStatus.DONE
    assert AuditEvent.objects.filter(action="trial_finished", object_id=str(trial.pk)).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_call_left_by_a_dead_worker_is_marked_lost_and_never_made_again(route, monkeypatch):
    graded_items([(True, 0.9)] * 3)
    with StandInCandidate({}) as standin:
        trial = _trial_without_jobs(route, standin.url, monkeypatch, repeats=2)
        # A worker claimed this call and died before saving its result.
        lost = TrialCall.objects.filter(trial=trial).order_by("pk").first()
        TrialCall.objects.filter(pk=lost.pk).update(
            status=CallStatus.CALLING, claimed_at=timezone.now() - timedelta(seconds=5)
        )
        # Younger than timeout + grace: the sweeper leaves it alone, the trial waits.
        services.trial_advance(trial_id=trial.pk)
        trial.refresh_from_db()
        assert trial.status == TrialStatus.RUNNING and len(standin.bodies) == 5
        TrialCall.objects.filter(pk=lost.pk).update(claimed_at=timezone.now() - timedelta(minutes=5))
        assert services.trials_sweep()["lost"] == 1
        assert len(standin.bodies) == 5
    lost.refresh_from_db()
    assert lost.status == CallStatus.ERROR and lost.error_kind == CallErrorKind.WORKER_LOST
    assert lost.error.startswith("worker lost")
    trial.refresh_from_db()
    assert trial.status == TrialStatus.DONE
    doc = services.selectors.trial_as_dict(trial)
    assert doc["calls"] == {"made": 6, "errors": 1, "total": 6}


@pytest.mark.django_db(transaction=True)
def test_a_result_arriving_after_the_call_was_marked_lost_is_dropped(route, monkeypatch):
    graded_items([(True, 0.9)])
    with StandInCandidate({}) as standin:
        trial = _trial_without_jobs(route, standin.url, monkeypatch, repeats=1)
        call = TrialCall.objects.get(trial=trial)
        TrialCall.objects.filter(pk=call.pk).update(status=CallStatus.ERROR, error_kind=CallErrorKind.WORKER_LOST)
        trial = Trial.objects.select_related("candidate", "route").get(pk=trial.pk)
        services._make_call(trial, call.pk)
    call.refresh_from_db()
    assert call.status == CallStatus.ERROR and call.verdict == ""


def test_the_database_refuses_a_second_row_for_one_item_and_repeat(route, monkeypatch):
    from django.db import IntegrityError, transaction

    graded_items([(True, 0.9)])
    trial = _trial_without_jobs(route, "http://127.0.0.1:9/", monkeypatch, repeats=1)
    call = TrialCall.objects.get(trial=trial)
    with pytest.raises(IntegrityError), transaction.atomic():
        TrialCall.objects.create(trial=trial, decision_id=call.decision_id, repeat=1)
