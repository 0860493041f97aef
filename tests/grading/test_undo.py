"""Undo of the last grade: what the queue says was saved, the audited withdrawal, and its limits."""

import re
import threading
from collections import Counter

import pytest
from django.db import connection

from audit.models import AuditEvent
from console.core.errors import Conflict
from grading import selectors
from grading.models import Assignment, FinalLabel, Grade, GradingItem, ItemStatus
from grading.services import labels as labels_services
from grading.services import queue as queue_services
from tests.factories import TEST_ACTOR, make_user, record
from tests.grading.helpers import pooled

HX = {"HTTP_HX_REQUEST": "true"}


def _item_ids(html: str) -> list[str]:
    return re.findall(r'action="/grading/items/([0-9a-f-]{36})/grade"', html)


def _saved_note(html: str) -> str:
    match = re.search(r'<form class="saved".*?</form>', html, re.S)
    return match.group(0) if match else ""


def _grade_on_page(pages, verdict: str = "correct") -> tuple[str, str]:
    """Take an item on the page, grade it; the item graded and the fragment that came back."""
    [item_id] = _item_ids(pages.post("/grading/next", **HX).content.decode())
    fragment = pages.post(f"/grading/items/{item_id}/grade", {"verdict": verdict}, **HX).content.decode()
    return item_id, fragment


def _claim_and_grade(user, verdict: str) -> GradingItem:
    assignment = queue_services.assignment_claim(actor=TEST_ACTOR, grader=user, route_ids=None)
    labels_services.grade_submit(actor=TEST_ACTOR, grader=user, public_id=assignment.item.public_id, verdict=verdict)
    return assignment.item


@pytest.fixture
def ana(route):
    return make_user("ana", "grader")


@pytest.fixture
def ben(route):
    return make_user("ben", "grader")


def test_the_queue_says_what_was_saved_and_undo_gives_the_item_back_to_grade_again(ana, page_of):
    pooled([record(question="First?"), record(question="Second?")])
    pages = page_of(ana)
    first, fragment = _grade_on_page(pages, "incorrect")
    [second] = _item_ids(fragment)
    note = _saved_note(fragment)
    assert 'Saved: <strong data-saved="verdict">incorrect</strong>' in note
    assert f'hx-post="/grading/items/{first}/undo"' in note and "Undo" in note

    response = pages.post(f"/grading/items/{first}/undo", **HX)
    assert "HX-Request" in response["Vary"] and "no-store" in response["Cache-Control"]
    fragment = response.content.decode()
    assert _item_ids(fragment) == [first] and GradingItem.objects.get(public_id=first).question in fragment
    assert "Your grade was withdrawn" in fragment and not _saved_note(fragment)
    assert not Grade.objects.exists()
    lease = Assignment.objects.get(grader=ana, item__public_id=first)
    assert lease.graded_at is None and not lease.skipped
    # the item handed out after the grade went back to the queue, for this grader too
    assert not Assignment.objects.filter(item__public_id=second).exists()
    event = AuditEvent.objects.get(action="grade_withdrawn")
    assert event.actor == "user:ana" and event.object_type == "grading_item"
    assert event.payload["verdict"] == {"old": "incorrect", "new": None}
    assert event.payload["grader"] == {"old": "ana", "new": None}
    assert event.payload["objects"] == {"decision": [GradingItem.objects.get(public_id=first).decision_id]}

    fragment = pages.post(f"/grading/items/{first}/grade", {"verdict": "correct"}, **HX).content.decode()
    assert Grade.objects.get().verdict == "correct" and _item_ids(fragment) == [second]


def test_a_withdrawn_grade_counts_in_no_statistic(route, ana, ben):
    [decision_id] = pooled([record()])
    item = _claim_and_grade(ana, "correct")
    assert selectors.grader_progress(ana, None)["graded_today"] == 1
    assert selectors.route_agreement(route)["items_graded"] == 1
    labels_services.grade_withdraw(actor=TEST_ACTOR, grader=ana, public_id=item.public_id)

    assert selectors.grader_progress(ana, None)["graded_today"] == 0
    agreement = selectors.route_agreement(route)
    assert agreement["items_graded"] == 0 and agreement["graders"] == []
    assert selectors.decision_grading(decision_id)["grades"] == []
    # ben's agreeing grade is the only one in: the item still waits for a second grade
    _claim_and_grade(ben, "correct")
    item.refresh_from_db()
    assert item.status == ItemStatus.OPEN and not FinalLabel.objects.exists()
    # ana grades it again, otherwise this time: the item goes to a reviewer on her new grade alone
    labels_services.grade_submit(actor=TEST_ACTOR, grader=ana, public_id=item.public_id, verdict="incorrect")
    item.refresh_from_db()
    assert item.status == ItemStatus.ADJUDICATION
    event = AuditEvent.objects.get(action="adjudication_requested")
    assert event.payload["grades"] == ["correct", "incorrect"]


