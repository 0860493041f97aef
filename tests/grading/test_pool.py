from collections import Counter
from datetime import timedelta

import pytest
from django.db import DatabaseError
from django.utils import timezone

from audit.models import AuditEvent
from console.ledger import hooks
from console.ledger.models import Decision
from console.shadow.models import ShadowRun
from grading import tasks
from grading.models import AnswerSource, FinalLabel, GradingItem, ItemStatus
from grading.services import pool as pool_services
from tests.factories import TEST_ACTOR, ingest, make_route, recent, record, served_record
from tests.grading.helpers import pooled


def _item(decision_id: int) -> GradingItem:
    return GradingItem.objects.get(decision_id=decision_id, is_gold=False)


def test_a_served_decision_enters_with_the_answer_that_was_served(route):
    [decision_id] = pooled([served_record(served_answer="Choose Reset in Settings.")])
    item = _item(decision_id)
    assert (item.answer, item.answer_source, item.status) == ("Choose Reset in Settings.", AnswerSource.SERVED, "open")
    assert (item.stratum, item.inclusion_probability, item.grades_required) == ("all", 1.0, 2)


def test_a_refusal_on_a_route_without_shadow_pipeline_enters_with_its_logged_claim(route):
    [decision_id] = pooled([record(claim="The claim the gate scored.")])
    item = _item(decision_id)
    assert (item.answer, item.answer_source) == ("The claim the gate scored.", AnswerSource.CLAIM)


def test_a_refusal_on_a_route_with_a_shadow_pipeline_waits_for_its_run(db):
    make_route("shadowed", shadow_config={"kind": "reference"})
    [decision_id] = pooled([record(route="shadowed")])
    assert not GradingItem.objects.filter(decision_id=decision_id).exists()

    run = ShadowRun.objects.create(decision_id=decision_id, pipeline="reference", status="running")
    assert tasks.grading_pool_sweep() == 0

    run.status, run.answer, run.passages_sha256 = "succeeded", "The answer with the gate disabled.", "0" * 64
    run.save()
    assert tasks.grading_pool_sweep() == 1
    item = _item(decision_id)
    assert (item.answer, item.answer_source) == ("The answer with the gate disabled.", AnswerSource.SHADOW)


def test_entering_the_pool_twice_leaves_one_item(route):
    decision_ids = pooled([record(), served_record()])
    again = pool_services.grading_pool_enter(actor=TEST_ACTOR, decision_ids=decision_ids)
    assert again.entered == 0
    assert tasks.grading_pool_sweep() == 0
    assert GradingItem.objects.count() == 2


def test_a_failed_entry_at_ingest_keeps_the_batch_and_queues_a_job_for_it(route, monkeypatch, caplog):
    queued = []
    monkeypatch.setattr(pool_services, "enqueue", lambda task, ids: queued.append((task, ids)))

    def broken(items):
        raise DatabaseError("the pool table is unavailable")

    with monkeypatch.context() as patch:
        patch.setattr(pool_services, "_insert_items", broken)
        decision_ids = ingest([record(), served_record(), record()])
    assert Decision.objects.filter(pk__in=decision_ids).count() == 3
    assert not GradingItem.objects.exists() and not AuditEvent.objects.filter(action="pool_entered").exists()
    assert "a job will" in caplog.text
    assert queued == [("grading.grading_pool_enter", decision_ids)]
    assert tasks.grading_pool_enter(decision_ids) == 3
    assert set(GradingItem.objects.values_list("decision_id", flat=True)) == set(decision_ids)


def test_the_daily_sweep_enters_what_a_lost_message_left_out_and_the_minute_sweep_does_not_walk_it(route, monkeypatch):
    monkeypatch.setattr(hooks, "_in_ingest", [])  # as if entry failed and its message was lost
    decision_ids = ingest([record(), served_record()])
    assert tasks.grading_pool_sweep() == 0  # the minute sweep reads shadow runs only
    assert tasks.grading_pool_sweep_all() == 2
    assert set(GradingItem.objects.values_list("decision_id", flat=True)) == set(decision_ids)


def test_the_minute_sweep_leaves_shadow_runs_older_than_its_window_to_the_daily_one(db, settings):
    make_route("shadowed", shadow_config={"kind": "reference"})
    [decision_id] = ingest([record(route="shadowed")])
    run = ShadowRun.objects.create(
        decision_id=decision_id, pipeline="reference", status="succeeded", answer="A.", passages_sha256="0" * 64
    )
    ShadowRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(days=8))
    settings.POOL_SWEEP_SHADOW_DAYS = 7
    assert tasks.grading_pool_sweep() == 0
    assert tasks.grading_pool_sweep_all() == 1


@pytest.mark.django_db(transaction=True)
def test_ingest_enters_ready_decisions_in_its_own_transaction(route):
    make_route("shadowed", shadow_config={"kind": "reference"})
    waiting, *ready = ingest([record(route="shadowed"), record(), served_record(), served_record(route="shadowed")])
    # No worker ran: the items were written with the decisions, and committed with them.
    assert set(GradingItem.objects.values_list("decision_id", flat=True)) == set(ready)
    assert not GradingItem.objects.filter(decision_id=waiting).exists()


