"""An after-ingest job stores its question vectors in parts at once, each on a connection of its own;
inside a transaction, a call stores them through that transaction's connection alone."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from console.similarity.models import QuestionVector
from console.similarity.services import builtin
from tests import factories
from tests.similarity.test_embedder import _ingest, _questions


def _spied_stores(monkeypatch) -> list[dict]:
    """Every part `builtin._store` writes: the thread, the backend, the rows, and whether its commit
    waits for the disk."""
    seen: list[dict] = []
    real = builtin._store

    def spy(version_id, rows):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid(), current_setting('synchronous_commit')")
            pid, synchronous = cursor.fetchone()
        seen.append(
            {
                "thread": threading.current_thread().name,
                "pid": pid,
                "ids": [row[0] for row in rows],
                "synchronous_commit": synchronous,
            }
        )
        return real(version_id, rows)

    monkeypatch.setattr(builtin, "_store", spy)
    return seen


def _fitted(settings):
    """Two parts a job; a route of 660 questions with a current version, which the 600 that tests
    add next do not double (no refit)."""
    settings.SIMILARITY_EMBED_WRITERS = 2
    route_id = factories.make_route().pk
    _ingest(_questions(110))
    return builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route_id)


@pytest.mark.django_db(transaction=True)
def test_a_jobs_vectors_are_stored_in_parts_at_once_each_on_its_own_connection(monkeypatch, settings):
    version = _fitted(settings)
    seen = _spied_stores(monkeypatch)
    later = _ingest(_questions(100))  # 600 decisions, committed: a job's, as after a real ingest

    builtin.vectors_embed(decision_ids=later)

    vectors = QuestionVector.objects.filter(decision_id__in=later)
    assert vectors.count() == len(later)
    assert set(vectors.values_list("embedder_id", flat=True)) == {version.pk}
    parts = [part for part in seen if part["ids"]]
    assert len(parts) == 2 and len({part["pid"] for part in parts}) == 2
    assert sorted(id_ for part in parts for id_ in part["ids"]) == sorted(later)
    # every other row, in decision order, so each part holds its share of the refusals
    for part in parts:
        assert part["ids"] == sorted(part["ids"]) and len(part["ids"]) == len(later) // 2
    assert sorted(part["thread"].startswith("vectors-writer") for part in parts) == [False, True]
    # the part on a connection of its own is redone by the sweeper when lost, so it does not wait
    assert [part["synchronous_commit"] for part in parts if part["thread"].startswith("vectors-writer")] == ["off"]


@pytest.mark.django_db(transaction=True)
def test_a_job_below_two_parts_worth_of_rows_stores_them_as_one(monkeypatch, settings):
    _fitted(settings)
    seen = _spied_stores(monkeypatch)
    later = _ingest(_questions(50))  # 300 decisions: one part's worth

    builtin.vectors_embed(decision_ids=later)

    assert QuestionVector.objects.filter(decision_id__in=later).count() == len(later)
    assert [(part["thread"], len(part["ids"])) for part in seen if part["ids"]] == [
        (threading.current_thread().name, len(later))
    ]


@pytest.mark.django_db
def test_inside_a_transaction_the_vectors_go_through_its_connection_alone(monkeypatch, settings):
    _fitted(settings)  # another connection could not see the decisions this transaction writes
    seen = _spied_stores(monkeypatch)
    later = _ingest(_questions(100))

    assert builtin.vectors_embed(decision_ids=later) == len(later)

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (own,) = cursor.fetchone()
    assert {(part["thread"], part["pid"]) for part in seen if part["ids"]} == {(threading.current_thread().name, own)}