def test_undo_is_refused_once_the_item_has_all_its_grades_with_one_message_for_either_outcome(route, ana, ben):
    cleo, dan = make_user("cleo", "grader"), make_user("dan", "grader")
    pooled([record(question="Agreed")])
    agreed = _claim_and_grade(ana, "correct")
    _claim_and_grade(ben, "correct")
    pooled([record(question="Disputed")])
    disputed = _claim_and_grade(cleo, "correct")
    _claim_and_grade(dan, "incorrect")
    assert FinalLabel.objects.filter(item=agreed).exists()
    assert GradingItem.objects.get(pk=disputed.pk).status == ItemStatus.ADJUDICATION
    refusals = set()
    for grader, item in ((ana, agreed), (ben, agreed), (cleo, disputed), (dan, disputed)):
        assert not selectors.saved_grade(grader, item.public_id).undoable
        with pytest.raises(Conflict) as refused:
            labels_services.grade_withdraw(actor=TEST_ACTOR, grader=grader, public_id=item.public_id)
        refusals.add((refused.value.code, refused.value.message))
    # a final label and a reviewer's queue get the same answer: which one would tell how the others voted
    assert [code for code, _message in refusals] == ["grades_complete"]
    assert Grade.objects.count() == 4 and not AuditEvent.objects.filter(action="grade_withdrawn").exists()


def test_undo_is_refused_for_an_item_whose_decision_got_an_imported_label(route, ana):
    pooled([record()])
    item = _claim_and_grade(ana, "correct")
    FinalLabel.objects.create(decision_id=item.decision_id, item=None, correct=False, method="imported")
    with pytest.raises(Conflict) as refused:
        labels_services.grade_withdraw(actor=TEST_ACTOR, grader=ana, public_id=item.public_id)
    assert refused.value.code == "grades_complete" and Grade.objects.count() == 1


def test_the_saved_note_never_tells_how_the_other_graders_voted(route, page_of):
    """The second grader's note reads the same whether the first agreed (a final label) or not."""
    notes = {}
    for first_verdict in ("correct", "incorrect"):
        first, second = make_user(f"first-{first_verdict}", "grader"), make_user(f"second-{first_verdict}", "grader")
        pooled([record(question=f"Which way {first_verdict}?", gate={"name": "nli", "score": 0.4242, "cutoff": 0.9})])
        _claim_and_grade(first, first_verdict)
        _item_id, fragment = _grade_on_page(page_of(second), "correct")
        note = _saved_note(fragment)
        notes[first_verdict] = re.sub(r'[0-9a-f-]{36}|value="[^"]*"', "", note)
        assert "0.42" not in fragment and "refused" not in fragment.lower()
    assert FinalLabel.objects.count() == 1 and GradingItem.objects.filter(status="adjudication").count() == 1
    assert notes["correct"] == notes["incorrect"]
    assert "Saved:" in notes["correct"] and "Undo" not in notes["correct"]


def test_a_grader_cannot_undo_another_graders_grade_or_an_earlier_one(route, ana, ben, page_of):
    pooled([record(), record()])
    first = _claim_and_grade(ana, "correct")
    second = _claim_and_grade(ana, "incorrect")
    for grader, item, code in ((ben, second, "no_grade"), (ana, first, "not_last_grade")):
        with pytest.raises(Conflict) as refused:
            labels_services.grade_withdraw(actor=TEST_ACTOR, grader=grader, public_id=item.public_id)
        assert refused.value.code == code
    # the same through crafted posts on the page, including an id that names nothing
    pages = page_of(ben)
    for target in (second.public_id, first.public_id, "not-an-id", "00000000-0000-0000-0000-000000000000"):
        fragment = pages.post(f"/grading/items/{target}/undo", **HX).content.decode()
        assert "Not undone: You have no grade on this item to undo." in fragment
    assert (
        "Not undone: Only your last grade"
        in page_of(ana).post(f"/grading/items/{first.public_id}/undo", **HX).content.decode()
    )
    assert Grade.objects.count() == 2 and not AuditEvent.objects.filter(action="grade_withdrawn").exists()
    assert not Assignment.objects.filter(grader=ben).exists()


