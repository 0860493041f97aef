import random
import threading
import time

import pytest
from django.db import connection, transaction

from console.core.errors import Conflict
from console.ledger import services
from console.ledger.models import Decision, Passage, PassageOrigin, uri_split
from console.ledger.validation import validate_batch
from tests.factories import TEST_ACTOR, ingest, make_route, record


def _links() -> int:
    """The ranked passages stored, over every decision."""
    return sum(len(ids) for ids in Decision.objects.values_list("passage_ids", flat=True))


def _write(records):
    items, errors = validate_batch(records)
    assert not errors
    routes, _ = services.routes_for_items(items)
    return services.decision_ingest(actor=TEST_ACTOR, items=items, routes=routes)


def _stale_reads(monkeypatch):
    """Make the first existence check miss what is stored, as a concurrent batch would."""
    real = services._existing_hashes
    calls = []

    def stale(items, routes):
        calls.append(len(items))
        return {} if len(calls) == 1 else real(items, routes)

    monkeypatch.setattr(services, "_existing_hashes", stale)
    return calls


def test_a_batch_that_lost_a_race_counts_the_winners_rows_as_unchanged(route, monkeypatch):
    stored = record()
    ingest([stored])
    calls = _stale_reads(monkeypatch)
    result = _write([stored, record()])
    assert (result.created, result.unchanged) == (1, 1)
    assert len(calls) == 2
    assert Decision.objects.count() == 2


def test_a_batch_that_lost_a_race_with_different_content_is_a_conflict(route, monkeypatch):
    stored = record()
    ingest([stored])
    _stale_reads(monkeypatch)
    fresh = record()
    with pytest.raises(Conflict):
        _write([fresh, dict(stored, claim="different")])
    assert not Decision.objects.filter(request_id=fresh["request_id"]).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_batches_store_each_decision_once():
    make_route("it-support")
    batch = [record() for _ in range(50)]
    results, errors = [], []
    barrier = threading.Barrier(3)

    def client():
        try:
            barrier.wait()
            results.append(_write(batch))
        except Exception as exc:  # pragma: no cover - reported by the assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=client) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(r.created for r in results) == 50
    assert sum(r.unchanged for r in results) == 100
    assert Decision.objects.count() == 50
    assert _links() == 100


def _overlapping_batches(clients: int, batches: int, size: int, shared: int, seed: int = 7) -> list[list[list[dict]]]:
    """Per client, batches of fresh decisions whose passages overlap as retrieval does: two of
    each decision's five passages come from a pool of popular chunks, in any order. Each round
    of batches brings its own pool, so every round has clients racing to store the same chunks."""
    rng = random.Random(seed)
    filler = "Long enough that a batch streams to the database in many pieces. " * 30
    plan: list[list[list[dict]]] = [[] for _ in range(clients)]
    for batch in range(batches):
        pool = [
            {
                "id": f"kb/popular/{batch}#{n}",
                "text": f"Popular chunk {batch}/{n} about resetting things.",
                "source": "kb",
                "uri": f"https://intranet/kb/popular/{batch}/{n}",
            }
            for n in range(shared)
        ]
        for client in range(clients):
            records = []
            for n in range(size):
                own = [
                    {
                        "id": f"kb/c{client}b{batch}d{n}p{k}",
                        "source": "kb",
                        "uri": "",
                        "text": f"Unique passage {client}/{batch}/{n}/{k}. {filler}",
                    }
                    for k in range(3)
                ]
                passages = own + [dict(p) for p in rng.sample(pool, 2)]
                rng.shuffle(passages)
                for rank, passage in enumerate(passages, start=1):
                    passage.update(rank=rank, retrieval_score=round(rng.random(), 3))
                records.append(record(passages=passages))
            plan[client].append(records)
    return plan


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_sharing_popular_passages_all_succeed(monkeypatch):
    make_route("it-support")
    # The after-ingest jobs (span checks, shadow runs) would run inline here and are not what races.
    monkeypatch.setattr(services, "queue_after_ingest", lambda decision_ids: None)
    clients, batches, size, shared = 4, 8, 60, 40
    plan = _overlapping_batches(clients, batches, size, shared)
    results, errors = [], []
    barrier = threading.Barrier(clients)

    def client(batches_of_client):
        try:
            barrier.wait()
            for batch in batches_of_client:
                results.append(_write(batch))
        except Exception as exc:  # reported by the assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(plan[c],)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    total = clients * batches * size
    assert sum(r.created for r in results) == total
    assert Decision.objects.count() == total
    assert _links() == total * 5
    assert Passage.objects.count() == total * 3 + batches * shared


def _stored_fields(passage, route) -> dict:
    """A validated passage's columns as ingest stores them, with its origin stored (committed)
    first: the holding transaction then holds the passage alone."""
    uri_prefix, stored_uri = uri_split(passage.uri, passage.external_id)
    return {
        "external_id": passage.external_id,
        "text": passage.text,
        "stored_uri": stored_uri,
        "content_key": passage.content_key,
        "origin": PassageOrigin.of(route.pk, "snap-2026-11-01", passage.source, uri_prefix),
    }


def _passage(name: str, rank: int) -> dict:
    return {"id": f"kb/{name}", "text": f"Chunk {name}.", "rank": rank, "source": "kb", "uri": ""}


