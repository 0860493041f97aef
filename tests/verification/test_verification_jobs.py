import importlib
import json
import re
from contextlib import contextmanager
from datetime import timedelta
from html import escape

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import Actor
from console.ledger.models import Decision
from console.verification import services, tasks
from console.verification.models import DecisionSupport, SpanCheck, SupportStatus
from console.verification.selectors import span_checks_as_list
from tests.factories import ingest, make_user, record
from tests.jobs_inline import ingest_with_jobs, run_jobs

PASSAGES = [
    {"id": "kb/mfa#2", "text": "To reset MFA, open Settings > Security and choose Reset.", "rank": 1},
    {"id": "kb/vpn#1", "text": "The VPN client is installed from the portal. Sign in with your badge.", "rank": 2},
]


@pytest.fixture
def reviewer_pages(route):
    client = Client()
    client.force_login(make_user("page-reviewer", "reviewer"))
    return client


def _verified_events(decision_id: int) -> int:
    return AuditEvent.objects.filter(
        action="decisions_verified", payload__contains={"objects": {"decision": [decision_id]}}
    ).count()


def test_a_new_decision_lists_a_span_check_per_unit_and_passage_and_stores_those_that_say_something(route):
    claim = "Open Settings > Security and choose Reset.\nThen restart the laptop."
    [decision_id] = ingest_with_jobs([record(claim=claim, passages=PASSAGES)])
    support = DecisionSupport.objects.get(decision_id=decision_id)
    assert (support.status, support.units, support.units_supported) == (SupportStatus.DONE, 2, 1)
    assert support.expected_support == 0.5
    assert support.fully_supported is False and support.no_supporting_passage is False
    assert support.verifier_version == "spans-1"
    # In the order of the passages' ranks (their ids follow the order passages are stored in, not rank).
    ranks = {link.passage_id: link.rank for link in Decision.objects.get(pk=decision_id).ranked_passages}
    listed = span_checks_as_list(Decision.objects.get(pk=decision_id))
    listed.sort(key=lambda c: (c["unit_index"], ranks[c["passage_id"]]))
    assert [(c["unit_index"], c["supported"]) for c in listed] == [(0, True), (0, False), (1, False), (1, False)]
    assert all(c["verifier_version"] == "spans-1" for c in listed)
    # Stored: each unit's first-ranked row (it holds the unit's text) and the rows that found something.
    checks = sorted(
        SpanCheck.objects.filter(decision_id=decision_id), key=lambda c: (c.unit_index, ranks[c.passage_id])
    )
    assert [(c.unit_index, ranks[c.passage_id], c.supported) for c in checks] == [(0, 1, True), (1, 1, False)]
    found = checks[0]
    text = found.passage.text
    [[start, end]] = found.char_ranges
    assert text[start:end].casefold() == found.unit_text.casefold() == claim.splitlines()[0].casefold()
    [[byte_start, byte_end]] = found.match_ranges
    assert text.encode()[byte_start:byte_end].decode() == text[start:end]


@contextmanager
def _as_stored_before(first=()):
    """The span checks as verification 0004's SQL saw them, with surrogate ids (verification 0007
    dropped the column): a temporary table of the same name, which PostgreSQL reads before the
    table itself, ids in (decision, unit, passage) order with the keys in `first` ahead of the rest.
    What the body leaves in it (rows deleted, texts changed) is written back to the table."""
    decisions, passages, units = zip(*first, strict=True) if first else ((), (), ())
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE verification_spancheck AS SELECT row_number() OVER (ORDER BY "
            "(decision_id, passage_id, unit_index) NOT IN "
            "(SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::integer[])), "
            "decision_id, unit_index, passage_id) AS id, * FROM public.verification_spancheck",
            [list(decisions), list(passages), list(units)],
        )
    yield
    with connection.cursor() as cursor:
        same_key = "(t.decision_id, t.passage_id, t.unit_index) = (p.decision_id, p.passage_id, p.unit_index)"
        cursor.execute(
            "DELETE FROM public.verification_spancheck AS p WHERE NOT EXISTS "
            f"(SELECT 1 FROM pg_temp.verification_spancheck AS t WHERE {same_key})"
        )
        cursor.execute(
            "UPDATE public.verification_spancheck AS p SET unit_text = t.unit_text "
            f"FROM pg_temp.verification_spancheck AS t WHERE {same_key}"
        )
        cursor.execute("DROP TABLE pg_temp.verification_spancheck")


