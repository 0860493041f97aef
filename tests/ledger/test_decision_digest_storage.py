"""A decision's content hash is stored as its 32 bytes and read as hex (ledger 0018); replays still
compare it, and a writer that hands the table the hex text is refused."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from console.core.errors import Conflict
from console.ledger.models import Decision
from tests.factories import ingest, record

pytestmark = pytest.mark.django_db


def test_the_content_hash_is_32_bytes_in_the_table_and_64_hex_characters_in_the_app(route):
    (pk,) = ingest([record(request_id="r-1")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT content_hash FROM ledger_decision WHERE id = %s", [pk])
        (stored,) = cursor.fetchone()
    assert len(bytes(stored)) == 32
    assert Decision.objects.get(pk=pk).content_hash == bytes(stored).hex()


def test_a_replay_is_told_apart_from_a_changed_decision_by_the_stored_hash(route):
    first = record(request_id="r-2")
    ingest([first])
    ingest([first])  # the same decision again: unchanged, not an error
    with pytest.raises(Conflict):
        ingest([dict(first, claim="Another claim altogether.")])
    assert Decision.objects.filter(request_id="r-2").count() == 1


def test_a_hash_that_is_not_32_bytes_is_refused(route):
    (pk,) = ingest([record(request_id="r-3")])
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE ledger_decision SET content_hash = %s WHERE id = %s", [b"ab" * 32, pk])
