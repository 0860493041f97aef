"""An after-ingest job stores its question vectors in parts at once, each on a connection of its own
(never the job's, which must hold no lock on the vectors while it waits for them); inside a
transaction, a call stores them through that transaction's connection alone."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from console.similarity.models import QuestionVector
from console.similarity.services import builtin, partitions
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
    # none on the job's own connection (below), each redone by the sweeper when lost, so none waits
    assert all(part["thread"].startswith("vectors-writer") for part in parts)
    assert [part["synchronous_commit"] for part in parts] == ["off", "off"]


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


@pytest.mark.django_db(transaction=True)
def test_a_graph_build_queued_between_two_parts_waits_for_the_first_alone_and_never_for_the_job(monkeypatch, settings):
    """A refit building the partition's graph takes a SHARE lock, which queues behind a part's insert,
    and the next part's insert queues behind it. When the job's own connection stored the first part
    and kept it uncommitted while waiting for the other, the three waited on each other for good
    (the ten-minute stream hung until the job's hard time limit). Here the build gives up after 10 s."""
    version = _fitted(settings)
    partition = f"similarity_questionvector_{version.space_key}"
    first_ids: list[int] = []
    first_stored, build_done = threading.Event(), threading.Event()
    build: dict = {}
    real_store, real_parts = builtin._store, builtin._store_in_parts

    def build_queued(cursor) -> bool:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND relation = %s::regclass)", [partition]
        )
        return cursor.fetchone()[0]

    def store(version_id, rows):
        if rows[0][0] in first_ids:  # the first part, stored at once
            stored = real_store(version_id, rows)
            first_stored.set()
            return stored
        assert first_stored.wait(30)
        with connection.cursor() as cursor:  # the others only once the build waits on the first
            deadline = time.monotonic() + 30
            while not build_done.is_set() and not build_queued(cursor) and time.monotonic() < deadline:
                time.sleep(0.05)
        return real_store(version_id, rows)

    def store_in_parts(version_id, parts):
        first_ids.append(parts[0][0][0])
        return real_parts(version_id, parts)

    def graph_build():
        try:
            assert first_stored.wait(30)
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '10s'")
                # a second graph of the partition, built as a refit builds its version's (rolled back)
                partitions.index_create(
                    name=f"similarity_builtin_v{version.pk + 100_000}_hnsw",
                    dimension=version.dimension,
                    space=version.space_key,
                )
                build["built"] = True
                transaction.set_rollback(True)
        except Exception as error:  # noqa: BLE001 - the test reports what the build met
            build["error"] = repr(error)
        finally:
            build_done.set()
            connection.close()

    monkeypatch.setattr(builtin, "_store", store)
    monkeypatch.setattr(builtin, "_store_in_parts", store_in_parts)
    builder = threading.Thread(target=graph_build)
    builder.start()
    try:
        later = _ingest(_questions(100))  # its after-ingest job runs once the batch commits
    finally:
        builder.join(60)
    assert first_ids
    assert build == {"built": True}
    assert QuestionVector.objects.filter(decision_id__in=later).count() == len(later)
