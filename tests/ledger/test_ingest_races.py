import threading

import pytest
from django.db import connection

from console.core.errors import Conflict
from console.ledger import services
from console.ledger.models import Decision, DecisionPassage
from console.ledger.validation import validate_batch
from tests.factories import TEST_ACTOR, ingest, make_route, record


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
    assert DecisionPassage.objects.count() == 100
