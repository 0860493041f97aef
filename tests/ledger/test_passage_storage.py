"""Passage text is stored deflated (console/ledger/compression.py) and read back exactly: through
the ORM, the verifier's raw SQL, the API and the byte offsets of span checks."""

from __future__ import annotations

import hashlib
import importlib
from types import SimpleNamespace

import pytest
from django.db import IntegrityError, connection, transaction

from audit.services import Actor
from console.core.db_roles import as_owner
from console.ledger.compression import (
    MARKER,
    compress_text,
    decompress_head,
    decompress_text,
    head_sql,
    utf8_length_sql,
)
from console.ledger.models import PASSAGE_RANKS_SQL, Passage, PassageOrigin
from console.verification.services import decisions_verify
from tests.factories import ingest, make_route, record
from tests.ledger.passages_before_origins import passage_columns_restored, passage_routes

# Non-ASCII throughout (2-, 3- and 4-byte characters), a backslash and a quote: byte offsets differ
# from character offsets, and a text cast (rather than converted) to bytes would lose the backslash.
LONG = (
    "Überprüfen Sie die Einstellungen: Sicherheit → Zurücksetzen. 多要素認証をリセットします 🔐. "
    'Pfad C:\\Programme\\VPN, "Anmelden" mit Ausweis. ' * 4 + "Öffnen Sie Einstellungen und wählen Sie Zurücksetzen."
)
SHORT = "Kurz: ß"


def _stored(passage_id: int) -> bytes:
    with connection.cursor() as cursor:
        cursor.execute("SELECT text FROM ledger_passage WHERE id = %s", [passage_id])
        return bytes(cursor.fetchone()[0])


def _ingest_passages(*texts: str) -> int:
    passages = [{"id": f"kb/{rank}", "text": text, "rank": rank} for rank, text in enumerate(texts, start=1)]
    [decision_id] = ingest([record(claim="Öffnen Sie Einstellungen und wählen Sie Zurücksetzen.", passages=passages)])
    return decision_id


def test_a_long_passage_is_stored_deflated_and_reads_back_as_sent(route):
    _ingest_passages(LONG, SHORT)
    long, short = Passage.objects.get(external_id="kb/1"), Passage.objects.get(external_id="kb/2")

    stored = _stored(long.pk)
    assert stored[0] == MARKER and len(stored) < 0.6 * len(LONG.encode())
    assert long.text == LONG
    # The digest is of the UTF-8 text, never of the stored bytes.
    assert long.text_sha256 == hashlib.sha256(LONG.encode()).hexdigest()
    # A text that deflate would not shorten is kept as its UTF-8 bytes.
    assert _stored(short.pk) == SHORT.encode() and short.text == SHORT


def test_texts_that_do_not_shrink_stay_raw_and_every_form_round_trips():
    for text in ["", "a", "ß", "🔐" * 2, "x" * 10_000, LONG, "".join(chr(c) for c in range(0x20, 0x3000, 7))]:
        stored = compress_text(text)
        assert decompress_text(stored) == text
        assert len(stored) <= len(text.encode())
        assert (stored[:1] == bytes((MARKER,))) == (len(stored) < len(text.encode()))


def test_a_damaged_compressed_text_is_an_error_rather_than_another_text():
    stored = compress_text(LONG)
    wrong_length = stored[:1] + (len(LONG.encode()) - 1).to_bytes(4, "big") + stored[5:]
    with pytest.raises(ValueError, match="damaged"):
        decompress_text(wrong_length)


def test_sql_reads_the_utf8_length_of_a_stored_text_without_inflating_it(route):
    _ingest_passages(LONG, SHORT, "")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT external_id, {utf8_length_sql('text')} FROM ledger_passage ORDER BY external_id")
        assert cursor.fetchall() == [("kb/1", len(LONG.encode())), ("kb/2", len(SHORT.encode())), ("kb/3", 0)]


