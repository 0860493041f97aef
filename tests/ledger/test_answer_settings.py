"""A route's answer settings (issue 31): `PATCH /api/v1/routes/{slug}/settings`, its defaults and its audit."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from audit.models import AuditEvent
from console.accounts.models import Route
from console.ledger.models import RouteAnswerSettings
from console.ledger.selectors import answer_settings
from tests.factories import make_route, make_token, make_user, set_answer_settings

URL = "/api/v1/routes/it-support/settings"
DEFAULTS = {
    "route": "it-support",
    "answer_form": "short",
    "harm_model": "all_or_nothing",
    "support_threshold": None,
    "expected_claims": None,
    "gate_functional": "",
}


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(user)}")
    return client


@pytest.fixture
def admin(route):
    return token_client(make_user("admin", "admin"))


def test_a_route_without_a_row_reads_as_the_defaults(route, owner):
    settings = answer_settings(route)
    assert settings._state.adding and settings.answer_form == "short" and settings.harm_model == "all_or_nothing"
    assert owner.get(URL).json() == DEFAULTS


def test_the_policy_owner_makes_a_route_long_and_one_event_records_each_change(route, owner):
    body = {"answer_form": "long", "harm_model": "at_least", "support_threshold": 0.9, "gate_functional": ""}
    response = owner.patch(URL, body, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == DEFAULTS | {"answer_form": "long", "harm_model": "at_least", "support_threshold": 0.9}
    event = AuditEvent.objects.get(action="route_answer_settings_changed")
    assert event.object_id == "it-support" and event.route == "it-support"
    assert event.payload == {
        "answer_form": {"old": "short", "new": "long"},
        "harm_model": {"old": "all_or_nothing", "new": "at_least"},
        "support_threshold": {"old": None, "new": 0.9},
    }


def test_absent_fields_stay_as_they_are(route, owner):
    set_answer_settings(route, answer_form="long", expected_claims=12)
    response = owner.patch(URL, {"gate_functional": "p_fully_supported"}, format="json")
    assert response.json()["answer_form"] == "long" and response.json()["expected_claims"] == 12
    assert RouteAnswerSettings.objects.get(route=route).gate_functional == "p_fully_supported"


def test_a_patch_that_changes_nothing_writes_no_event(route, owner):
    set_answer_settings(route, answer_form="long")
    before = AuditEvent.objects.count()
    assert owner.patch(URL, {"answer_form": "long"}, format="json").status_code == 200
    assert AuditEvent.objects.count() == before


def test_at_least_without_a_threshold_is_a_field_error_in_the_envelope(route, owner):
    response = owner.patch(URL, {"harm_model": "at_least"}, format="json")
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    assert [(d["field"], d["code"]) for d in details] == [("support_threshold", "required")]
    assert not RouteAnswerSettings.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"answer_form": "medium"}, "answer_form"),
        ({"harm_model": "linear"}, "harm_model"),
        ({"support_threshold": 1.5}, "support_threshold"),
        ({"support_threshold": False}, "support_threshold"),
        ({"support_threshold": "0.5"}, "support_threshold"),
        ({"expected_claims": "12"}, "expected_claims"),
        ({"expected_claims": True}, "expected_claims"),
        ({"expected_claims": 0}, "expected_claims"),
        ({"gate_functional": "mean"}, "gate_functional"),
        ({"cutoff": 0.5}, "cutoff"),
    ],
)
def test_bad_values_and_unknown_fields_are_400_naming_the_field(route, owner, body, field):
    response = owner.patch(URL, body, format="json")
    assert response.status_code == 400
    assert [d["field"] for d in response.json()["error"]["details"]] == [field]


def test_an_admin_may_change_the_settings(route, admin):
    assert admin.patch(URL, {"expected_claims": 8}, format="json").json()["expected_claims"] == 8


def test_reviewers_and_integrators_may_read_but_not_change_them(route, reviewer, integrator):
    assert reviewer.get(URL).status_code == 200
    assert reviewer.patch(URL, {"answer_form": "long"}, format="json").status_code == 403
    assert integrator.patch(URL, {"answer_form": "long"}, format="json").status_code == 403
    assert not RouteAnswerSettings.objects.exists()


def test_an_owner_of_another_route_learns_nothing_of_this_one(route, other_route):
    client = token_client(make_user("elsewhere", "policy_owner", other_route))
    assert client.patch(URL, {"answer_form": "long"}, format="json").status_code == 404
    assert client.patch("/api/v1/routes/no-such/settings", {}, format="json").status_code == 404


def test_the_settings_are_read_once_per_route_instance(route, django_assert_num_queries):
    make_route("hr-policy")
    with django_assert_num_queries(1):
        answer_settings(route)
        answer_settings(route)


# --- the workspace page -------------------------------------------------------------------------------


def _page_body(**answers) -> dict:
    body = {
        "route-name": "It Support",
        "route-graders_per_item": "2",
        "grading-guidelines": "",
        "grading-base": "",
        "shadow-pipeline": "none",
        "shadow-url": "",
        "monitoring-evidence_max_label_age_days": "90",
    }
    return body | {f"answers-{name}": value for name, value in answers.items()}


@pytest.fixture
def admin_page(route):
    client = Client()
    client.force_login(make_user("ada", "admin"))
    return client


def test_the_settings_page_shows_the_answer_settings(admin_page, route):
    set_answer_settings(route, answer_form="long", harm_model="at_least", support_threshold=0.8)
    page = admin_page.get("/routes/it-support/settings/").content.decode()
    assert 'name="answers-harm_model"' in page and 'value="0.8"' in page
    assert '<option value="long" selected>' in page


def test_the_page_saves_the_answer_settings_in_one_audited_event(admin_page, route):
    body = _page_body(
        answer_form="long", harm_model="proportional", support_threshold="", expected_claims="12", gate_functional=""
    )
    response = admin_page.post("/routes/it-support/settings/", body, follow=True)
    assert "answers" in response.content.decode().lower()
    assert answer_settings(Route.objects.get(pk=route.pk)).harm_model == "proportional"
    event = AuditEvent.objects.get(action="route_answer_settings_changed")
    assert event.actor == "user:ada"
    assert event.payload == {
        "answer_form": {"old": "short", "new": "long"},
        "harm_model": {"old": "all_or_nothing", "new": "proportional"},
        "expected_claims": {"old": None, "new": 12},
    }


def test_the_page_asks_for_s0_under_the_at_least_model_and_saves_nothing(admin_page, route):
    body = _page_body(answer_form="long", harm_model="at_least", support_threshold="", gate_functional="")
    response = admin_page.post("/routes/it-support/settings/", body)
    assert "The at-least harm model needs a support threshold." in response.content.decode()
    assert not RouteAnswerSettings.objects.exists()


def test_a_post_without_the_answer_fields_leaves_them_as_they_are(admin_page, route):
    set_answer_settings(route, answer_form="long", expected_claims=9)
    admin_page.post("/routes/it-support/settings/", _page_body())
    settings = RouteAnswerSettings.objects.get(route=route)
    assert (settings.answer_form, settings.expected_claims) == ("long", 9)
