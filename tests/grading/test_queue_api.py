import threading
import time
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from audit.models import AuditEvent
from grading.models import Assignment, Grade, GradingItem
from grading.services import queue
from tests.factories import make_route, make_token, make_user, record, served_record, set_grading
from tests.grading.helpers import api_client, grade, next_item, pooled


def _expire_leases():
    Assignment.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_next_hands_out_exactly_the_documented_shape(route, grader):
    set_grading(route, guidelines="Judge **facts** only.")
    pooled(
        [
            record(
                question="How do I reset MFA?",
                claim="Choose Reset.",
                passages=[{"id": "kb/2", "text": "second", "rank": 2}, {"id": "kb/1", "text": "first", "rank": 1}],
            )
        ]
    )
    response = grader.post("/api/v1/grading/next", {}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"item", "lease_expires_at"}
    assert set(body["item"]) == {"id", "question", "answer", "passages", "guidelines"}
    assert body["item"]["question"] == "How do I reset MFA?" and body["item"]["answer"] == "Choose Reset."
    assert body["item"]["passages"] == [{"id": 1, "text": "first"}, {"id": 2, "text": "second"}]
    assert body["item"]["guidelines"] == "Judge **facts** only."
    uuid.UUID(body["item"]["id"])  # opaque, not a sequence number
    assert response["Cache-Control"] == "no-store"


def test_a_grader_reads_a_passage_stored_deflated_exactly_as_it_was_sent(route, grader):
    long = "Öffnen Sie Einstellungen → Sicherheit; 多要素認証 zurücksetzen, Pfad C:\\VPN. " * 8
    pooled([record(claim="Choose Reset.", passages=[{"id": "kb/1", "text": long, "rank": 1}])])
    with connection.cursor() as cursor:
        cursor.execute("SELECT get_byte(text, 0) FROM ledger_passage")
        assert cursor.fetchone() == (0xFF,)  # deflated in the table (console/ledger/compression.py)

    body = grader.post("/api/v1/grading/next", {}, format="json").json()

    assert body["item"]["passages"] == [{"id": 1, "text": long}]


def test_next_is_204_when_nothing_is_left(route, grader):
    response = grader.post("/api/v1/grading/next", {}, format="json")
    assert response.status_code == 204 and response.content == b""


def test_an_empty_body_asks_for_any_route(route, grader):
    pooled([record()])
    assert grader.post("/api/v1/grading/next").status_code == 200


def test_k_graders_per_item_are_enforced_by_the_server(route, graders):
    pooled([record()])
    first, second, third = graders
    assert next_item(first) and next_item(second)
    assert next_item(third) is None


def test_a_route_can_ask_for_more_graders_per_item(db, make_grader):
    make_route("triple", graders_per_item=3)
    pooled([record(route="triple")])
    clients = [make_grader(f"g{n}") for n in range(4)]
    assert [next_item(c) is not None for c in clients] == [True, True, True, False]


def test_a_grader_never_gets_the_same_item_twice(route, grader):
    pooled([record() for _ in range(5)])
    seen = [next_item(grader)["id"] for _ in range(5)]
    assert len(set(seen)) == 5
    assert next_item(grader) is None
    _expire_leases()
    assert next_item(grader) is None  # an expired lease returns the item to others, not to its holder


def test_an_expired_lease_returns_the_item_to_the_queue(route, graders):
    pooled([record()])
    first, second, third = graders
    item = next_item(first)
    next_item(second)
    assert next_item(third) is None
    _expire_leases()
    assert next_item(third)["id"] == item["id"]
    assert grade(first, item["id"], "correct").status_code == 409


def test_grading_needs_a_running_lease(route, graders):
    pooled([record()])
    holder, other, _ = graders
    item = next_item(holder)
    response = grade(other, item["id"], "correct")
    assert response.status_code == 409 and response.json()["error"]["code"] == "no_lease"
    assert grade(holder, str(uuid.uuid4()), "correct").status_code == 409
    assert grade(holder, "not-an-id", "correct").status_code == 409


def test_grading_twice_is_409(route, grader):
    pooled([record()])
    item = next_item(grader)
    assert grade(grader, item["id"], "correct", "looks right").status_code == 201
    again = grade(grader, item["id"], "incorrect")
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_graded"
    assert list(Grade.objects.values_list("verdict", "note")) == [("correct", "looks right")]


def test_the_grade_response_says_nothing_about_the_item_or_other_grades(route, graders):
    pooled([record()])
    first, second, _ = graders
    a, b = next_item(first), next_item(second)
    grade(first, a["id"], "correct")
    response = grade(second, b["id"], "incorrect")
    assert response.status_code == 201
    assert response.json() == {"item": b["id"], "verdict": "incorrect", "note": ""}


def test_a_bad_verdict_is_400_and_keeps_the_lease(route, grader):
    pooled([record()])
    item = next_item(grader)
    response = grade(grader, item["id"], "maybe")
    assert response.status_code == 400
    assert grade(grader, item["id"], "unsure").status_code == 201


def test_time_spent_is_recorded_from_the_page_or_the_lease(route, graders):
    pooled([record(), record()])
    first, second, _ = graders
    item = next_item(first)
    first.post(
        f"/api/v1/grading/items/{item['id']}/grades", {"verdict": "correct", "seconds_spent": 42.5}, format="json"
    )
    item = next_item(second)
    grade(second, item["id"], "correct")
    spent = sorted(Grade.objects.values_list("seconds_spent", flat=True))
    assert spent[0] < 5 and spent[1] == 42.5


