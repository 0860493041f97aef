"""manage.py archive_month: a month's decisions leave for files, the rest of the console agrees."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from audit.models import AuditEvent
from audit.selectors import audit_chain_verify
from console.ledger.models import (
    Decision,
    Passage,
    RequestKey,
    RouteCutoffCount,
    RouteDayCount,
    RouteScoreTotal,
)
from console.verification.models import DecisionSupport, SpanCheck
from console.verification.services import decisions_verify
from tests.factories import TEST_ACTOR, ingest, make_route, record, served_record

pytestmark = pytest.mark.django_db(transaction=True)


def _month_of_data():
    """Decisions in October and November 2026; one passage shared by an October and a November one."""
    make_route("it-support")
    shared = {"id": "kb/shared", "text": "Shared passage text.", "rank": 3, "source": "kb", "uri": ""}
    own = {"id": "kb/october", "text": "Only October logged this.", "rank": 1, "source": "kb", "uri": ""}
    october = ingest(
        [
            record(occurred_at="2026-10-03T08:00:00Z", passages=[own]),
            served_record(occurred_at="2026-10-20T08:00:00Z"),
            record(occurred_at="2026-10-31T23:00:00Z", passages=[*record()["passages"], shared]),
        ]
    )
    november = ingest([record(occurred_at="2026-11-02T08:00:00Z", passages=[*record()["passages"], shared])])
    decisions_verify(actor=TEST_ACTOR, decision_ids=october + november)
    return october, november


def _rows(path):
    with gzip.open(path, "rt") as handle:
        return list(csv.DictReader(handle))


def test_a_month_is_written_out_and_leaves_the_database(tmp_path):
    october, november = _month_of_data()
    # The October-only passages: texts no November decision logged.
    november_passages = set(Decision.objects.get(pk=november[0]).passage_ids)
    october_passages = {
        pk for ids in Decision.objects.filter(pk__in=october).values_list("passage_ids", flat=True) for pk in ids
    }
    october_only = october_passages - november_passages
    checks = SpanCheck.objects.filter(decision_id__in=october).count()
    out = io.StringIO()

    call_command("archive_month", "2026-10", "--to", str(tmp_path / "oct"), stdout=out)

    assert "Archived 3 decisions of 2026-10" in out.getvalue()
    assert list(Decision.objects.values_list("pk", flat=True)) == november
    assert not DecisionSupport.objects.filter(decision_id__in=october).exists()
    assert not SpanCheck.objects.filter(decision_id__in=october).exists()
    assert len(october_only) == 1 and not Passage.objects.filter(pk__in=october_only).exists()
    assert Passage.objects.filter(pk__in=november_passages).count() == len(november_passages)
    assert not RequestKey.objects.exclude(request_id__in=Decision.objects.values("request_id")).exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('ledger_decision_y2026m10'), to_regclass('ledger_decision_y2026m11')")
        assert cursor.fetchone() == (None, "ledger_decision_y2026m11")
    # The counters agree with what is left, so do the statistics read from them.
    assert sum(RouteDayCount.objects.values_list("decisions", flat=True)) == 1
    assert sum(RouteScoreTotal.objects.values_list("decisions", flat=True)) == 1
    assert sum(RouteCutoffCount.objects.values_list("decisions", flat=True)) == 1

    folder = tmp_path / "oct"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["decisions"] == {"it-support": 3}
    decisions = _rows(folder / "ledger_decision.csv.gz")
    assert sorted(int(row["id"]) for row in decisions) == sorted(october)
    # each decision's ranked passages are written with it, as its arrays
    assert sorted(len(json.loads(row["passage_ids"].replace("{", "[").replace("}", "]"))) for row in decisions) == [
        1,
        2,
        3,
    ]
    # ranks of 1..n, which the table leaves NULL, are written out
    assert sorted(row["passage_ranks"] for row in decisions) == ["{1,2,3}", "{1,2}", "{1}"]
    assert len(_rows(folder / "verification_spancheck.csv.gz")) == checks
    assert {int(row["id"]) for row in _rows(folder / "ledger_passage.csv.gz")} == october_only
    for name, entry in manifest["files"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == entry["sha256"]
        assert len(_rows(folder / name)) == entry["rows"]

    event = AuditEvent.objects.get(action="month_archived")
    assert event.payload["month"] == "2026-10" and event.payload["decisions"] == 3
    assert event.payload["manifest_sha256"] == hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest()
    assert audit_chain_verify()["ok"]


def test_the_current_month_and_a_month_without_decisions_are_refused(tmp_path):
    make_route("it-support")
    ingest([record(occurred_at="2026-10-03T08:00:00Z")])
    from django.utils import timezone

    with pytest.raises(CommandError, match="current month"):
        call_command("archive_month", f"{timezone.now():%Y-%m}", "--to", str(tmp_path / "now"))
    with pytest.raises(CommandError, match="No decisions"):
        call_command("archive_month", "2025-02", "--to", str(tmp_path / "old"))
    with pytest.raises(CommandError, match="YYYY-MM"):
        call_command("archive_month", "October")
    assert not (tmp_path / "now").exists() and Decision.objects.count() == 1


def test_review_work_goes_with_its_month_and_open_work_holds_it_back(tmp_path):
    from console.disputes.models import Dispute
    from grading.models import FinalLabel, GradingItem

    make_route("it-support")
    (pk,) = ingest([record(occurred_at="2026-10-03T08:00:00Z")])
    item = GradingItem.objects.get(decision_id=pk)  # every decision enters the pool without a plan
    FinalLabel.objects.create(decision_id=pk, item=item, correct=True, method="imported", source="test")
    dispute = Dispute.objects.create(
        route_id=item.route_id,
        request_id="q",
        decision_id=pk,
        kind="dispute",
        reason="kb/mfa#2.",
        opened_at=item.created_at,
        response_hours=48,
        due_by=item.created_at,
    )
    with pytest.raises(CommandError, match="1 disputes open"):
        call_command("archive_month", "2026-10", "--to", str(tmp_path / "held"))
    assert not (tmp_path / "held").exists()
    assert Decision.objects.filter(pk=pk).exists()

    Dispute.objects.filter(pk=dispute.pk).update(status="withdrawn")
    call_command("archive_month", "2026-10", "--to", str(tmp_path / "all"), stdout=io.StringIO())
    assert not GradingItem.objects.filter(decision_id=pk).exists()
    assert not FinalLabel.objects.exists() and not Dispute.objects.exists()
    for table in ("grading_gradingitem", "grading_finallabel", "disputes_dispute"):
        assert [int(row["decision_id"]) for row in _rows(tmp_path / "all" / f"{table}.csv.gz")] == [pk]


def test_the_list_shows_each_months_partitions(tmp_path):
    make_route("it-support")
    ingest([record(occurred_at="2026-10-03T08:00:00Z")])
    out = io.StringIO()
    call_command("archive_month", "--list", stdout=out)
    assert "2026-10  ledger_decision " in out.getvalue()
    assert "2026-10  verification_decisionsupport" in out.getvalue()


def test_a_months_question_vectors_go_with_it_from_their_space_partition(tmp_path):
    from console.similarity.models import QuestionVector

    make_route("it-support")
    october = ingest(
        [record(occurred_at=f"2026-10-0{day}T08:00:00Z", question_embedding=[0.1, 0.2, day]) for day in (3, 4)]
    )
    november = ingest([record(occurred_at="2026-11-02T08:00:00Z", question_embedding=[0.3, 0.2, 0.1])])
    space = QuestionVector.objects.get(decision_id=november[0]).space
    call_command("archive_month", "2026-10", "--to", str(tmp_path / "oct"), stdout=io.StringIO())
    assert list(QuestionVector.objects.values_list("decision_id", "space")) == [(november[0], space)]
    rows = _rows(tmp_path / "oct" / "similarity_questionvector.csv.gz")
    assert sorted(int(row["decision_id"]) for row in rows) == sorted(october)
    assert {row["space"] for row in rows} == {space}


def test_archived_passages_hold_their_text_readable_though_the_table_stores_it_deflated(tmp_path):
    make_route("it-support")
    long = "Öffnen Sie Einstellungen → Sicherheit, dann 多要素認証 zurücksetzen; Pfad C:\\VPN. " * 6
    sent = [{"id": "kb/long", "text": long, "rank": 1}, {"id": "kb/short", "text": "Kurz.", "rank": 2}]
    ingest([record(occurred_at="2026-10-03T08:00:00Z", passages=sent)])
    ingest([record(occurred_at="2026-11-02T08:00:00Z")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT get_byte(text, 0) FROM ledger_passage WHERE external_id = 'kb/long'")
        assert cursor.fetchone() == (0xFF,)  # deflated in the table (console/ledger/compression.py)

    call_command("archive_month", "2026-10", "--to", str(tmp_path / "oct"), stdout=io.StringIO())

    rows = {row["external_id"]: row for row in _rows(tmp_path / "oct" / "ledger_passage.csv.gz")}
    assert {name: row["text"] for name, row in rows.items()} == {"kb/long": long, "kb/short": "Kurz."}
    # The text's hash is not stored (Passage.text_sha256 works it out); the content key that covers it is.
    assert "text_sha256" not in rows["kb/long"] and len(bytes.fromhex(rows["kb/long"]["content_key"][2:])) == 32
    assert not Passage.objects.filter(external_id__in=["kb/long", "kb/short"]).exists()


def test_archived_passages_spell_their_origin_out_in_the_columns_of_before(tmp_path):
    """The table keeps corpus snapshot, source and the start of the uri apart (ledger 0027); the
    month's file has them on each passage, in the columns a file from before had."""
    make_route("it-support")
    sent = [
        {"id": "kb/1", "text": "Reset it.", "rank": 1, "source": "kb", "uri": "https://intranet/kb/1"},
        {"id": "hr/2", "text": "Book leave.", "rank": 2, "source": "hr", "uri": "https://hr.example/?n=2"},
    ]
    versions = {"model": "gen-2026-11", "retriever": "hybrid-3", "corpus": "snap-2026-10-01", "gate": "nli-4"}
    ingest([record(occurred_at="2026-10-03T08:00:00Z", versions=versions, passages=sent)])
    ingest([record(occurred_at="2026-11-02T08:00:00Z")])

    call_command("archive_month", "2026-10", "--to", str(tmp_path / "oct"), stdout=io.StringIO())

    with gzip.open(tmp_path / "oct" / "ledger_passage.csv.gz", "rt", newline="") as file:
        header = next(csv.reader(file))
    assert header == [
        "id",
        "external_id",
        "corpus_snapshot",
        "text",
        "source",
        "uri",
        "embedding",
        "content_key",
        "route_id",
    ]
    rows = _rows(tmp_path / "oct" / "ledger_passage.csv.gz")
    assert sorted((r["external_id"], r["corpus_snapshot"], r["source"], r["uri"]) for r in rows) == [
        ("hr/2", "snap-2026-10-01", "hr", "https://hr.example/?n=2"),
        ("kb/1", "snap-2026-10-01", "kb", "https://intranet/kb/1"),
    ]