def test_pool_entry_is_audited_with_the_decisions_it_took(route):
    decision_ids = pooled([record(), served_record()])
    event = AuditEvent.objects.filter(action="pool_entered").get()
    assert event.payload["objects"] == {"decision": decision_ids}
    assert event.actor == "system:grading_pool_enter"  # the system samples, whoever sent the decisions


def test_queue_keys_are_drawn_at_random_not_from_score_or_arrival(route):
    scores = [round(0.01 * n, 2) for n in range(100)]
    pooled(
        [
            record(gate={"name": "nli", "score": s, "cutoff": 0.5})
            if s < 0.5
            else served_record(gate={"name": "nli", "score": s, "cutoff": 0.5})
            for s in scores
        ]
    )
    order = list(GradingItem.objects.order_by("queue_key").values_list("decision__gate_score", flat=True))
    assert order != sorted(order) and order != sorted(order, reverse=True)
    first_half = Counter(score >= 0.5 for score in order[:50])
    assert first_half[True] >= 10 and first_half[False] >= 10  # served and refused interleave
    assert len(set(GradingItem.objects.values_list("queue_key", flat=True))) == 100


def test_the_draws_of_one_read_are_a_63_bit_key_and_a_uniform_number_per_item():
    from scipy import stats

    draws = pool_services._draws(20_000)
    keys, uniforms = zip(*draws, strict=True)
    assert len(set(keys)) == 20_000 and all(0 <= key < 2**63 for key in keys)
    assert max(keys) >= 2**62  # the top bit of the 63 is used
    assert all(0 <= u < 1 for u in uniforms)
    assert stats.kstest(uniforms, "uniform").pvalue > 1e-6  # uniform on [0, 1)
    assert stats.kstest([key / 2**63 for key in keys], "uniform").pvalue > 1e-6
    assert pool_services._draws(0) == []


def test_a_stratified_plan_samples_each_band_at_target_over_population(route, monkeypatch):
    # The decisions wait outside the pool (as a shadow route's refusals do) while the plan is set.
    monkeypatch.setattr(hooks, "_in_ingest", [])
    ingest(
        [
            record(gate={"name": "nli", "score": 0.1 + 0.001 * n, "cutoff": 0.85}, occurred_at=recent())
            for n in range(200)
        ]
        + [
            record(gate={"name": "nli", "score": 0.7 + 0.001 * n, "cutoff": 0.85}, occurred_at=recent())
            for n in range(20)
        ]
    )
    plan = pool_services.grading_plan_set(actor=TEST_ACTOR, route=route, bands=[(0.0, 0.5, 50), (0.5, 1.0, 40)])
    assert [(s["name"], s["population"], s["rate"]) for s in plan.strata] == [("0-0.5", 200, 0.25), ("0.5-1", 20, 1.0)]
    tasks.grading_pool_sweep_all()
    low = GradingItem.objects.filter(stratum="0-0.5")
    assert low.count() == 200 and set(low.values_list("inclusion_probability", flat=True)) == {0.25}
    assert 20 <= low.filter(status=ItemStatus.OPEN).count() <= 90  # Bernoulli(0.25) of 200; ~1e-6 outside
    assert (
        low.exclude(status=ItemStatus.OPEN).filter(status=ItemStatus.EXCLUDED).count()
        == 200 - low.filter(status=ItemStatus.OPEN).count()
    )
    high = GradingItem.objects.filter(stratum="0.5-1")
    assert high.count() == 20 and set(high.values_list("status", flat=True)) == {ItemStatus.OPEN}


def test_a_score_outside_every_band_always_enters(route):
    pool_services.grading_plan_set(actor=TEST_ACTOR, route=route, bands=[(0.0, 0.5, 1)])
    [decision_id] = pooled([served_record(gate={"name": "nli", "score": 0.97, "cutoff": 0.85})])
    item = _item(decision_id)
    assert (item.stratum, item.inclusion_probability, item.status) == ("unbanded", 1.0, ItemStatus.OPEN)


def test_overlapping_bands_are_refused(route):
    from console.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="overlap"):
        pool_services.grading_plan_set(actor=TEST_ACTOR, route=route, bands=[(0.0, 0.6, 10), (0.5, 1.0, 10)])


def test_a_decision_labelled_by_import_enters_already_labelled(db):
    make_route("shadowed", shadow_config={"kind": "reference"})
    [decision_id] = ingest([record(route="shadowed")])  # waits for its shadow run, so labels come first
    FinalLabel.objects.create(decision_id=decision_id, correct=True, method="imported", source="legacy")
    ShadowRun.objects.create(
        decision_id=decision_id, pipeline="reference", status="succeeded", answer="A.", passages_sha256="0" * 64
    )
    pool_services.grading_pool_enter(actor=TEST_ACTOR, decision_ids=[decision_id])
    assert _item(decision_id).status == ItemStatus.LABELLED


def test_a_gold_item_copies_question_and_answer_and_knows_its_verdict(route):
    [decision_id] = pooled([record(claim="Wrong on purpose.")])
    from console.ledger.models import Decision

    gold = pool_services.gold_item_create(
        actor=TEST_ACTOR, decision=Decision.objects.get(pk=decision_id), verdict="incorrect"
    )
    assert (gold.is_gold, gold.gold_verdict, gold.answer, gold.answer_source) == (
        True,
        "incorrect",
        "Wrong on purpose.",
        AnswerSource.GOLD,
    )
    assert GradingItem.objects.filter(decision_id=decision_id).count() == 2