def test_span_checks_and_the_api_give_offsets_into_the_text_as_sent(route, reviewer):
    decision_id = _ingest_passages(SHORT, LONG)
    decisions_verify(actor=Actor.system("test"), decision_ids=[decision_id])

    body = reviewer.get(f"/api/v1/decisions/{decision_id}").json()
    assert [p["text"] for p in body["passages"]] == [SHORT, LONG]
    assert body["passages"][1]["sha256"] == hashlib.sha256(LONG.encode()).hexdigest()
    claim = "Öffnen Sie Einstellungen und wählen Sie Zurücksetzen."
    char_start = LONG.index(claim)
    byte_start = LONG.encode().index(claim.encode())
    assert byte_start > char_start  # the offsets differ: a mix-up of the two would show
    long_id = body["passages"][1]["passage_id"]
    [check] = [c for c in body["span_checks"] if c["passage_id"] == long_id]
    assert check["supported"] is True
    assert check["char_ranges"] == [[char_start, char_start + len(claim)]]
    assert check["match_ranges"] == [[byte_start, byte_start + len(claim.encode())]]
    assert body["support"]["fully_supported"] is True

    verified = reviewer.post("/api/v1/verify", {"passage_id": long_id, "claim": claim}, format="json").json()
    assert verified["char_ranges"] == check["char_ranges"] and verified["match_ranges"] == check["match_ranges"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_compresses_existing_rows_and_its_reverse_restores_the_text_column(monkeypatch):
    migration = importlib.import_module("console.ledger.migrations.0011_passage_text_compressed")
    monkeypatch.setattr(migration, "BATCH", 2)  # several batches over three rows
    make_route("it-support")
    _ingest_passages(LONG, SHORT, LONG + " (2)")
    editor = SimpleNamespace(connection=connection)

    # Only the tables' owner may alter them; backwards then forwards again ends where it started,
    # and a failure half-way rolls the column back.
    with as_owner(), transaction.atomic():
        migration._inflate(None, editor)
        with connection.cursor() as cursor:
            cursor.execute(migration.TO_TEXT)
            cursor.execute("SELECT external_id, text FROM ledger_passage ORDER BY external_id")
            assert cursor.fetchall() == [("kb/1", LONG), ("kb/2", SHORT), ("kb/3", LONG + " (2)")]
            cursor.execute(migration.TO_BYTEA)
        migration._compress(None, editor)

        ids = dict(Passage.objects.values_list("external_id", "pk"))
        assert _stored(ids["kb/1"]) == compress_text(LONG) and _stored(ids["kb/1"])[0] == MARKER
        assert _stored(ids["kb/2"]) == SHORT.encode()
        assert dict(Passage.objects.values_list("external_id", "text")) == {
            "kb/1": LONG,
            "kb/2": SHORT,
            "kb/3": LONG + " (2)",
        }


def _links() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT decision_id, rank, decision_occurred_at, passage_id, retrieval_score "
            "FROM ledger_decisionpassage ORDER BY 1, 2"
        )
        return cursor.fetchall()


def _keys_of_links() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'ledger_decisionpassage'::regclass AND contype IN ('p', 'u')"
        )
        return dict(cursor.fetchall())


