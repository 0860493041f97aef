"""The after-ingest jobs commit without waiting for the disk, and only their own transaction does."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from console.core import jobs
from console.verification import services as verification
from console.verification.models import DecisionSupport, SpanCheck
from grading.services import pool
from tests.factories import TEST_ACTOR, ingest, make_route, record


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_jobs_own_transaction_commits_without_waiting_and_a_nested_one_keeps_the_wait():
    with transaction.atomic():
        jobs.commit_without_waiting()
        assert _synchronous_commit() == "off"
    assert _synchronous_commit() == "on"  # SET LOCAL: the next transaction waits again
    with transaction.atomic(), transaction.atomic():
        jobs.commit_without_waiting()  # a request's transaction around it: its writes keep their wait
        assert _synchronous_commit() == "on"


@pytest.mark.django_db(transaction=True)
def test_span_checks_and_pool_entry_ask_for_it(monkeypatch):
    make_route("it-support")
    ids = ingest([record()])
    # The after-ingest jobs ran eagerly on commit and verified the decision; a verified decision is
    # skipped before any transaction opens, so its results are removed for this call to write them.
    SpanCheck.objects.filter(decision_id__in=ids).delete()
    DecisionSupport.objects.filter(decision_id__in=ids).delete()
    seen = []
    real = jobs.commit_without_waiting

    def spy():
        real()
        seen.append(_synchronous_commit())

    monkeypatch.setattr(verification, "commit_without_waiting", spy)
    monkeypatch.setattr(pool, "commit_without_waiting", spy)
    verification.decisions_verify(actor=TEST_ACTOR, decision_ids=ids)
    pool.grading_pool_enter(actor=TEST_ACTOR, decision_ids=ids)
    assert seen == ["off", "off"]