def test_a_skipped_item_goes_to_someone_else_and_never_back(route, graders):
    pooled([record()])
    first, second, third = graders
    item = next_item(first)
    next_item(second)
    assert first.post(f"/api/v1/grading/items/{item['id']}/skip").status_code == 204
    assert first.post(f"/api/v1/grading/items/{item['id']}/skip").status_code == 409
    assert grade(first, item["id"], "correct").status_code == 409
    assert next_item(third)["id"] == item["id"]
    assert next_item(first) is None
    assert AuditEvent.objects.filter(action="item_skipped").count() == 1


def test_route_choice_is_checked(route, other_route, make_grader):
    scoped = make_grader("scoped", on=route)
    pooled([record(), record(route="hr-policy")])
    assert scoped.post("/api/v1/grading/next", {"route": "hr-policy"}, format="json").status_code == 403
    unknown = scoped.post("/api/v1/grading/next", {"route": "nope"}, format="json")
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_route"
    assert scoped.post("/api/v1/grading/next", {"route": 7}, format="json").status_code == 400
    assert next_item(scoped, "it-support") is not None
    assert next_item(scoped) is None  # a grader on one route never gets another route's items


@pytest.mark.parametrize("role", ["auditor", "integrator", "policy_owner", None])
def test_only_graders_and_reviewers_use_the_queue(route, role):
    pooled([record()])
    client = api_client(make_user(f"not-a-grader-{role}", role, route if role == "policy_owner" else None))
    assert client.post("/api/v1/grading/next", {}, format="json").status_code == 403
    assert grade(client, str(uuid.uuid4()), "correct").status_code == 403


def test_the_queue_needs_authentication(route, anonymous):
    assert anonymous.post("/api/v1/grading/next", {}, format="json").status_code == 401


def test_gold_items_are_mixed_in_at_the_route_rate_and_each_grader_sees_each_once(route, graders):
    from console.ledger.models import Decision
    from grading.services import pool as pool_services
    from tests.factories import TEST_ACTOR

    decision_ids = pooled([record() for _ in range(6)])
    for decision_id in decision_ids[:2]:
        pool_services.gold_item_create(
            actor=TEST_ACTOR, decision=Decision.objects.get(pk=decision_id), verdict="correct"
        )
    pool_services.grading_plan_set(actor=TEST_ACTOR, route=route, bands=[], gold_rate=0.5)
    first = graders[0]
    seen = []
    while (item := next_item(first)) is not None:
        seen.append(item["id"])
    gold_ids = {str(i) for i in GradingItem.objects.filter(is_gold=True).values_list("public_id", flat=True)}
    assert len(seen) == len(set(seen))
    assert 6 <= len(seen) <= 8 and set(seen) - gold_ids  # every regular item, and gold ones only mixed in


def test_next_costs_a_fixed_number_of_queries(route, graders, django_assert_num_queries):
    pooled([record(passages=[{"id": f"p{i}", "text": f"t{i}"} for i in range(n)]) for n in (1, 30)])
    for client in graders[:2]:
        client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(client.user)}")
        # token (+ last used), grants, savepoint, claim (with its passages), lease, release
        with django_assert_num_queries(7):
            assert client.post("/api/v1/grading/next", {}, format="json").status_code == 200


def test_grading_costs_a_fixed_number_of_queries(route, graders, django_assert_num_queries):
    pooled([record()])
    first, second, _ = graders
    items = [next_item(first), next_item(second)]
    for client in (first, second):
        client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(client.user)}")
    # token (+ last used), grants, savepoint, lease and item locked, grade, lease update, audit (3),
    # grades of the item, release
    with django_assert_num_queries(12):
        assert grade(first, items[0]["id"], "correct").status_code == 201
    # ... and the k-th grade also checks for a label, writes it, the status and their audit event
    with django_assert_num_queries(18):
        assert grade(second, items[1]["id"], "correct").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_concurrent_graders_never_exceed_k_or_see_an_item_twice(route):
    pooled([record() for _ in range(6)] + [served_record() for _ in range(6)])
    clients = [api_client(make_user(f"racer-{n}", "grader")) for n in range(8)]
    handed: list[tuple[str, str]] = []
    lock = threading.Lock()

    def work(client):
        try:
            while (item := next_item(client)) is not None:
                with lock:
                    handed.append((client.user.username, item["id"]))
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    per_item = Counter(item for _user, item in handed)
    assert len(handed) == len(set(handed))
    assert len(per_item) == 12 and set(per_item.values()) == {2}


def _hold_item_lock(pk: int, seconds: float) -> threading.Thread:
    """Another transaction (a claim or a grade in flight) holding the item's row lock for a while."""
    locked = threading.Event()

    def hold():
        try:
            with transaction.atomic():
                GradingItem.objects.select_for_update().get(pk=pk)
                locked.set()
                time.sleep(seconds)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(10)
    return holder


@pytest.mark.django_db(transaction=True)
def test_next_waits_for_an_item_another_transaction_holds_instead_of_saying_the_queue_is_empty(route, grader):
    # Found as a flaky failure of the concurrent-graders test on a slow machine: the last open item,
    # locked by another grader's claim for a moment, was skipped and the grader told nothing was left.
    pooled([record()])
    holder = _hold_item_lock(GradingItem.objects.get().pk, 0.5)
    try:
        item = next_item(grader)
    finally:
        holder.join()
    assert item is not None and item["id"] == str(GradingItem.objects.get().public_id)


@pytest.mark.django_db(transaction=True)
def test_next_gives_up_on_a_lock_held_past_the_wait_with_an_empty_answer(route, grader, monkeypatch):
    monkeypatch.setattr(queue, "CLAIM_LOCK_WAIT", "100ms")
    pooled([record()])
    holder = _hold_item_lock(GradingItem.objects.get().pk, 1.5)
    try:
        response = grader.post("/api/v1/grading/next", {}, format="json")
    finally:
        holder.join()
    assert response.status_code == 204
    assert next_item(grader) is not None  # the lock gone, the item is there