def test_without_javascript_the_page_shows_the_saved_note_of_the_graders_own_grade_only(route, ana, ben, page_of):
    pooled([record(), record()])
    pages = page_of(ana)
    pages.post("/grading/next")
    [item_id] = _item_ids(pages.get("/grading/").content.decode())
    response = pages.post(f"/grading/items/{item_id}/grade", {"verdict": "unsure"})
    assert response.status_code == 302 and f"saved={item_id}" in response["Location"]
    note = _saved_note(pages.get(response["Location"]).content.decode())
    assert "unsure" in note and f'action="/grading/items/{item_id}/undo"' in note
    # another grader naming ana's item in the address sees nothing of her grade
    assert not _saved_note(page_of(ben).get(response["Location"]).content.decode())
    response = pages.post(f"/grading/items/{item_id}/undo")
    assert response.status_code == 302 and not Grade.objects.exists()
    assert _item_ids(pages.get(response["Location"]).content.decode()) == [item_id]


def test_a_grade_on_a_gold_item_can_be_undone_and_leaves_the_gold_accuracy(route, ana):
    from datetime import timedelta

    from django.utils import timezone

    from console.ledger.models import Decision
    from grading.services import pool as pool_services

    [decision_id] = pooled([record()])
    gold = pool_services.gold_item_create(
        actor=TEST_ACTOR, decision=Decision.objects.get(pk=decision_id), verdict="correct", answer="Gold answer."
    )
    now = timezone.now()
    Assignment.objects.create(item=gold, grader=ana, leased_at=now, lease_expires_at=now + timedelta(minutes=5))
    labels_services.grade_submit(actor=TEST_ACTOR, grader=ana, public_id=gold.public_id, verdict="incorrect")
    [entry] = selectors.route_agreement(route)["graders"]
    assert entry["gold_accuracy"] is not None
    assert selectors.saved_grade(ana, gold.public_id).undoable
    labels_services.grade_withdraw(actor=TEST_ACTOR, grader=ana, public_id=gold.public_id)
    assert selectors.route_agreement(route)["graders"] == []
    assert "objects" not in AuditEvent.objects.get(action="grade_withdrawn").payload


def _race_undo_and_last_grade(undoer, last_grader, public_id) -> list[Conflict]:
    """Start the undo and the item's last grade at the same moment; the undo's refusals."""
    barrier = threading.Barrier(2)
    errors: list[Conflict] = []

    def undo():
        try:
            barrier.wait()
            labels_services.grade_withdraw(actor=TEST_ACTOR, grader=undoer, public_id=public_id)
        except Conflict as exc:
            errors.append(exc)
        finally:
            connection.close()

    def last_grade():
        try:
            barrier.wait()
            labels_services.grade_submit(actor=TEST_ACTOR, grader=last_grader, public_id=public_id, verdict="correct")
        finally:
            connection.close()

    threads = [threading.Thread(target=undo), threading.Thread(target=last_grade)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


@pytest.mark.django_db(transaction=True)
def test_an_undo_racing_the_last_grade_leaves_either_outcome_whole(route):
    """Either the undo lands first (the item waits for grades, with one grade) or the last grade
    does (the item is complete and the undo is refused); never a label over a withdrawn grade."""
    ana, ben = make_user("racing-ana", "grader"), make_user("racing-ben", "grader")
    outcomes = Counter()
    for _round in range(8):
        pooled([record()])
        item = _claim_and_grade(ana, "correct")
        queue_services.assignment_claim(actor=TEST_ACTOR, grader=ben, route_ids=None)
        errors = _race_undo_and_last_grade(ana, ben, item.public_id)
        item.refresh_from_db()
        grades = Grade.objects.filter(item=item).count()
        labelled = FinalLabel.objects.filter(item=item).exists()
        if errors:
            assert [e.code for e in errors] == ["grades_complete"]
            assert (item.status, grades, labelled) == (ItemStatus.LABELLED, 2, True)
            outcomes["grade first"] += 1
        else:
            assert (item.status, grades, labelled) == (ItemStatus.OPEN, 1, False)
            assert Assignment.objects.get(item=item, grader=ana).graded_at is None
            outcomes["undo first"] += 1
        # finish the item so the next round's claims start from a clean queue
        if not labelled:
            labels_services.grade_submit(actor=TEST_ACTOR, grader=ana, public_id=item.public_id, verdict="correct")
    assert sum(outcomes.values()) == 8
    assert AuditEvent.objects.filter(action="grade_withdrawn").count() == outcomes["undo first"]