def test_the_migration_drops_the_not_found_rows_of_checks_stored_one_per_pair_and_the_list_stays(route):
    migration = importlib.import_module("console.verification.migrations.0004_span_checks_found_only")
    claim = "Open Settings > Security and choose Reset.\nThen restart the laptop."
    [decision_id] = ingest_with_jobs([record(claim=claim, passages=PASSAGES)])
    decision = Decision.objects.get(pk=decision_id)
    listed = span_checks_as_list(decision)
    kept = set(SpanCheck.objects.filter(decision_id=decision_id).values_list("pk", flat=True))
    # As rows were stored before: one per (unit, passage), each with the unit's text.
    stored = {(c.unit_index, c.passage_id) for c in SpanCheck.objects.filter(decision_id=decision_id)}
    SpanCheck.objects.bulk_create(
        SpanCheck(
            decision_id=decision_id,
            passage_id=c["passage_id"],
            unit_index=c["unit_index"],
            unit_text=c["unit"],
            supported=False,
            verifier_version=c["verifier_version"],
        )
        for c in listed
        if (c["unit_index"], c["passage_id"]) not in stored
    )
    assert SpanCheck.objects.filter(decision_id=decision_id).count() == 4
    # as they were stored: the rows kept first, the rows of the pairs not found after them
    with _as_stored_before(first=kept), connection.cursor() as cursor:
        cursor.execute(migration.FORWARD)
    assert set(SpanCheck.objects.filter(decision_id=decision_id).values_list("pk", flat=True)) == kept
    assert span_checks_as_list(Decision.objects.get(pk=decision_id)) == listed


def test_a_claim_found_in_full_is_fully_supported(route):
    [decision_id] = ingest_with_jobs([record(claim="choose RESET. Sign in with your badge.", passages=PASSAGES)])
    support = DecisionSupport.objects.get(decision_id=decision_id)
    assert (support.units, support.units_supported, support.expected_support) == (2, 2, 1.0)
    assert support.fully_supported is True


@pytest.mark.parametrize(
    "claim, passages",
    [
        ("Printers are configured by facilities.", PASSAGES),
        ("Open Settings > Security and choose Reset.", []),
    ],
)
def test_a_claim_found_nowhere_has_no_supporting_passage(route, claim, passages):
    [decision_id] = ingest_with_jobs([record(claim=claim, passages=passages)])
    support = DecisionSupport.objects.get(decision_id=decision_id)
    assert support.no_supporting_passage is True
    assert support.units_supported == 0 and support.expected_support == 0.0 and not support.fully_supported


def test_a_unit_longer_than_the_verifier_accepts_counts_as_not_found(route):
    long_unit = "word " * 500  # 2,500 characters without a sentence break
    passages = [{"id": "long", "text": long_unit, "rank": 1}]
    [decision_id] = ingest_with_jobs([record(claim=long_unit.strip() + ".\nword word", passages=passages)])
    support = DecisionSupport.objects.get(decision_id=decision_id)
    assert (support.units, support.units_supported) == (2, 1)


def test_the_same_passage_at_two_ranks_is_checked_once(route):
    twice = [dict(PASSAGES[0], rank=1), dict(PASSAGES[0], rank=2)]
    [decision_id] = ingest_with_jobs([record(claim="choose Reset.", passages=twice)])
    assert SpanCheck.objects.filter(decision_id=decision_id).count() == 1


