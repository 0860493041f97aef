"""The admins' pages of grading: a route's sampling plan (set, change, retire) and its gold items
(list, add, remove). Every change is audited; every other role is refused; graders stay blind."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.models import AuditEvent
from console.ledger.models import Decision
from grading.models import GradingItem, GradingPlan, ItemStatus
from grading.services import pool as pool_services
from tests.factories import TEST_ACTOR, make_user, recent, record
from tests.grading.helpers import grade, next_item, pooled

ROLES_REFUSED = ("reader", "grader", "auditor", "integrator", "reviewer", "policy_owner")


@pytest.fixture
def admin_pages(route) -> Client:
    client = Client()
    client.force_login(make_user("ada", "admin"))
    return client


def _plan_body(bands: list[tuple[str, str, str]], gold_percent: str = "5", window_days: str = "30") -> dict:
    body = {
        "bands-TOTAL_FORMS": str(len(bands)),
        "bands-INITIAL_FORMS": "0",
        "gold_percent": gold_percent,
        "window_days": window_days,
    }
    for i, (low, high, target) in enumerate(bands):
        body |= {f"bands-{i}-low": low, f"bands-{i}-high": high, f"bands-{i}-target": target}
    return body


def _events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("seq"))


def _gold_item(route, verdict: str = "correct") -> GradingItem:
    [decision_id] = pooled([record()])
    return pool_services.gold_item_create(
        actor=TEST_ACTOR, decision=Decision.objects.get(pk=decision_id), verdict=verdict
    )


def test_an_admin_sets_a_plan_on_the_page_and_its_event_names_each_field_changed(route, admin_pages):
    pooled([record(gate={"name": "nli", "score": 0.3, "cutoff": 0.85}, occurred_at=recent()) for _ in range(4)])
    response = admin_pages.post(
        "/grading/routes/it-support/plan/", _plan_body([("0", "0.5", "2"), ("0.5", "1", "10"), ("", "", "")])
    )
    assert response.status_code == 302 and response["Location"] == "/grading/routes/it-support/plan/"
    plan = GradingPlan.objects.get(route=route)
    assert [(s["low"], s["high"], s["target"], s["rate"]) for s in plan.strata] == [(0, 0.5, 2, 0.5), (0.5, 1, 10, 1.0)]
    assert plan.gold_rate == 0.05 and plan.window_days == 30
    [event] = _events("grading_plan_set")
    assert event.actor == "user:ada" and event.route == "it-support"
    assert event.payload["gold_rate"] == {"old": None, "new": 0.05}
    assert event.payload["strata"]["old"] is None and len(event.payload["strata"]["new"]) == 2
    page = admin_pages.get(response["Location"]).content.decode()
    assert "Sampling plan of IT support saved" in page  # the confirmation
    assert 'value="0.5"' in page and 'value="10"' in page  # the form shows the plan to edit


def test_editing_the_plan_records_only_what_changed_and_an_unchanged_save_records_nothing(route, admin_pages):
    pool_services.grading_plan_set(actor=TEST_ACTOR, route=route, bands=[(0.0, 0.5, 20)], gold_rate=0.1)
    body = _plan_body([("0", "0.5", "20")], gold_percent="10")
    assert admin_pages.post("/grading/routes/it-support/plan/", body).status_code == 302
    assert len(_events("grading_plan_set")) == 1  # the service's own first set only
    assert admin_pages.post("/grading/routes/it-support/plan/", body | {"gold_percent": "2.5"}).status_code == 302
    event = _events("grading_plan_set")[-1]
    assert event.payload == {"gold_rate": {"old": 0.1, "new": 0.025}}


@pytest.mark.parametrize(
    ("band", "field_error"),
    [
        (("0.2", "", ""), "Give the upper edge too, or clear the whole row."),
        (("0.7", "0.5", "3"), "The upper edge must be above the lower edge."),
        (("0.1", "0.5", "0"), "A band needs at least 1 item to grade."),
        (("low", "0.5", "3"), "Write the lower edge as a number, e.g. 0.5."),
    ],
)
def test_a_bad_band_is_refused_with_its_error_beside_the_field(route, admin_pages, band, field_error):
    response = admin_pages.post("/grading/routes/it-support/plan/", _plan_body([band]))
    assert response.status_code == 200 and field_error in response.content.decode()
    assert not GradingPlan.objects.exists() and not _events("grading_plan_set")


def test_overlapping_bands_and_a_bad_gold_share_are_said_in_words(route, admin_pages):
    html = admin_pages.post(
        "/grading/routes/it-support/plan/", _plan_body([("0", "0.6", "5"), ("0.5", "1", "5")], gold_percent="80")
    ).content.decode()
    assert "The share of gold items can be at most 50%." in html
    html = admin_pages.post(
        "/grading/routes/it-support/plan/", _plan_body([("0", "0.6", "5"), ("0.5", "1", "5")])
    ).content.decode()
    assert "The bands 0 to 0.6 and 0.5 to 1 overlap" in html
    assert not GradingPlan.objects.exists()


def test_retiring_the_plan_lets_every_decision_in_again_and_is_audited(route, admin_pages):
    pool_services.grading_plan_set(actor=TEST_ACTOR, route=route, bands=[(0.0, 1.0, 1)], gold_rate=0.2)
    response = admin_pages.post("/grading/routes/it-support/plan/retire", follow=True)
    assert "Sampling plan of IT support retired" in response.content.decode()
    assert not GradingPlan.objects.exists()
    [event] = _events("grading_plan_retired")
    assert event.payload["gold_rate"] == {"old": 0.2, "new": None} and event.actor == "user:ada"
    pooled([record() for _ in range(3)])
    assert GradingItem.objects.filter(status=ItemStatus.OPEN, inclusion_probability=1.0).count() == 3
    # Retiring again changes nothing and says so.
    response = admin_pages.post("/grading/routes/it-support/plan/retire", follow=True)
    assert "has no sampling plan" in response.content.decode() and len(_events("grading_plan_retired")) == 1


def test_the_plan_list_shows_every_route_in_a_fixed_number_of_queries(
    route, other_route, admin_pages, django_assert_num_queries
):
    pool_services.grading_plan_set(actor=TEST_ACTOR, route=route, bands=[(0.0, 0.5, 7)], gold_rate=0.05)
    _gold_item(route)
    with django_assert_num_queries(4):  # session, user, grants, routes with their plans and gold counts
        html = admin_pages.get("/grading/plans/").content.decode()
    assert "IT support" in html and "HR policy" in html and "0 to 0.5: 7 items" in html
    assert "No plan: every decision enters" in html
    assert 'href="/grading/routes/hr-policy/gold/"' in html


def test_an_admin_adds_a_gold_item_by_request_id_and_it_is_audited(route, admin_pages):
    sent = record(question="Where is the printer?")
    pooled([sent])
    response = admin_pages.post(
        "/grading/routes/it-support/gold/",
        {"request_id": sent["request_id"], "verdict": "incorrect", "answer": "In the basement.\r\nNext to the boiler."},
    )
    assert response.status_code == 302
    gold = GradingItem.objects.get(is_gold=True)
    assert (gold.answer, gold.gold_verdict, gold.status) == (
        "In the basement.\nNext to the boiler.",
        "incorrect",
        "open",
    )
    [event] = _events("gold_item_created")
    assert event.payload["verdict"] == {"old": None, "new": "incorrect"} and event.actor == "user:ada"
    html = admin_pages.get("/grading/routes/it-support/gold/").content.decode()
    assert "Gold item added from" in html and "Where is the printer?" in html and "In the basement." in html
    assert "Incorrect" in html


def test_without_an_answer_the_gold_item_takes_the_decisions_answer_under_review(route, admin_pages):
    sent = record(claim="Open Settings, then Security.")
    pooled([sent])
    admin_pages.post("/grading/routes/it-support/gold/", {"request_id": sent["request_id"], "verdict": "correct"})
    assert GradingItem.objects.get(is_gold=True).answer == "Open Settings, then Security."


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"request_id": "no-such-request", "verdict": "correct"}, "No decision of this route has that request id."),
        ({"request_id": "", "verdict": "correct"}, "Give the request id of a decision of this route."),
        ({"request_id": "x", "verdict": "maybe"}, "Select a valid choice."),
        ({"request_id": "x"}, "Say whether the answer is correct or incorrect."),
    ],
)
def test_a_bad_gold_item_is_refused_with_the_error_beside_its_field(route, admin_pages, body, error):
    response = admin_pages.post("/grading/routes/it-support/gold/", body)
    assert response.status_code == 200 and error in response.content.decode()
    assert not GradingItem.objects.filter(is_gold=True).exists()


def test_a_decision_of_another_route_is_not_found_on_this_routes_gold_page(route, other_route, admin_pages):
    sent = record(route="hr-policy")
    pooled([sent])
    html = admin_pages.post(
        "/grading/routes/it-support/gold/", {"request_id": sent["request_id"], "verdict": "correct"}
    ).content.decode()
    assert "No decision of this route has that request id." in html


def test_removing_a_gold_item_stops_handing_it_out_keeps_its_grades_and_is_audited(
    route, admin_pages, make_grader, monkeypatch
):
    from grading.services import queue as queue_services

    monkeypatch.setattr(queue_services._rng, "random", lambda: 0.0)  # gold whenever one is left for the grader
    gold = _gold_item(route)
    pooled([record() for _ in range(3)])
    pool_services.grading_plan_set(actor=TEST_ACTOR, route=route, bands=[], gold_rate=0.5)
    grader = make_grader("gwen")
    while (item := next_item(grader)) is not None:
        assert grade(grader, item["id"], "correct").status_code == 201
    assert gold.grades.count() == 1
    response = admin_pages.post(f"/grading/routes/it-support/gold/{gold.pk}/remove", follow=True)
    html = response.content.decode()
    assert "Gold item removed" in html and "No gold item is handed out on this route." in html
    assert "1 removed gold item no longer handed out" in html
    gold.refresh_from_db()
    assert gold.status == ItemStatus.EXCLUDED
    [event] = _events("gold_item_removed")
    assert event.payload == {"status": {"old": "open", "new": "excluded"}} and event.object_id == str(gold.pk)
    assert gold.grades.count() == 1  # still measuring gwen
    # A second grader is never handed it now.
    other = make_grader("gus")
    seen = set()
    while (item := next_item(other)) is not None:
        seen.add(item["id"])
        grade(other, item["id"], "correct")
    assert str(gold.public_id) not in seen
    # Removing it again changes nothing.
    response = admin_pages.post(f"/grading/routes/it-support/gold/{gold.pk}/remove", follow=True)
    assert "already removed" in response.content.decode() and len(_events("gold_item_removed")) == 1


def test_a_gold_item_of_another_route_is_404_under_this_route(route, other_route, admin_pages):
    sent = record(route="hr-policy")
    [decision_id] = pooled([sent])
    gold = pool_services.gold_item_create(
        actor=TEST_ACTOR, decision=Decision.objects.get(pk=decision_id), verdict="correct"
    )
    assert admin_pages.post(f"/grading/routes/it-support/gold/{gold.pk}/remove").status_code == 404
    assert GradingItem.objects.get(pk=gold.pk).status == ItemStatus.OPEN


def _pages_and_posts(gold_pk: int) -> list[tuple[str, str, dict]]:
    return [
        ("get", "/grading/plans/", {}),
        ("get", "/grading/routes/it-support/plan/", {}),
        ("post", "/grading/routes/it-support/plan/", _plan_body([("0", "1", "5")])),
        ("post", "/grading/routes/it-support/plan/retire", {}),
        ("get", "/grading/routes/it-support/gold/", {}),
        ("post", "/grading/routes/it-support/gold/", {"request_id": "x", "verdict": "correct"}),
        ("post", f"/grading/routes/it-support/gold/{gold_pk}/remove", {}),
    ]


@pytest.mark.parametrize("role", ROLES_REFUSED)
def test_every_other_role_is_refused_every_plan_and_gold_page(route, role):
    gold = _gold_item(route)
    pool_services.grading_plan_set(actor=TEST_ACTOR, route=route, bands=[(0.0, 1.0, 3)])
    client = Client()
    client.force_login(make_user(f"someone-{role}", role, route if role in ("reader", "policy_owner") else None))
    before = AuditEvent.objects.count()
    for method, path, body in _pages_and_posts(gold.pk):
        response = getattr(client, method)(path, body)
        assert response.status_code == 403, (role, method, path)
        assert "Only admins may set sampling plans and gold items." in response.content.decode()
    assert AuditEvent.objects.count() == before
    assert GradingPlan.objects.filter(route=route).exists() and GradingItem.objects.get(pk=gold.pk).status == "open"


def test_signed_out_visitors_are_sent_to_sign_in(route):
    gold = _gold_item(route)
    for method, path, body in _pages_and_posts(gold.pk):
        response = getattr(Client(), method)(path, body)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], path


def test_admins_and_superusers_open_every_page(route, admin_pages):
    gold = _gold_item(route)
    superuser = make_user("root")
    superuser.is_superuser = True
    superuser.save()
    root = Client()
    root.force_login(superuser)
    for client in (admin_pages, root):
        for path in ("/grading/plans/", "/grading/routes/it-support/plan/", "/grading/routes/it-support/gold/"):
            assert client.get(path).status_code == 200, path
    assert root.post(f"/grading/routes/it-support/gold/{gold.pk}/remove").status_code == 302


def test_the_gold_page_is_forbidden_to_graders(route, page_of):
    _gold_item(route)
    response = page_of(make_user("gale", "grader")).get("/grading/routes/it-support/gold/")
    assert response.status_code == 403
    assert "Where" not in response.content.decode()  # no question, answer or verdict of a gold item


def test_a_gold_item_in_the_queue_looks_like_any_other_item(route, make_grader, page_of, monkeypatch):
    from grading.services import queue as queue_services

    monkeypatch.setattr(queue_services._rng, "random", lambda: 0.0)  # the gold share's draw always hands gold out
    gold = _gold_item(route)
    pool_services.grading_plan_set(actor=TEST_ACTOR, route=route, bands=[], gold_rate=0.5)
    grader_client = make_grader("gina")
    seen = []
    while (item := next_item(grader_client)) is not None:
        seen.append(item)
        grade(grader_client, item["id"], "correct")
    [as_served] = [i for i in seen if i["id"] == str(gold.public_id)]
    [regular] = [i for i in seen if i["id"] != str(gold.public_id)]
    assert as_served.keys() == regular.keys() and "gold" not in str(as_served).lower()
    html = page_of(grader_client.user).get("/grading/").content.decode()
    assert "gold" not in html.lower() and "/grading/plans/" not in html


def test_the_grading_section_links_the_plans_for_admins_only(route, admin_pages, page_of):
    assert 'href="/grading/plans/"' in admin_pages.get("/grading/agreement/").content.decode()
    assert 'href="/grading/plans/"' in admin_pages.get("/grading/adjudication/").content.decode()
    reviewer_page = page_of(make_user("rex", "reviewer")).get("/grading/agreement/").content.decode()
    assert "Agreement" in reviewer_page and 'href="/grading/plans/"' not in reviewer_page


def test_the_command_and_the_page_write_the_same_event_through_one_service(route, admin_pages):
    from io import StringIO

    from django.core.management import call_command

    sent = record()
    pooled([sent])
    call_command("grading_gold", "it-support", sent["request_id"], "--verdict", "correct", stdout=StringIO())
    admin_pages.post("/grading/routes/it-support/gold/", {"request_id": sent["request_id"], "verdict": "correct"})
    by_command, by_page = _events("gold_item_created")
    assert by_command.payload.keys() == by_page.payload.keys()
    assert (by_command.actor, by_page.actor) == ("system:grading_gold", "user:ada")


def test_every_described_by_id_exists_on_the_forms_with_and_without_errors(route, admin_pages):
    import re

    _gold_item(route)
    pages = [
        admin_pages.get("/grading/routes/it-support/plan/"),
        admin_pages.post("/grading/routes/it-support/plan/", _plan_body([("1", "0", "")], gold_percent="x")),
        admin_pages.get("/grading/routes/it-support/gold/"),
        admin_pages.post("/grading/routes/it-support/gold/", {"request_id": "", "answer": "x" * 20_001}),
    ]
    for response in pages:
        html = response.content.decode()
        ids = set(re.findall(r'\sid="([^"]+)"', html))
        described = {i for value in re.findall(r'aria-describedby="([^"]+)"', html) for i in value.split()}
        assert described and described <= ids, described - ids
