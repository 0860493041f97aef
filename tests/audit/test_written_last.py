"""audit_written_last: a transaction's events join the chain when its block ends, in the order
recorded, and until then the chain's lock is free for every other writer."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from audit.models import Action, AuditEvent
from audit.selectors import audit_chain_verify
from audit.services import Actor, audit_record, audit_written_last
from tests.factories import ingest, record

ACTOR = Actor.system("test")


def _record(n: int) -> AuditEvent:
    return audit_record(actor=ACTOR, action=Action.ROUTE_UPDATED, object_type="route", object_id=n, payload={"n": n})


@pytest.mark.django_db
def test_events_recorded_in_the_block_are_appended_at_its_end_in_order():
    _record(0)
    with transaction.atomic():
        with audit_written_last():
            first, second = _record(1), _record(2)
            with audit_written_last():  # an inner block is the outer block's
                third = _record(3)
            assert AuditEvent.objects.count() == 1  # nothing appended yet
            assert first.seq is None
        assert [first.seq, second.seq, third.seq] == [2, 3, 4]
    events = list(AuditEvent.objects.order_by("seq"))
    assert [e.object_id for e in events] == ["0", "1", "2", "3"]
    assert [e.hash for e in events[1:]] == [first.hash, second.hash, third.hash]
    assert first.payload == {"n": 1}
    assert audit_chain_verify()["ok"] is True


@pytest.mark.django_db
def test_an_exception_out_of_the_block_appends_nothing_and_the_next_block_starts_empty():
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        with audit_written_last():
            _record(1)
            raise ZeroDivisionError
    with transaction.atomic(), audit_written_last():
        _record(2)
    assert list(AuditEvent.objects.values_list("object_id", flat=True)) == ["2"]
    assert audit_chain_verify()["ok"] is True


@pytest.mark.django_db(transaction=True)  # no transaction around the test, so none around the block
def test_the_block_needs_a_transaction():
    with pytest.raises(RuntimeError, match="transaction of the change"), audit_written_last():
        pass  # pragma: no cover - never entered


@pytest.mark.django_db(transaction=True)
def test_another_writer_appends_while_a_block_is_open_and_the_chain_holds_both():
    """The lock is taken when the block appends: a transaction that has recorded its event and is
    still working does not hold up another writer, as one that appended first does."""
    appended = threading.Event()
    errors = []

    def other_writer():
        try:
            with transaction.atomic():
                _record(100)
            appended.set()
        except Exception as exc:  # pragma: no cover - surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    with transaction.atomic():
        with audit_written_last():
            _record(1)
            thread = threading.Thread(target=other_writer)
            thread.start()
            # The other writer gets the lock and commits while this transaction is still open.
            assert appended.wait(timeout=20)
        mine = AuditEvent.objects.get(object_id="1")
    thread.join()

    assert not errors
    assert mine.seq == 2  # after the other writer's event, which was appended first
    assert list(AuditEvent.objects.order_by("seq").values_list("object_id", flat=True)) == ["100", "1"]
    assert audit_chain_verify()["ok"] is True


@pytest.mark.django_db
def test_an_ingest_batch_appends_its_decisions_event_before_its_pool_entry():
    from tests.factories import make_route

    make_route("it-support")
    ingest([record(), record()])
    actions = list(AuditEvent.objects.order_by("seq").values_list("action", flat=True))
    assert actions.index(Action.DECISIONS_INGESTED) < actions.index(Action.POOL_ENTERED)
    assert audit_chain_verify()["ok"] is True