def _arrays() -> list[tuple]:
    """Each decision's arrays, its ranks spelt out when stored as NULL (1..n, ledger 0025)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, occurred_at, passage_ids, {PASSAGE_RANKS_SQL}, retrieval_scores "
            "FROM ledger_decision ORDER BY id"
        )
        return cursor.fetchall()


def _ranked(*ranks_and_scores: tuple[int, float | None]) -> list[dict]:
    return [
        {"id": f"kb/r{rank}", "text": f"Passage ranked {rank}.", "rank": rank, "retrieval_score": score}
        for rank, score in ranks_and_scores
    ]


def _links_made_again():
    """The link table of before ledger 0024, made again and filled from the arrays (its backwards),
    after ledger 0027's backwards has written each passage's origin out on it again (its reference
    stays, NULL on rows these older migrations add: passages_before_origins.py) and 0025's has
    spelt out the ranks it left NULL."""
    passage_columns_restored()
    ranks = importlib.import_module("console.ledger.migrations.0025_ranks_left_out_when_in_order")
    with connection.cursor() as cursor:
        cursor.execute(ranks.RANKS_IN_ORDER_WRITTEN_OUT)
    migration = importlib.import_module("console.ledger.migrations.0024_ranked_passages_on_the_decision")
    migration.arrays_to_links(None, SimpleNamespace(connection=connection))
    with connection.cursor() as cursor:  # the links' deferred passage checks now, as a commit would
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # (a table with some pending cannot be altered)
    return migration


def test_the_passage_arrays_must_be_of_one_length(route):
    decision_id = _ingest_passages(LONG, SHORT)
    with pytest.raises(IntegrityError, match="passage_arrays_of_one_length"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE ledger_decision SET passage_ranks = '{1}' WHERE id = %s", [decision_id])


def test_a_passage_a_decision_logged_cannot_be_deleted_and_one_no_decision_names_can(route):
    _ingest_passages(LONG, SHORT)
    with pytest.raises(IntegrityError, match="still logged by a decision"), transaction.atomic():
        Passage.objects.filter(external_id="kb/1").delete()
    unlogged = Passage.objects.create(
        external_id="kb/none", text=SHORT, content_key="ab" * 32, origin=PassageOrigin.of(route.pk)
    )
    Passage.objects.filter(pk=unlogged.pk).delete()
    assert set(Passage.objects.values_list("external_id", flat=True)) == {"kb/1", "kb/2"}


def test_a_decisions_passages_come_back_in_rank_order_with_non_contiguous_ranks(route):
    from console.ledger.models import Decision

    # sent out of order, with gaps in the ranks and a score left out
    [decision_id] = ingest([record(passages=_ranked((7, 0.2), (2, None), (40, 0.01), (3, 0.5)))])
    decision = Decision.objects.get(pk=decision_id)
    assert [(link.rank, link.passage.external_id, link.retrieval_score) for link in decision.ranked_passages] == [
        (2, "kb/r2", None),
        (3, "kb/r3", 0.5),
        (7, "kb/r7", 0.2),
        (40, "kb/r40", 0.01),
    ]
    assert decision.passage_ranks == [2, 3, 7, 40]  # ranks other than 1..n are stored as sent


def test_ranks_of_one_to_n_are_stored_as_null_and_read_back_as_sent(route):
    from console.ledger.models import Decision

    in_order, none = ingest(
        [record(passages=_ranked((2, 0.5), (1, 0.9), (3, None))), record(request_id="no-passages", passages=[])]
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT passage_ranks FROM ledger_decision WHERE id = ANY(%s)", [[in_order, none]])
        assert cursor.fetchall() == [(None,), (None,)]
    decision = Decision.objects.get(pk=in_order)
    assert [(link.rank, link.passage.external_id, link.retrieval_score) for link in decision.ranked_passages] == [
        (1, "kb/r1", 0.9),
        (2, "kb/r2", 0.5),
        (3, "kb/r3", None),
    ]
    assert Decision.objects.get(pk=none).ranked_passages == []
    # NULL ranks go with any number of passages; written-out ranks must still match the ids
    with pytest.raises(IntegrityError, match="passage_arrays_of_one_length"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE ledger_decision SET passage_ranks = '{1, 2}' WHERE id = %s", [in_order])


@pytest.mark.django_db(transaction=True)
def test_the_links_move_into_the_arrays_and_back_with_their_ranks_and_scores():
    make_route("it-support")
    ingest(
        [
            record(occurred_at="2026-10-05T10:00:00Z", passages=_ranked((3, 0.9), (5, None), (9, 0.1))),
            record(occurred_at="2026-11-05T10:00:00Z", passages=_ranked((1, None))),
            record(occurred_at="2026-11-06T10:00:00Z", passages=[]),
        ]
    )
    before = _arrays()
    assert [row[3:] for row in before] == [([3, 5, 9], [0.9, None, 0.1]), ([1], [None]), ([], [])]

    with as_owner(), transaction.atomic():
        migration = _links_made_again()
        assert _keys_of_links() == {
            "ledger_decisionpassage_pkey": "PRIMARY KEY (decision_id, rank, decision_occurred_at)"
        }
        by_decision = {}
        for decision_id, rank, occurred_at, passage_id, score in _links():
            by_decision.setdefault((decision_id, occurred_at), []).append((passage_id, rank, score))
        assert by_decision == {
            (pk, at): list(zip(ids, ranks, scores, strict=True)) for pk, at, ids, ranks, scores in before if ids
        }
        with connection.cursor() as cursor:  # each month's links in that month's partition
            cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM ledger_decisionpassage ORDER BY 1")
            assert [row[0] for row in cursor.fetchall()] == [
                "ledger_decisionpassage_y2026m10",
                "ledger_decisionpassage_y2026m11",
            ]
            cursor.execute(
                "UPDATE ledger_decision SET passage_ids = '{}', passage_ranks = '{}', retrieval_scores = '{}'"
            )
        migration.links_to_arrays(None, SimpleNamespace(connection=connection))
        assert _arrays() == before
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('ledger_decisionpassage')")
            assert cursor.fetchone() == (None,)
        transaction.set_rollback(True)


@pytest.mark.django_db(transaction=True)
def test_going_forwards_each_passage_takes_its_route_and_one_two_routes_logged_is_split():
    """Before the content key held the route, two routes that logged one chunk shared its row. Going
    forwards, every passage a decision logged takes that decision's route; the shared one gets a
    copy for the other route, which that route's decision names (ledger 0024) and its span check
    too (verification 0006); a passage no decision logged keeps no route."""
    it, hr = make_route("it-support"), make_route("hr-policy")
    [mine] = ingest([record(passages=_ranked((1, 0.9), (2, 0.5)))])
    [theirs] = ingest([record(route="hr-policy", passages=_ranked((1, 0.4)))])
    decisions_verify(actor=Actor.system("test"), decision_ids=[mine, theirs])
    [shared] = Passage.objects.filter(origin__route=it, external_id="kb/r1").values_list("pk", flat=True)
    [second] = Passage.objects.filter(origin__route=it, external_id="kb/r2").values_list("pk", flat=True)
    [own] = Passage.objects.filter(origin__route=hr).values_list("pk", flat=True)
    span_checks = importlib.import_module("console.verification.migrations.0006_span_checks_name_their_routes_passage")

    with as_owner(), transaction.atomic():
        migration = _links_made_again()
        with connection.cursor() as cursor:  # as a database from before the route was in the key
            cursor.execute("UPDATE ledger_decisionpassage SET passage_id = %s WHERE decision_id = %s", [shared, theirs])
            cursor.execute("UPDATE verification_spancheck SET passage_id = %s WHERE decision_id = %s", [shared, theirs])
            cursor.execute("UPDATE ledger_passage SET route_id = NULL")
            cursor.execute(
                "UPDATE ledger_decision SET passage_ids = '{}', passage_ranks = '{}', retrieval_scores = '{}'"
            )
        migration.links_to_arrays(None, SimpleNamespace(connection=connection))
        with connection.cursor() as cursor:
            cursor.execute(span_checks.TO_COPIES)

        routes = passage_routes()
        [copy] = set(routes) - {shared, second, own}
        assert copy > max(shared, second, own)  # a row of its own
        assert routes == {shared: it.pk, second: it.pk, own: None, copy: hr.pk}
        passages = Passage.objects.select_related(None)  # the copy has no origin: 0024 made it
        original, duplicate = passages.get(pk=shared), passages.get(pk=copy)
        assert (duplicate.external_id, duplicate.text) == (original.external_id, original.text)
        assert duplicate.content_key != original.content_key
        assert _arrays()[1][2] == [copy]
        with connection.cursor() as cursor:
            cursor.execute("SELECT DISTINCT passage_id FROM verification_spancheck WHERE decision_id = %s", [theirs])
            assert cursor.fetchall() == [(copy,)]
            cursor.execute("SELECT DISTINCT passage_id FROM verification_spancheck WHERE decision_id = %s", [mine])
            assert {row[0] for row in cursor.fetchall()} <= {shared, second}
        transaction.set_rollback(True)


@pytest.mark.slow  # migrates the test database back and forth: seconds, for the full suite (tests/conftest.py)
@pytest.mark.django_db(transaction=True)
def test_migrating_the_ledger_back_before_the_arrays_and_forward_again_keeps_every_ranked_passage():
    from django.core.management import call_command
    from django.db.migrations.executor import MigrationExecutor

    make_route("it-support")
    ingest(
        [
            record(occurred_at="2026-10-05T10:00:00Z", passages=_ranked((4, None), (2, 0.7))),
            record(occurred_at="2026-11-05T10:00:00Z", passages=_ranked((1, 0.3), (6, 0.2), (8, None))),
        ]
    )
    before = _arrays()
    try:
        with as_owner():  # migrations run as the tables' owner
            MigrationExecutor(connection).migrate([("ledger", "0023_passage_key_in_a_hash_index")])
            links = _links()
            assert [(rank, score) for _, rank, _, _, score in links] == [
                (2, 0.7),
                (4, None),
                (1, 0.3),
                (6, 0.2),
                (8, None),
            ]
    finally:
        call_command("migrate", verbosity=0)  # every app forward again, not the ledger alone
    assert _arrays() == before


@pytest.mark.django_db(transaction=True)
def test_the_ranked_passages_keep_their_rows_when_the_surrogate_id_goes_and_comes_back():
    migration = importlib.import_module("console.ledger.migrations.0012_decision_passage_natural_key")
    make_route("it-support")
    _ingest_passages(LONG, SHORT)
    ingest([record(occurred_at="2026-10-05T10:00:00Z")])

    with as_owner(), transaction.atomic():
        _links_made_again()  # the table 0012 changed, as 0024 leaves it going backwards
        before = _links()
        with connection.cursor() as cursor:
            for statement in migration.BACKWARD:
                cursor.execute(statement)
            assert _keys_of_links() == {
                "ledger_decisionpassage_pkey": "PRIMARY KEY (id, decision_occurred_at)",
                "unique_rank_per_decision": "UNIQUE (decision_id, rank, decision_occurred_at)",
            }
            cursor.execute("SELECT id FROM ledger_decisionpassage ORDER BY decision_id, rank")
            assert [row[0] for row in cursor.fetchall()] == list(range(1, len(before) + 1))
            assert _links() == before
            for statement in migration.FORWARD:
                cursor.execute(statement)
        assert _links() == before
        assert _keys_of_links() == {
            "ledger_decisionpassage_pkey": "PRIMARY KEY (decision_id, rank, decision_occurred_at)"
        }
        transaction.set_rollback(True)


def test_the_head_of_a_stored_text_is_its_first_characters_whether_deflated_or_raw(route):
    emoji = "🔐é" * 200  # 4- and 2-byte characters: a byte prefix ends inside one
    _ingest_passages(LONG * 3, emoji, SHORT)
    with connection.cursor() as cursor:  # a long text kept as its UTF-8 bytes, as rows the migration left
        cursor.execute("UPDATE ledger_passage SET text = %s WHERE external_id = 'kb/2'", [emoji.encode()])
    assert _stored(Passage.objects.get(external_id="kb/1").pk)[0] == MARKER

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT external_id, {head_sql('text', 152)} FROM ledger_passage ORDER BY external_id")
        heads = {name: decompress_head(stored, 152) for name, stored in cursor.fetchall()}
    assert heads == {"kb/1": (LONG * 3)[:152], "kb/2": emoji[:152], "kb/3": SHORT}


@pytest.mark.slow  # migrates the test database back and forth: seconds, for the full suite (tests/conftest.py)
@pytest.mark.django_db(transaction=True)
def test_the_text_hash_is_worked_out_from_the_text_and_comes_back_as_a_column_when_migrated_back():
    from django.core.management import call_command
    from django.db.migrations.executor import MigrationExecutor

    make_route("it-support")
    _ingest_passages(LONG, SHORT)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = 'ledger_passage'::regclass "
            "AND attname = 'text_sha256' AND NOT attisdropped"
        )
        assert cursor.fetchone() == (0,)
    expected = {"kb/1": hashlib.sha256(LONG.encode()).digest(), "kb/2": hashlib.sha256(SHORT.encode()).digest()}
    assert {p.external_id: p.text_sha256 for p in Passage.objects.all()} == {k: v.hex() for k, v in expected.items()}
    try:
        with as_owner(), connection.cursor() as cursor:  # migrations run as the tables' owner
            MigrationExecutor(connection).migrate([("ledger", "0018_decision_content_hash_bytea")])
            cursor.execute("SELECT external_id, text_sha256 FROM ledger_passage")
            assert {name: bytes(digest) for name, digest in cursor.fetchall()} == expected
    finally:
        call_command("migrate", verbosity=0)  # every app forward again, not the ledger alone
    assert {p.external_id: p.text_sha256 for p in Passage.objects.all()} == {k: v.hex() for k, v in expected.items()}
