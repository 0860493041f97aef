"""The database accepts an audit row only if it chains onto the head (audit migration 0009): a row
written past the console's writer, with a wrong seq, link, scheme, payload or hash, is refused, so one
bad INSERT can no longer break verification and stop checkpoint signing."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from audit.chain import GENESIS_HASH, canonical_payload, event_hash_jcs
from audit.models import Action, AuditEvent
from audit.selectors import audit_chain_verify
from audit.services import Actor, audit_record

COLUMNS = "seq, at, actor, action, object_type, object_id, payload, payload_text, hash_scheme, route, prev_hash, hash"


def _head() -> tuple[int, str]:
    last = AuditEvent.objects.order_by("-seq").values_list("seq", "hash").first()
    return last or (0, GENESIS_HASH)


def _row(**changes) -> dict:
    seq, prev_hash = _head()
    payload = changes.pop(
        "payload", {"name": "it-support", "note": 'quote " backslash \\ tab \t nul-free \u2028 \U0001f600'}
    )
    text = canonical_payload(payload)
    fields = dict(
        seq=seq + 1,
        at=timezone.now(),
        actor="system:forger",
        action="route_updated",
        object_type="route",
        object_id="1",
        prev_hash=prev_hash,
        route="it-support",
    )
    row = dict(fields, payload=text, payload_text=text, hash_scheme=2, hash=event_hash_jcs(payload_text=text, **fields))
    row.update(changes)
    return row


def _insert(row: dict) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO audit_auditevent ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s)",
            [row[c.strip()] for c in COLUMNS.split(",")],
        )


@pytest.fixture
def trail(db):
    with transaction.atomic():
        for i in range(3):
            audit_record(actor=Actor.system("t"), action=Action.ROUTE_UPDATED, object_type="r", object_id=i)
    return _head()


def test_a_row_that_chains_onto_the_head_is_accepted_as_the_writer_would_write_it(trail):
    _insert(_row())
    assert audit_chain_verify()["ok"] is True
    assert AuditEvent.objects.count() == 4


@pytest.mark.parametrize(
    "forgery",
    [
        {"seq": 99},  # a gap
        {"seq": 3},  # the head's own seq
        {"prev_hash": "a" * 64},  # a link to nothing
        {"hash": "b" * 64},  # a hash of nothing
        {"actor": "user:someone-else"},  # content changed after hashing
        {"hash_scheme": 1},  # the old scheme, whose hash the database cannot rebuild
        {"payload": json.dumps({"name": "forged"})},  # a jsonb that says something the text does not
    ],
)
def test_a_row_that_does_not_chain_onto_the_head_is_refused(trail, forgery):
    row = _row()
    row.update(forgery)
    with pytest.raises(IntegrityError):
        _insert(row)
    assert _head() == trail
    assert audit_chain_verify()["ok"] is True  # the trail stays verifiable, so checkpoints still sign


def test_the_first_row_of_an_empty_trail_links_to_the_genesis_hash(db):
    with pytest.raises(IntegrityError):
        _insert(_row(prev_hash="c" * 64))
    _insert(_row())
    assert _head()[0] == 1


def test_a_batch_chains_within_one_statement(db):
    with transaction.atomic():
        audit_record(actor=Actor.system("t"), action=Action.ROUTE_UPDATED, object_type="r", object_id=0)
        from audit.services import EventSpec, audit_record_many

        audit_record_many(
            actor=Actor.system("t"),
            events=[EventSpec(Action.ROUTE_UPDATED, "r", str(i), {"i": i, "s": "\x01\x1f\x7f"}, "") for i in range(5)],
        )
    assert AuditEvent.objects.count() == 6 and audit_chain_verify()["ok"] is True
