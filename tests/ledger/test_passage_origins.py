"""A passage's route, corpus snapshot, source and the start of its uri are kept once per combination
(`PassageOrigin`, ledger 0027); every reader gets them back as sent."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from console.core.db_roles import as_owner
from console.ledger.models import Decision, Passage, PassageOrigin, origin_key, uri_split
from console.ledger.validation import validate_batch
from tests.factories import ingest, record

VERSIONS = {"model": "gen-2026-11", "retriever": "hybrid-3", "corpus": "snap-2026-11-01", "gate": "nli-4"}
SENT = [
    # the usual shape: a fixed address followed by the passage's id
    {
        "id": "kb/vpn#1",
        "text": "Install the VPN client.",
        "rank": 1,
        "source": "kb",
        "uri": "https://intranet/kb/vpn#1",
    },
    {"id": "kb/mfa#2", "text": "Reset MFA in Settings.", "rank": 2, "source": "kb", "uri": "https://intranet/kb/mfa#2"},
    # a uri that does not end with the id, one that is the id, and none at all
    {"id": "hr/7", "text": "Leave is booked online.", "rank": 3, "source": "hr", "uri": "https://hr.example/page?n=7"},
    {"id": "https://wiki/x", "text": "The wiki says so.", "rank": 4, "source": "", "uri": "https://wiki/x"},
    {"id": "kb/none", "text": "No address for this one.", "rank": 5, "source": "kb", "uri": ""},
]


def _as_read(body: dict) -> list[tuple]:
    return [(p["id"], p["source"], p["uri"], p["corpus_snapshot"]) for p in body["passages"]]


def _as_sent(corpus: str = VERSIONS["corpus"]) -> list[tuple]:
    return [(p["id"], p["source"], p["uri"], corpus) for p in SENT]


def test_passages_read_back_their_source_uri_and_corpus_as_sent(integrator, reviewer):
    sent = record(versions=VERSIONS, passages=SENT)
    response = integrator.post("/api/v1/decisions", {"decisions": [sent]}, format="json")
    assert response.status_code == 201, response.json()
    decision_id = Decision.objects.get(request_id=sent["request_id"]).pk
    assert _as_read(reviewer.get(f"/api/v1/decisions/{decision_id}").json()) == _as_sent()


def test_passages_sharing_corpus_source_and_the_start_of_their_uri_share_one_origin(route):
    ingest([record(versions=VERSIONS, passages=SENT)])
    stored = {p.external_id: p for p in Passage.objects.all()}
    assert stored["kb/vpn#1"].origin_id == stored["kb/mfa#2"].origin_id
    origins = {(o.route_id, o.corpus_snapshot, o.source, o.uri_prefix) for o in PassageOrigin.objects.all()}
    assert origins == {
        (route.pk, "snap-2026-11-01", "kb", "https://intranet/"),
        (route.pk, "snap-2026-11-01", "hr", ""),
        (route.pk, "snap-2026-11-01", "", ""),
        (route.pk, "snap-2026-11-01", "kb", ""),
    }
    assert {p.route_id for p in stored.values()} == {route.pk}
    # a uri that is the prefix followed by the id is not stored on the passage; any other is, whole
    assert {name: p.stored_uri for name, p in stored.items()} == {
        "kb/vpn#1": None,
        "kb/mfa#2": None,
        "hr/7": "https://hr.example/page?n=7",
        "https://wiki/x": None,
        "kb/none": "",
    }
    for origin in PassageOrigin.objects.all():
        assert origin.key == origin_key(origin.route_id, origin.corpus_snapshot, origin.source, origin.uri_prefix)


def test_a_later_batch_and_another_corpus_reuse_or_add_origins(route):
    ingest([record(versions=VERSIONS, passages=SENT[:2])])
    ingest([record(versions=VERSIONS, passages=[{**SENT[0], "id": "kb/new", "uri": "https://intranet/kb/new"}])])
    assert PassageOrigin.objects.count() == 1
    ingest([record(versions={**VERSIONS, "corpus": "snap-2026-12-01"}, passages=SENT[:1])])
    assert sorted(PassageOrigin.objects.values_list("corpus_snapshot", flat=True)) == [
        "snap-2026-11-01",
        "snap-2026-12-01",
    ]
    # the same id and text under another corpus snapshot is another passage, with its own origin
    assert Passage.objects.filter(external_id="kb/vpn#1").count() == 2


def test_another_route_logging_the_same_passages_has_origins_and_rows_of_its_own(route, other_route):
    ingest([record(versions=VERSIONS, passages=SENT[:2])])
    ingest([record(route=other_route.slug, versions=VERSIONS, passages=SENT[:2])])
    by_route = {o.route_id: o.pk for o in PassageOrigin.objects.all()}
    assert set(by_route) == {route.pk, other_route.pk}
    assert sorted(Passage.objects.values_list("external_id", "origin_id")) == sorted(
        (p["id"], by_route[r.pk]) for p in SENT[:2] for r in (route, other_route)
    )
    assert {p.route_id for p in Passage.objects.filter(origin__route=other_route)} == {other_route.pk}


def test_the_content_key_is_worked_out_from_the_strings_not_from_where_they_are_kept(route):
    """Ingest of the same passages again finds them stored: the key is the one validation computes
    from what was sent."""
    first = record(versions=VERSIONS, passages=SENT)
    ingest([first])
    [item], _ = validate_batch([record(versions=VERSIONS, passages=SENT)])
    keys = {p.external_id: p.content_key for p in item.passages}
    assert {p.external_id: p.content_key for p in Passage.objects.all()} == keys
    ingest([record(versions=VERSIONS, passages=SENT)])
    assert Passage.objects.count() == len(SENT)


def test_the_uri_rule_keeps_the_start_of_a_uri_that_ends_with_the_id():
    assert uri_split("https://a/kb/1", "kb/1") == ("https://a/", None)
    assert uri_split("kb/1", "kb/1") == ("", None)
    assert uri_split("https://a/kb/1?v=2", "kb/1") == ("", "https://a/kb/1?v=2")
    assert uri_split("", "kb/1") == ("", "")
    assert uri_split("x", "") == ("", "x")


@pytest.mark.slow  # migrates the test database back and forth: seconds, for the full suite (tests/conftest.py)
@pytest.mark.django_db(transaction=True)
def test_going_back_writes_every_origin_out_on_its_passages_and_forward_takes_them_in_again(
    route, integrator, reviewer
):
    other = {**VERSIONS, "corpus": "snap-2026-12-01"}
    records = [record(versions=VERSIONS, passages=SENT), record(versions=other, passages=SENT[2:])]
    response = integrator.post("/api/v1/decisions", {"decisions": records}, format="json")
    assert response.status_code == 201, response.json()
    ids = [Decision.objects.get(request_id=r["request_id"]).pk for r in records]
    expected = [_as_sent(), _as_sent("snap-2026-12-01")[2:]]
    keys = dict(Passage.objects.values_list("id", "content_key"))
    try:
        with as_owner():  # migrations run as the tables' owner
            MigrationExecutor(connection).migrate([("ledger", "0026_trained_dictionaries_up_to_256_kib")])
            with connection.cursor() as cursor:
                cursor.execute("SELECT to_regclass('ledger_passageorigin')")
                assert cursor.fetchone() == (None,)
                cursor.execute("SELECT external_id, source, uri, corpus_snapshot FROM ledger_passage")
                assert sorted(cursor.fetchall()) == sorted(_as_sent() + _as_sent("snap-2026-12-01")[2:])
                cursor.execute("SELECT DISTINCT route_id FROM ledger_passage")
                assert cursor.fetchall() == [(route.pk,)]
                # a passage no decision had logged when passages took their route (ledger 0024) has none
                cursor.execute(
                    "INSERT INTO ledger_passage (external_id, corpus_snapshot, text, source, uri, content_key, "
                    "route_id) VALUES ('kb/orphan', '', 'x', 'kb', 'https://x/kb/orphan', %s, NULL)",
                    [bytes(32)],
                )
    finally:
        call_command("migrate", verbosity=0)  # every app forward again
    assert [_as_read(reviewer.get(f"/api/v1/decisions/{pk}").json()) for pk in ids] == expected
    orphan = Passage.objects.get(external_id="kb/orphan")
    assert (orphan.route_id, orphan.source, orphan.uri, orphan.stored_uri) == (None, "kb", "https://x/kb/orphan", None)
    Passage.objects.filter(pk=orphan.pk).delete()  # no decision logged it
    assert dict(Passage.objects.values_list("id", "content_key")) == keys
    assert PassageOrigin.objects.filter(route=route).count() == 7  # four in one corpus snapshot, three in the other
    # kb/vpn#1, kb/mfa#2 and https://wiki/x, and the last again in the other snapshot
    assert Passage.objects.filter(stored_uri__isnull=True).count() == 4