def _support_rows_written() -> tuple[int, int]:
    """(inserted, updated) row versions of DecisionSupport in this transaction, over its month
    partitions: the test's transaction never commits, and these counters see it uncommitted."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_stat_get_xact_tuples_inserted(i.inhrelid)), 0), "
            "coalesce(sum(pg_stat_get_xact_tuples_updated(i.inhrelid)), 0) "
            "FROM pg_inherits i WHERE i.inhparent = %s::regclass",
            [DecisionSupport._meta.db_table],
        )
        inserted, updated = cursor.fetchone()
    return int(inserted), int(updated)


def test_a_fresh_verification_inserts_each_support_row_once_and_updates_none(route):
    # Inserted as claimed and then updated with the figures, every row left a dead version and a
    # second index entry behind that VACUUM does not give back (bench/storage.py: 210 bytes a
    # decision in the table then, 153 written once).
    ids = ingest([record(passages=PASSAGES) for _ in range(3)] + [record(claim="Printers live on floor 3.")])
    before = _support_rows_written()
    result = services.decisions_verify(actor=Actor.system("tests"), decision_ids=ids)
    assert result.verified == ids
    inserted, updated = (after - first for after, first in zip(_support_rows_written(), before, strict=True))
    assert (inserted, updated) == (len(ids), 0)
    assert DecisionSupport.objects.filter(decision_id__in=ids, status=SupportStatus.DONE, attempts=1).count() == 4


def test_verifying_the_same_decisions_twice_writes_nothing_the_second_time(route):
    ids = ingest([record(passages=PASSAGES), record(passages=PASSAGES)])
    services.decisions_verify(actor=Actor.system("tests"), decision_ids=ids)
    checks = sorted(SpanCheck.objects.filter(decision_id__in=ids).values_list("pk", flat=True))
    events = AuditEvent.objects.filter(action="decisions_verified").count()
    before = _support_rows_written()
    result = services.decisions_verify(actor=Actor.system("tests"), decision_ids=ids)
    assert result.verified == [] and result.failed == []
    assert _support_rows_written() == before
    assert sorted(SpanCheck.objects.filter(decision_id__in=ids).values_list("pk", flat=True)) == checks
    assert AuditEvent.objects.filter(action="decisions_verified").count() == events


def test_a_duplicate_job_that_loses_the_race_computes_in_vain_and_writes_nothing(route, monkeypatch):
    # The duplicate read the decision as still to verify; the other job writes it while the
    # duplicate computes (here: inside its first check). The duplicate's upsert then finds the
    # row verified and returns nothing, so it writes no span checks and no audit event.
    [decision_id] = ingest([record(passages=PASSAGES)])
    real = services._check
    raced: list[services.VerifyResult] = []
    started: list[bool] = []

    def the_other_job_finishes_first(*args, **kwargs):
        if not started:
            started.append(True)
            raced.append(services.decisions_verify(actor=Actor.system("other"), decision_ids=[decision_id]))
        return real(*args, **kwargs)

    monkeypatch.setattr(services, "_check", the_other_job_finishes_first)
    result = services.decisions_verify(actor=Actor.system("duplicate"), decision_ids=[decision_id])
    assert raced[0].verified == [decision_id] and result.verified == [] and result.failed == []
    checks = list(SpanCheck.objects.filter(decision_id=decision_id).values_list("unit_index", "passage_id"))
    assert checks and len(checks) == len(set(checks))
    assert _verified_events(decision_id) == 1
    support = DecisionSupport.objects.get(decision_id=decision_id)
    assert (support.status, support.attempts) == (SupportStatus.DONE, 1)


def test_a_retried_row_is_updated_in_place_and_its_earlier_checks_are_replaced(route):
    [decision_id] = ingest([record(claim="choose Reset. Reboot.", passages=PASSAGES)])
    services.decisions_verify(actor=Actor.system("tests"), decision_ids=[decision_id])
    checks = sorted(SpanCheck.objects.filter(decision_id=decision_id).values_list("unit_index", "passage_id"))
    DecisionSupport.objects.filter(decision_id=decision_id).update(status=SupportStatus.FAILED, error="lost")
    before = _support_rows_written()
    result = services.decisions_verify(actor=Actor.system("tests"), decision_ids=[decision_id])
    assert result.verified == [decision_id]
    inserted, updated = (after - first for after, first in zip(_support_rows_written(), before, strict=True))
    assert (inserted, updated) == (0, 1)
    support = DecisionSupport.objects.get(decision_id=decision_id)
    assert (support.status, support.attempts, support.error) == (SupportStatus.DONE, 2, "")
    assert sorted(SpanCheck.objects.filter(decision_id=decision_id).values_list("unit_index", "passage_id")) == checks
    assert _verified_events(decision_id) == 2


def test_verifying_again_changes_nothing_and_writes_no_second_event(route):
    [decision_id] = ingest_with_jobs([record(passages=PASSAGES)])
    checks_before = list(SpanCheck.objects.filter(decision_id=decision_id).values_list("pk", flat=True))
    with run_jobs():
        tasks.decisions_verify.delay([decision_id])
        tasks.decisions_verify.delay([decision_id, decision_id])
    assert list(SpanCheck.objects.filter(decision_id=decision_id).values_list("pk", flat=True)) == checks_before
    assert DecisionSupport.objects.get(decision_id=decision_id).attempts == 1
    assert _verified_events(decision_id) == 1


def test_one_batch_is_verified_by_one_job_in_one_transaction_with_one_event_per_route(route, other_route):
    ids = ingest_with_jobs([record(passages=PASSAGES) for _ in range(3)] + [record(route="hr-policy")])
    assert DecisionSupport.objects.filter(decision_id__in=ids, status=SupportStatus.DONE).count() == 4
    events = AuditEvent.objects.filter(action="decisions_verified").order_by("seq")
    routes = dict(Decision.objects.filter(pk__in=ids).values_list("pk", "route__slug"))
    by_route: dict[str, list[int]] = {}
    for pk in sorted(ids):
        by_route.setdefault(routes[pk], []).append(pk)
    assert sorted((e.object_id, e.payload["objects"]["decision"]) for e in events) == sorted(by_route.items())
    mine = next(e for e in events if e.object_id == "it-support")
    supports = DecisionSupport.objects.filter(decision_id__in=by_route["it-support"])
    assert mine.payload["fully_supported"] == sum(s.fully_supported for s in supports)
    assert mine.payload["no_supporting_passage"] == sum(s.no_supporting_passage for s in supports)
    assert mine.payload["failed"] == []


def test_the_decisions_still_to_verify_are_read_by_a_probe_of_each_ones_support_row(route):
    # Run as an anti-join, the read of which decisions are verified already may hash every
    # DecisionSupport row of the table whenever the planner takes the chunk for a large part of
    # it (as it does right after a burst of ingest, its statistics lagging): each decision's row
    # must be looked up by its key. Nested loops and sequential scans are switched off so that the
    # planner shows how it would reach the rows in a table too large to scan.
    ids = ingest([record(passages=PASSAGES) for _ in range(3)])
    services.decisions_verify(actor=Actor.system("test"), decision_ids=ids[:1])
    with connection.cursor() as cursor:
        cursor.execute(services._CHUNK_SQL, [ids])
        assert [row[0] for row in cursor.fetchall()] == ids[1:]
        cursor.execute("SET LOCAL enable_nestloop = off")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN (FORMAT JSON) " + services._CHUNK_SQL, [ids])
        [plan] = cursor.fetchone()[0]
    nodes, found = [plan["Plan"]], []
    while nodes:
        node = nodes.pop()
        nodes += node.get("Plans", [])
        assert node["Node Type"] != "Hash" or "verification_decisionsupport" not in json.dumps(node)
        if node.get("Relation Name", "").startswith("verification_decisionsupport"):
            assert node["Node Type"] in ("Index Scan", "Index Only Scan")
            found.append(node.get("Index Cond", ""))
    # d is the decision of the subquery (the planner may rename it d_1): one key probe per decision
    assert found and all(re.search(r"decision_id = d(_\d+)?\.id\b", cond) for cond in found)


def test_a_decision_larger_than_the_group_budget_commits_on_its_own(route, settings):
    settings.VERIFY_BATCH_BYTES = 4_000
    big = [{"id": "kb/long", "text": "Filler sentence about printers. " * 200 + "Choose Reset.", "rank": 1}]
    ids = ingest(
        [
            record(passages=PASSAGES),
            record(claim="Choose Reset.", passages=big),
            record(passages=PASSAGES),
            record(passages=PASSAGES),
        ]
    )
    result = services.decisions_verify(actor=Actor.system("tests"), decision_ids=ids)
    assert result.verified == ids
    groups = [
        e.payload["objects"]["decision"] for e in AuditEvent.objects.filter(action="decisions_verified").order_by("seq")
    ]
    assert groups == [[ids[0]], [ids[1]], [ids[2], ids[3]]]  # the big one alone; small ones share
    assert DecisionSupport.objects.get(decision_id=ids[1]).fully_supported is True


def test_each_group_commits_on_its_own_so_a_stopped_job_keeps_what_it_finished(route, monkeypatch, settings):
    settings.VERIFY_BATCH_BYTES = 1  # every decision is a group of its own
    ids = ingest([record(passages=PASSAGES), record(passages=PASSAGES), record(passages=PASSAGES)])
    real = services.verify_span

    def stopped_on_the_second_decision(text, unit, **kwargs):
        if DecisionSupport.objects.filter(status=SupportStatus.DONE).exists():  # the first one committed
            raise SoftTimeLimitExceeded()
        return real(text, unit, **kwargs)

    monkeypatch.setattr(services, "verify_span", stopped_on_the_second_decision)
    with pytest.raises(SoftTimeLimitExceeded):
        services.decisions_verify(actor=Actor.system("tests"), decision_ids=ids)
    done = DecisionSupport.objects.get(decision_id=ids[0])
    assert done.status == SupportStatus.DONE
    assert not DecisionSupport.objects.filter(decision_id__in=ids[1:]).exists()  # rolled back: queued again
    assert _verified_events(ids[0]) == 1 and _verified_events(ids[1]) == 0
    monkeypatch.setattr(services, "verify_span", real)
    result = services.decisions_verify(actor=Actor.system("tests"), decision_ids=ids)
    assert result.verified == ids[1:]
    assert [_verified_events(pk) for pk in ids] == [1, 1, 1]


def test_a_decision_past_its_time_budget_is_failed_and_audited(route, settings):
    settings.VERIFY_DECISION_BUDGET_MS = 0
    passages = [{"id": "kb/sigma", "text": ("Σ" * 1999 + "x") * 40, "rank": 1}]
    [decision_id] = ingest([record(claim="σ" * 2000, passages=passages)])
    result = services.decisions_verify(actor=Actor.system("tests"), decision_ids=[decision_id])
    assert result.failed == [decision_id]
    support = DecisionSupport.objects.get(decision_id=decision_id)
    assert support.status == SupportStatus.FAILED and "TimeBudgetExceeded" in support.error
    [event] = AuditEvent.objects.filter(action="decisions_verified")
    assert event.payload["failed"] == [decision_id]
    settings.VERIFY_DECISION_BUDGET_MS = 60_000
    assert services.decisions_verify(actor=Actor.system("tests"), decision_ids=[decision_id]).verified == [decision_id]


def test_an_unknown_decision_id_in_a_stale_message_is_ignored(route):
    result = services.decisions_verify(actor=Actor.system("tests"), decision_ids=[987654321])
    assert result.verified == [] and not DecisionSupport.objects.exists()


def test_a_decision_that_fails_to_verify_is_marked_failed_and_the_rest_go_on(route, monkeypatch):
    ids = ingest([record(claim="boom"), record()])
    real = services.split_claim_units

    def exploding(claim: str):
        if claim == "boom":
            raise RuntimeError("verifier bug")
        return real(claim)

    monkeypatch.setattr(services, "split_claim_units", exploding)
    result = services.decisions_verify(actor=Actor.system("tests"), decision_ids=ids)
    assert result.failed == [ids[0]] and result.verified == [ids[1]]
    failed = DecisionSupport.objects.get(decision_id=ids[0])
    assert failed.status == SupportStatus.FAILED and "verifier bug" in failed.error
    monkeypatch.setattr(services, "split_claim_units", real)
    services.decisions_verify(actor=Actor.system("tests"), decision_ids=ids)  # a failed one may be claimed again
    assert DecisionSupport.objects.get(decision_id=ids[0]).status == SupportStatus.DONE


def test_the_sweeper_queues_decisions_whose_job_was_lost(route, settings):
    settings.JOBS_REQUEUE_AFTER_SECONDS = 60
    lost, recent = ingest([record(), record()])  # jobs never ran: the test transaction never commits
    Decision.objects.filter(pk=lost).update(ingested_at=timezone.now() - timedelta(minutes=5))
    with run_jobs():
        assert tasks.decisions_verify_sweep.delay().get() == 1
    assert DecisionSupport.objects.filter(decision_id=lost, status=SupportStatus.DONE).exists()
    assert not DecisionSupport.objects.filter(decision_id=recent).exists()


def test_the_minute_sweep_reads_only_the_newest_decisions_and_the_daily_sweep_all(route, settings, monkeypatch):
    settings.JOBS_REQUEUE_AFTER_SECONDS = 60
    settings.VERIFY_SWEEP_NEWEST = 1
    older, newer = ingest([record(), record()])  # jobs never ran: the test transaction never commits
    Decision.objects.filter(pk__in=[older, newer]).update(ingested_at=timezone.now() - timedelta(minutes=5))
    queued = []
    monkeypatch.setattr(tasks, "enqueue", lambda task, ids: queued.append(ids))
    assert tasks.decisions_verify_sweep() == 1 and queued == [[newer]]
    assert tasks.decisions_verify_sweep_all() == 2 and queued[-1] == [older, newer]


def test_the_detail_page_marks_the_verified_spans_and_escapes_everything(route, reviewer_pages):
    text = "<script>alert(1)</script> To reset, choose <b>Reset</b> & confirm. Then choose <b>Reset</b> again."
    claim = "choose <b>reset</b>"
    [decision_id] = ingest_with_jobs([record(claim=claim, passages=[{"id": "x", "text": text, "rank": 1}])])
    page = reviewer_pages.get(f"/decisions/{decision_id}/").content.decode()
    assert "<script>alert(1)</script>" not in page and "<b>Reset</b>" not in page
    assert page.count("<mark>choose &lt;b&gt;Reset&lt;/b&gt;</mark>") == 2
    assert escape("<script>alert(1)</script> To reset, ") in page
    assert "Expected support" in page and "1 claim unit found here" in page


def test_overlapping_spans_of_two_units_become_one_mark(route, reviewer_pages):
    text = "Open Settings and choose Reset now."
    claim = "Settings and choose\nand choose Reset"
    [decision_id] = ingest_with_jobs([record(claim=claim, passages=[{"id": "x", "text": text, "rank": 1}])])
    page = reviewer_pages.get(f"/decisions/{decision_id}/").content.decode()
    assert "Open <mark>Settings and choose Reset</mark> now." in page


def test_the_detail_page_says_when_a_decision_is_not_verified_yet(route, reviewer_pages):
    [decision_id] = ingest([record()])
    assert "Not verified yet" in reviewer_pages.get(f"/decisions/{decision_id}/").content.decode()


def test_the_refusals_list_filters_refusals_with_no_supporting_passage(route, reviewer_pages):
    ingest_with_jobs(
        [
            record(question="supported one", passages=PASSAGES),
            record(question="retrieval problem", claim="Printers live on floor 3.", passages=PASSAGES),
        ]
    )
    page = reviewer_pages.get("/refusals/?no_supporting_passage=on").content.decode()
    assert ">retrieval problem</a>" in page and ">supported one</a>" not in page
    page = reviewer_pages.get("/refusals/").content.decode()
    assert ">retrieval problem</a>" in page and ">supported one</a>" in page
    assert "No supporting passage" in page  # the filter's label


def test_the_filtered_refusals_list_costs_the_same_queries_for_5_or_60_rows(
    route, reviewer_pages, django_assert_num_queries
):
    nowhere = {"claim": "Printers live on floor 3.", "passages": PASSAGES}
    ingest_with_jobs([record(**nowhere) for _ in range(5)])
    with django_assert_num_queries(6) as few:
        reviewer_pages.get("/refusals/?no_supporting_passage=on")
    ingest_with_jobs([record(**nowhere) for _ in range(55)])
    with django_assert_num_queries(len(few.captured_queries)):
        response = reviewer_pages.get("/refusals/?no_supporting_passage=on")
    page = response.content.decode()
    assert "60 decisions" in page and "Older →" in page


def test_the_lookup_api_returns_span_checks_and_support(route, reviewer):
    [decision_id] = ingest_with_jobs([record(claim="choose Reset. Reboot.", passages=PASSAGES)])
    body = reviewer.get(f"/api/v1/decisions/{decision_id}").json()
    assert body["support"]["units"] == 2 and body["support"]["expected_support"] == 0.5
    passage_ids = [p["passage_id"] for p in body["passages"]]
    assert {(c["unit_index"], c["passage_id"]) for c in body["span_checks"]} == {
        (u, p) for u in (0, 1) for p in passage_ids
    }
    hit = next(c for c in body["span_checks"] if c["supported"])
    assert hit["unit"] == "choose Reset." and hit["char_ranges"] == [[43, 56]]
    # every check names its unit, though the text is stored on one row per unit
    assert {(c["unit_index"], c["unit"]) for c in body["span_checks"]} == {(0, "choose Reset."), (1, "Reboot.")}
    stored = SpanCheck.objects.filter(decision_id=decision_id).exclude(unit_text="")
    assert sorted(stored.values_list("unit_index", "unit_text")) == [(0, "choose Reset."), (1, "Reboot.")]
    assert hit["match_ranges"] == [[43, 56]] and hit["verifier_version"] == "spans-1"


def test_a_claim_of_one_unit_is_not_stored_again_as_its_unit_and_still_shows_as_it(route, reviewer, reviewer_pages):
    claim = "Open Settings > Security and choose Reset."
    [decision_id] = ingest_with_jobs([record(claim=claim, outcome="refused", passages=PASSAGES)])
    assert not SpanCheck.objects.filter(decision_id=decision_id).exclude(unit_text="").exists()
    body = reviewer.get(f"/api/v1/decisions/{decision_id}").json()
    assert {(c["unit_index"], c["unit"]) for c in body["span_checks"]} == {(0, claim)}
    page = reviewer_pages.get(f"/decisions/{decision_id}/")
    assert page.context["claim_units"] == [{"index": 1, "text": claim, "found": True}]
    # Rows stored before held the claim as the unit's text; the migration empties it.
    SpanCheck.objects.filter(decision_id=decision_id).update(unit_text=claim)
    migration = importlib.import_module("console.verification.migrations.0004_span_checks_found_only")
    with connection.cursor() as cursor:
        cursor.execute(migration.WHOLE_CLAIM)
    assert not SpanCheck.objects.filter(decision_id=decision_id).exclude(unit_text="").exists()
    with _as_stored_before(), connection.cursor() as cursor:
        cursor.execute(migration.WHOLE_CLAIM_BACK)
    first = SpanCheck.objects.filter(decision_id=decision_id).order_by("pk").values_list("unit_text", flat=True)
    assert list(first)[0] == claim


def test_the_lookup_costs_the_same_queries_once_verified(route, reviewer, django_assert_num_queries):
    from tests.factories import make_token

    [few] = ingest_with_jobs([record(passages=PASSAGES[:1])])
    [many] = ingest_with_jobs([record(passages=[{"id": f"p{i}", "text": f"t{i}"} for i in range(40)])])
    counts = []
    for decision_id in (few, many):
        reviewer.credentials(HTTP_AUTHORIZATION=f"Token {make_token(reviewer.user)}")
        with django_assert_num_queries(100, exact=False) as captured:
            assert reviewer.get(f"/api/v1/decisions/{decision_id}").status_code == 200
        counts.append(len(captured.captured_queries))
    assert counts[0] == counts[1]


def test_a_span_check_is_stored_once_for_its_decision_passage_and_unit(route):
    """The key is what the check checks (verification 0007): no surrogate id lets a second copy in."""
    from django.db import IntegrityError, transaction

    [decision_id] = ingest_with_jobs([record(passages=PASSAGES)])
    check = SpanCheck.objects.filter(decision_id=decision_id).first()
    assert check.pk == (decision_id, check.passage_id, check.unit_index)
    again = SpanCheck(
        decision_id=decision_id,
        passage_id=check.passage_id,
        unit_index=check.unit_index,
        supported=False,
        verifier_version="x",
    )
    with pytest.raises(IntegrityError, match="verification_spancheck_pkey"), transaction.atomic():
        SpanCheck.objects.bulk_create([again])
