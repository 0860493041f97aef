"""The passages' content key: unique in the database through an exclusion constraint on a hash index
(ledger migration 0023), which ingest's ON CONFLICT and its look-ups by key use, at a fraction of
the bytes of the unique B-tree it replaced."""

from __future__ import annotations

import hashlib
import time

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from console.core.db_roles import as_owner
from console.ledger.models import Passage, PassageOrigin
from tests.factories import ingest, record

INSERT = "INSERT INTO ledger_passage (external_id, text, uri, content_key, origin_id) VALUES (%s, 'x', '', %s, %s)"


def _key_index() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.amname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
            "JOIN pg_class i ON i.oid = c.conindid JOIN pg_am a ON a.oid = i.relam "
            "WHERE c.conname = 'unique_passage_content_key'"
        )
        return cursor.fetchone()


def test_two_passages_with_the_same_content_key_cannot_both_be_stored(route):
    key = hashlib.sha256(b"the same chunk").digest()
    origin = PassageOrigin.of(route.pk).pk
    with connection.cursor() as cursor:
        cursor.execute(INSERT, ["kb/1", key, origin])
    with pytest.raises(IntegrityError, match="unique_passage_content_key"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(INSERT, ["kb/1-again", key, origin])
    assert Passage.objects.count() == 1


def test_the_content_key_is_enforced_by_a_hash_index_over_the_full_digest(route):
    assert _key_index() == ("hash", "EXCLUDE USING hash (content_key WITH =) WITH (fillfactor='90')")


def test_ingest_skips_a_stored_passage_through_the_exclusion_constraint(route):
    first = record(passages=[{"id": "kb/a", "text": "Reset it."}, {"id": "kb/b", "text": "Reboot."}])
    second = record(passages=[{"id": "kb/b", "text": "Reboot."}, {"id": "kb/c", "text": "Call the desk."}])
    ingest([first])
    ingest([second])
    assert sorted(Passage.objects.values_list("external_id", flat=True)) == ["kb/a", "kb/b", "kb/c"]


def _key_index_seen_by_new_transactions(timeout: float = 60.0) -> None:
    """Wait until a new transaction may use the key's index. An index built while the table held
    dead rows of HOT updates (an earlier test's migration round trip rebuilds it after ledger 0027
    updated every passage) is marked `indcheckxmin`, and PostgreSQL lets no transaction use it
    whose oldest visible transaction is older than the build: with tests running in parallel,
    another database's open transaction can be. Nothing waits when the index has no such mark."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT NOT i.indcheckxmin OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a "
                "WHERE a.pid <> pg_backend_pid() AND (age(a.backend_xmin) >= age(i.xmin) "
                "OR age(a.backend_xid) >= age(i.xmin))) "
                "FROM pg_index i WHERE i.indexrelid = 'unique_passage_content_key'::regclass"
            )
            if cursor.fetchone()[0] or time.monotonic() > deadline:
                return
            time.sleep(0.1)


@pytest.mark.django_db(transaction=True)  # the plan is read in a transaction that starts after the wait
def test_looking_passages_up_by_key_reads_the_hash_index(route):
    ingest([record()])
    keys = [bytes.fromhex(p.content_key) for p in Passage.objects.all()]
    _key_index_seen_by_new_transactions()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a handful of rows: the table would be read whole
        cursor.execute("EXPLAIN SELECT content_key, id FROM ledger_passage WHERE content_key = ANY(%s)", [keys])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Bitmap Index Scan on unique_passage_content_key" in plan


def test_the_content_key_index_takes_under_60_bytes_a_passage(route):
    """Keys arrive in random order, in batches sorted by key as ingest inserts them. The B-tree this
    replaced kept 76-78 bytes a passage at any size (pages about 70% full of 52-byte entries); the
    hash index 33-50, by where the count falls between two of its bucket splits (bench/README.md)."""
    count, batch = 10_000, 500
    keys = [hashlib.sha256(f"passage {n}".encode()).digest() for n in range(count)]
    origin = PassageOrigin.of(route.pk).pk
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size('unique_passage_content_key')")
        [before] = cursor.fetchone()
        for start in range(0, count, batch):
            cursor.execute(
                "INSERT INTO ledger_passage (external_id, text, uri, content_key, origin_id) "
                "SELECT 'kb/' || encode(k, 'hex'), 'x', '', k, %s FROM unnest(%s::bytea[]) AS k ORDER BY k",
                [origin, sorted(keys[start : start + batch])],
            )
        cursor.execute("SELECT pg_relation_size('unique_passage_content_key')")
        [after] = cursor.fetchone()
    assert (after - before) / count < 60


@pytest.mark.slow  # migrates the test database back and forth: seconds, for the full suite (tests/conftest.py)
@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_passage_and_its_uniqueness_both_ways(route):
    ingest([record(), record()])
    stored = sorted(Passage.objects.values_list("id", "content_key"))
    try:
        with as_owner():  # migrations run as the tables' owner
            MigrationExecutor(connection).migrate([("ledger", "0022_passage_text_zstd")])
            assert _key_index() == ("btree", "UNIQUE (content_key)")
            assert sorted(Passage.objects.values_list("id", "content_key")) == stored
    finally:
        call_command("migrate", verbosity=0)  # every app forward again, not the ledger alone
    assert _key_index() == ("hash", "EXCLUDE USING hash (content_key WITH =) WITH (fillfactor='90')")
    assert sorted(Passage.objects.values_list("id", "content_key")) == stored
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(INSERT, ["kb/copy", bytes.fromhex(stored[0][1]), PassageOrigin.of(route.pk).pk])