def _waiting_backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_two_batches_naming_the_same_new_passages_in_opposite_orders_do_not_deadlock():
    """A third transaction holds chunk Z; one batch logs A, Z, B and the other B, Z, A. Both wait
    on Z; once Z is free, inserting in arrival order would make each wait for the other's first
    chunk (PostgreSQL's deadlock). Stored in one order (by content key) they simply queue."""
    route = make_route("it-support")
    first = [record(passages=[_passage("A", 1), _passage("Z", 2), _passage("B", 3)])]
    second = [record(passages=[_passage("B", 1), _passage("Z", 2), _passage("A", 3)])]
    [z] = [p for p in validate_batch(first)[0][0].passages if p.external_id == "kb/Z"]
    holding, errors, results = threading.Event(), [], []

    def hold_z():
        try:
            fields = _stored_fields(z, route)
            with transaction.atomic():
                Passage.objects.create(**fields)
                holding.set()
                deadline = time.monotonic() + 20
                while _waiting_backends() < 2 and time.monotonic() < deadline:
                    time.sleep(0.02)
                raise _Release
        except _Release:
            pass
        finally:
            connection.close()

    def client(batch):
        try:
            holding.wait(10)
            results.append(_write(batch))
        except Exception as exc:  # reported by the assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=hold_z)] + [threading.Thread(target=client, args=(b,)) for b in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sorted(r.created for r in results) == [1, 1]
    assert Passage.objects.count() == 3


class _Release(Exception):
    """Rolls the holding transaction back."""


def _written_behind(hold, batch) -> tuple:
    """Write `batch` while another transaction holds what `hold()` inserted, open until a backend
    waits on it (at most 20 s), then committed: (what `hold` returned, whether a backend waited,
    the write's result)."""
    holding, errors, results = threading.Event(), [], {}

    def holder():
        try:
            with transaction.atomic():
                results["held"] = hold()
                holding.set()
                deadline = time.monotonic() + 20
                while _waiting_backends() < 1 and time.monotonic() < deadline:
                    time.sleep(0.02)
                results["waited"] = _waiting_backends() > 0
        finally:
            connection.close()

    def client():
        try:
            holding.wait(10)
            results["written"] = _write(batch)
        except Exception as exc:  # reported by the assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=holder), threading.Thread(target=client)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    return results["held"], results["waited"], results["written"]


@pytest.mark.django_db(transaction=True)
def test_a_batch_waiting_on_a_passage_that_another_transaction_commits_links_to_that_row():
    """The content key's constraint (an exclusion constraint, ledger migration 0023) makes the
    batch wait for the transaction inserting the same key, then skip it and link the stored row."""
    route = make_route("it-support")
    batch = [record(passages=[_passage("A", 1), _passage("Z", 2)])]
    [z] = [p for p in validate_batch(batch)[0][0].passages if p.external_id == "kb/Z"]
    fields = _stored_fields(z, route)

    held, waited, written = _written_behind(lambda: Passage.objects.create(**fields).pk, batch)

    assert waited and written.created == 1
    assert Passage.objects.filter(external_id="kb/Z").count() == 1
    assert sum(ids.count(held) for ids in Decision.objects.values_list("passage_ids", flat=True)) == 1


@pytest.mark.django_db(transaction=True)
def test_a_deadlock_is_retried_inside_the_service(monkeypatch):
    import psycopg
    from django.db import OperationalError

    make_route("it-support")
    real, calls = services._ingest_once, []

    def deadlocks_once(*args):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("deadlock detected") from psycopg.errors.DeadlockDetected("deadlock detected")
        return real(*args)

    monkeypatch.setattr(services, "_ingest_once", deadlocks_once)
    result = _write([record()])
    assert (result.created, len(calls)) == (1, 2)


@pytest.mark.django_db(transaction=True)
def test_other_operational_errors_are_not_retried(monkeypatch):
    from django.db import OperationalError

    make_route("it-support")
    calls = []

    def fails(*args):
        calls.append(1)
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services, "_ingest_once", fails)
    with pytest.raises(OperationalError):
        _write([record()])
    assert len(calls) == 1


@pytest.mark.django_db(transaction=True)
def test_a_batch_waiting_on_an_origin_another_transaction_commits_uses_that_row():
    """A batch's new origins go in with ON CONFLICT DO NOTHING, and its passages join the origins
    in the next statement, which sees a row a concurrent batch committed while this one waited."""
    route = make_route("it-support")
    passages = [
        {"id": "kb/vpn#1", "text": "Install the VPN.", "rank": 1, "source": "kb", "uri": "https://intranet/kb/vpn#1"},
        {"id": "kb/mfa#2", "text": "Reset MFA.", "rank": 2, "source": "kb", "uri": "https://intranet/kb/mfa#2"},
    ]
    batch = [record(passages=passages)]
    corpus = batch[0]["versions"]["corpus"]

    held, waited, written = _written_behind(
        lambda: PassageOrigin.of(route.pk, corpus, "kb", "https://intranet/").pk, batch
    )

    assert waited and written.created == 1
    assert PassageOrigin.objects.count() == 1
    assert set(Passage.objects.values_list("origin_id", flat=True)) == {held}
