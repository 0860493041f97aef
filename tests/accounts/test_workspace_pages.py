"""The admins' workspace pages: routes with their settings, members and roles, API tokens."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import Action, AuditEvent
from console.accounts.models import ApiToken, RoleGrant, Route, hash_token
from console.monitoring.models import RouteMonitoring
from console.shadow.selectors import route_shadow_config
from grading.selectors import route_grading_settings
from tests.factories import make_user

NON_ADMIN_ROLES = ("grader", "reader", "reviewer", "policy_owner", "auditor", "integrator", None)
PAGES = ("/workspace/", "/routes/new/", "/routes/it-support/settings/", "/routes/it-support/members/", "/tokens/")


def client_user(client: Client):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(pk=client.session["_auth_user_id"])


def _page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin_page(route):
    return _page(make_user("ada", "admin"))


def _events(action: Action) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("seq"))


def _new_route_body(**overrides) -> dict:
    body = {
        "slug": "billing",
        "route-name": "Billing questions",
        "route-graders_per_item": "3",
        "grading-guidelines": "Grade **correct** only when the invoice rule is quoted.",
        "grading-base": "",
        "shadow-pipeline": "reference",
        "shadow-url": "",
        "monitoring-evidence_max_label_age_days": "60",
    }
    return body | overrides


def _grading(route: Route):
    return route_grading_settings(Route.objects.get(pk=route.pk))


def _pipeline(route: Route) -> dict:
    return route_shadow_config(Route.objects.get(pk=route.pk))


def _settings_body(route: Route, **overrides) -> dict:
    from grading.services.pool import guidelines_sha256

    grading, pipeline = _grading(route), _pipeline(route)
    body = {
        "route-name": route.name,
        "route-graders_per_item": str(grading.graders_per_item),
        "grading-guidelines": grading.guidelines,
        "grading-base": guidelines_sha256(grading.guidelines),
        "shadow-pipeline": pipeline.get("kind", "none"),
        "shadow-url": pipeline.get("url", ""),
        "monitoring-evidence_max_label_age_days": "90",
    }
    return body | overrides


# --- who may use them ------------------------------------------------------------------------------


@pytest.mark.parametrize("role", NON_ADMIN_ROLES)
def test_every_workspace_page_answers_403_to_every_role_but_admin(route, role):
    client = _page(make_user(f"someone-{role}", role))
    for path in PAGES:
        assert client.get(path).status_code == 403, path
        assert client.post(path, {}).status_code == (405 if path == "/workspace/" else 403), path
    grant = RoleGrant.objects.create(user=client_user(client), role="grader", route=route) if role is None else None
    grant = grant or RoleGrant.objects.get(user__username=f"someone-{role}")
    token = ApiToken.objects.create(user=grant.user, key_hash="0" * 64, prefix="arc_x")
    assert client.post(f"/routes/it-support/members/{grant.pk}/revoke/").status_code == 403
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 403
    assert RoleGrant.objects.filter(pk=grant.pk).exists() and ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_a_signed_out_visitor_is_sent_to_sign_in(route):
    for path in PAGES:
        response = Client().get(path)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], path


def test_only_admins_find_the_workspace_in_the_navigation(route, admin_page):
    assert '<a href="/workspace/"' in admin_page.get("/").content.decode()
    reviewer = _page(make_user("rita", "reviewer"))
    assert "/workspace/" not in reviewer.get("/").content.decode()


def test_the_workspace_lists_every_route_with_its_pages(admin_page, other_route):
    page = admin_page.get("/workspace/").content.decode()
    for slug in ("it-support", "hr-policy"):
        assert f'href="/routes/{slug}/settings/"' in page and f'href="/routes/{slug}/members/"' in page


# --- routes --------------------------------------------------------------------------------------------


def test_an_admin_creates_a_route_with_its_settings_in_one_audited_change(admin_page):
    response = admin_page.post("/routes/new/", _new_route_body(), follow=True)
    assert response.redirect_chain[-1][0] == "/routes/billing/members/"
    assert "Route billing created." in response.content.decode()
    route = Route.objects.get(slug="billing")
    assert (route.name, _grading(route).graders_per_item, _pipeline(route)) == (
        "Billing questions",
        3,
        {"kind": "reference"},
    )
    assert _grading(route).guidelines.startswith("Grade **correct**")
    assert RouteMonitoring.objects.get(route=route).evidence_max_label_age_days == 60
    [created] = [e for e in _events(Action.ROUTE_CREATED) if e.route == "billing"]
    assert created.actor == "user:ada" and created.payload["name"] == {"old": None, "new": "Billing questions"}
    actions = set(AuditEvent.objects.filter(route="billing").values_list("action", flat=True))
    assert {"route_created", "route_updated", "shadow_pipeline_set", "route_monitoring_changed"} <= actions


def test_a_new_route_with_the_default_settings_writes_only_its_creation(admin_page):
    body = _new_route_body(**{"grading-guidelines": "", "shadow-pipeline": "none", "route-graders_per_item": "2"})
    body["monitoring-evidence_max_label_age_days"] = "90"
    admin_page.post("/routes/new/", body)
    assert list(AuditEvent.objects.filter(route="billing").values_list("action", flat=True)) == ["route_created"]


def test_route_creation_says_what_is_wrong_in_plain_words_and_creates_nothing(admin_page):
    body = _new_route_body(
        slug="it-support",
        **{"route-name": "", "route-graders_per_item": "0", "shadow-pipeline": "http", "shadow-url": "ftp://x"},
    )
    response = admin_page.post("/routes/new/", body)
    assert response.status_code == 200
    page = response.content.decode()
    assert "A route called it-support exists already; choose another slug." in page
    assert "Give the route a name." in page
    assert "At least one grader must grade each item." in page
    assert "Not an http(s) URL" in page
    for internal in ("graders_per_item", "evidence_max_label_age_days", "shadow_config"):
        assert f"{internal}:" not in page and f"{internal} " not in page.split("<main>")[1].split("name=")[0]
    assert Route.objects.count() == 1


def test_an_http_pipeline_needs_its_address(admin_page):
    page = admin_page.post("/routes/new/", _new_route_body(**{"shadow-pipeline": "http"})).content.decode()
    assert "Give the address of your pipeline." in page
    assert not Route.objects.filter(slug="billing").exists()


def test_an_admin_changes_a_routes_settings_and_each_change_is_audited_with_old_and_new(admin_page, route):
    body = _settings_body(route, **{"route-name": "IT help desk", "route-graders_per_item": "3"})
    body |= {"grading-guidelines": "New guidelines.", "shadow-pipeline": "reference"}
    body["monitoring-evidence_max_label_age_days"] = "30"
    response = admin_page.post("/routes/it-support/settings/", body, follow=True)
    assert "Saved the route&#x27;s route, grading, shadow pipeline, monitoring." in response.content.decode()
    route.refresh_from_db()
    assert (route.name, _grading(route).graders_per_item, _grading(route).guidelines) == (
        "IT help desk",
        3,
        "New guidelines.",
    )
    # one event per app whose settings changed, each naming its own fields
    renamed, regraded = _events(Action.ROUTE_UPDATED)[-2:]
    assert renamed.payload == {"name": {"old": "IT support", "new": "IT help desk"}}
    assert regraded.payload == {
        "guidelines": {"old": "", "new": "New guidelines."},
        "graders_per_item": {"old": 2, "new": 3},
    }
    assert {(e.actor, e.route) for e in (renamed, regraded)} == {("user:ada", "it-support")}
    assert _events(Action.SHADOW_PIPELINE_SET)[-1].payload["shadow_config"]["new"] == {"kind": "reference"}
    assert _events(Action.ROUTE_MONITORING_CHANGED)[-1].payload == {
        "evidence_max_label_age_days": {"old": 90, "new": 30}
    }


def test_saving_unchanged_settings_changes_and_audits_nothing(admin_page, route):
    before = AuditEvent.objects.count()
    response = admin_page.post("/routes/it-support/settings/", _settings_body(route), follow=True)
    assert "Nothing changed." in response.content.decode()
    assert AuditEvent.objects.count() == before


def test_guidelines_published_meanwhile_are_not_overwritten(admin_page, route):
    body = _settings_body(route, **{"grading-guidelines": "Mine."})
    from grading.services.pool import route_guidelines_update
    from tests.factories import TEST_ACTOR

    route_guidelines_update(actor=TEST_ACTOR, route=route, guidelines="Someone else's.")
    response = admin_page.post("/routes/it-support/settings/", body)
    assert "changed by someone else" in response.content.decode()
    assert _grading(route).guidelines == "Someone else's."


def test_the_settings_of_an_unknown_route_are_a_404(admin_page):
    assert admin_page.get("/routes/nowhere/settings/").status_code == 404
    assert admin_page.get("/routes/nowhere/members/").status_code == 404


# --- members ---------------------------------------------------------------------------------------


def test_an_admin_grants_an_existing_person_a_role_on_the_route(admin_page, route, other_route):
    make_user("gus")
    response = admin_page.post("/routes/it-support/members/", {"username": "gus", "role": "grader"}, follow=True)
    assert "gus is now grader here." in response.content.decode()
    grant = RoleGrant.objects.get(user__username="gus")
    assert (grant.role, grant.route) == ("grader", route)
    event = _events(Action.ROLE_GRANTED)[-1]
    assert event.actor == "user:ada" and event.route == "it-support"
    page = admin_page.get("/routes/it-support/members/").content.decode()
    assert "gus" in page and "Grader" in page
    assert "gus" not in admin_page.get("/routes/hr-policy/members/").content.decode()


def test_a_new_person_needs_an_email_and_is_then_created_with_the_role(admin_page, route):
    page = admin_page.post("/routes/it-support/members/", {"username": "newton", "role": "reader"}).content.decode()
    assert "Nobody is called newton yet: give their email address to add them as a new person." in page
    assert not RoleGrant.objects.filter(user__username="newton").exists()
    admin_page.post("/routes/it-support/members/", {"username": "newton", "email": "n@example.org", "role": "reader"})
    grant = RoleGrant.objects.get(user__username="newton")
    assert grant.user.email == "n@example.org" and not grant.user.has_usable_password()
    assert _events(Action.USER_CREATED)[-1].payload == {"username": {"old": None, "new": "newton"}}


def test_granting_a_role_twice_says_so_and_writes_nothing(admin_page, route):
    make_user("gus", "grader", route)
    before = AuditEvent.objects.count()
    page = admin_page.post("/routes/it-support/members/", {"username": "gus", "role": "grader"}, follow=True)
    assert "gus already is grader on this route." in page.content.decode()
    assert AuditEvent.objects.count() == before


def test_the_members_page_offers_no_admin_role_and_refuses_one(admin_page, route):
    make_user("gus")
    page = admin_page.post("/routes/it-support/members/", {"username": "gus", "role": "admin"}).content.decode()
    assert "Choose one of the listed roles." in page
    assert 'value="admin"' not in page and not RoleGrant.objects.filter(user__username="gus").exists()


def test_revoking_a_role_takes_the_access_away_and_is_audited(admin_page, route):
    reader = make_user("rhea", "reader", route)
    assert _page(reader).get("/refusals/").status_code == 200
    grant = RoleGrant.objects.get(user=reader)
    response = admin_page.post(f"/routes/it-support/members/{grant.pk}/revoke/", follow=True)
    assert "rhea is no longer reader here." in response.content.decode()
    assert not RoleGrant.objects.filter(pk=grant.pk).exists()
    event = _events(Action.ROLE_REVOKED)[-1]
    assert event.payload == {"role": {"old": "reader", "new": None}, "route": "it-support", "username": "rhea"}
    assert event.actor == "user:ada" and event.route == "it-support"
    assert _page(reader).get("/refusals/").status_code == 403


def test_a_grant_on_every_route_is_listed_but_not_revoked_from_one_route(admin_page, route):
    make_user("rita", "reviewer")
    grant = RoleGrant.objects.get(user__username="rita")
    page = admin_page.get("/routes/it-support/members/").content.decode()
    assert "rita" in page and "Every route" in page
    assert admin_page.post(f"/routes/it-support/members/{grant.pk}/revoke/").status_code == 404
    assert RoleGrant.objects.filter(pk=grant.pk).exists()


# --- tokens ----------------------------------------------------------------------------------------


def _create_token(admin_page, **overrides) -> str:
    body = {"name": "answering service", "owner": "ingo", "expires_on": ""} | overrides
    response = admin_page.post("/tokens/", body)
    assert response.status_code == 200
    return response.content.decode()


def _key_in(page: str) -> str:
    return page.split('id="new-token-key">', 1)[1].split("<", 1)[0]


def _api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_new_tokens_key_is_shown_once_and_only_its_hash_is_stored(admin_page, route):
    make_user("ingo", "integrator")
    page = _create_token(admin_page, expires_on=(timezone.now() + timedelta(days=30)).date().isoformat())
    key = _key_in(page)
    assert key.startswith("arc_") and "shown only this once" in page
    token = ApiToken.objects.get(name="answering service")
    assert token.key_hash == hash_token(key) and token.user.username == "ingo"
    assert token.expires_at.date() == (timezone.now() + timedelta(days=30)).date()
    assert key not in admin_page.get("/tokens/").content.decode()
    assert not ApiToken.objects.filter(key_hash=key).exists()
    assert _api(key).get("/api/v1/routes").status_code == 200
    event = _events(Action.TOKEN_ISSUED)[-1]
    assert event.actor == "user:ada" and key not in str(event.payload)
    assert event.payload["token"]["new"]["name"] == "answering service"


def test_the_token_page_is_never_cached(admin_page):
    assert "no-store" in admin_page.get("/tokens/")["Cache-Control"]


def test_the_token_list_shows_name_owner_created_expiry_and_last_use(admin_page, route):
    make_user("ingo", "integrator")
    key = _key_in(_create_token(admin_page))
    _api(key).get("/api/v1/routes")
    row = admin_page.get("/tokens/").content.decode().split('id="token-list"')[1].split("</table>")[0]
    token = ApiToken.objects.get(name="answering service")
    assert "answering service" in row and "ingo" in row and token.prefix in row
    assert token.last_used_at.strftime("%Y-%m-%d %H:%M") in row and "never" in row  # no expiry


def test_a_token_revoked_on_the_page_is_refused_with_401(admin_page, route):
    make_user("ingo", "integrator")
    key = _key_in(_create_token(admin_page))
    token = ApiToken.objects.get(name="answering service")
    response = admin_page.post(f"/tokens/{token.pk}/revoke/", follow=True)
    assert "Token answering service revoked" in response.content.decode()
    assert _api(key).get("/api/v1/routes").status_code == 401
    event = _events(Action.TOKEN_REVOKED)[-1]
    assert event.actor == "user:ada" and event.payload["revoked_at"]["old"] is None
    again = admin_page.post(f"/tokens/{token.pk}/revoke/", follow=True)
    assert "was revoked already" in again.content.decode()
    assert len(_events(Action.TOKEN_REVOKED)) == 1


def test_an_expired_token_is_refused_with_401(admin_page, route):
    make_user("ingo", "integrator")
    key = _key_in(_create_token(admin_page, expires_on=(timezone.now() + timedelta(days=1)).date().isoformat()))
    assert _api(key).get("/api/v1/routes").status_code == 200
    ApiToken.objects.filter(name="answering service").update(expires_at=timezone.now() - timedelta(seconds=1))
    response = _api(key).get("/api/v1/routes")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid, expired or revoked token."
    assert "expired" in admin_page.get("/tokens/").content.decode()


def test_token_form_errors_are_said_in_plain_words(admin_page, route):
    yesterday = (timezone.now() - timedelta(days=1)).date().isoformat()
    page = _create_token(admin_page, name="", owner="nobody-here", expires_on=yesterday)
    assert "Give the token a name." in page
    assert "Nobody is called nobody-here; add them on a route&#x27;s members page first." in page
    assert "Choose an expiry date after today." in page
    assert _create_token(admin_page, owner="ada", expires_on="31/12/2030").count("Give the expiry date as YYYY-MM-DD.")
    assert not ApiToken.objects.filter(name="answering service").exists()


def test_issue_token_names_the_token_and_gives_it_an_expiry(route, capsys):
    from django.core.management import call_command

    call_command("issue_token", "ingo", "--role", "integrator", "--name", "nightly import", "--expires-days", "7")
    key = capsys.readouterr().out.strip().splitlines()[-1]
    token = ApiToken.objects.get(key_hash=hash_token(key))
    assert token.name == "nightly import"
    assert timedelta(days=6, hours=23) < token.expires_at - timezone.now() <= timedelta(days=7)


# --- what every page of the site keeps ---------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
def test_every_help_and_error_text_a_field_names_is_on_the_page(admin_page, path):
    import re

    for response in (admin_page.get(path), admin_page.post(path, {"slug": "Not a slug!", "username": "x"})):
        page = response.content.decode()
        ids = set(re.findall(r'\sid="([^"]+)"', page))
        described = {i for value in re.findall(r'aria-describedby="([^"]+)"', page) for i in value.split()}
        assert described <= ids, described - ids


def test_the_tokens_expiry_is_typed_as_iso_text(admin_page):
    page = admin_page.get("/tokens/").content.decode()
    [expiry] = [i for i in page.split("<input") if 'name="expires_on"' in i]
    assert 'type="text"' in expiry and 'placeholder="YYYY-MM-DD"' in expiry


@pytest.mark.parametrize("path", ["/workspace/", "/routes/it-support/members/", "/tokens/"])
def test_the_workspace_lists_take_the_same_queries_however_long_they_grow(admin_page, route, path):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from console.accounts import services as accounts
    from tests.factories import TEST_ACTOR, make_route

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_page.get(path).status_code == 200
        return len(captured)

    before = queries()
    for n in range(5):
        user = make_user(f"member-{n}", "reader", route)
        accounts.token_issue(actor=TEST_ACTOR, user=user, name=f"token {n}")
        make_route(f"route-{n}")
    assert queries() == before


def test_the_workspace_leads_an_admin_to_the_sampling_plans_and_gold_items(db):
    admin = make_user("tab-admin", "admin")
    client = Client()
    client.force_login(admin)
    page = client.get("/workspace/").content.decode()
    assert 'href="/grading/plans/"' in page
