"""Each person's Security page (/accounts/security/): their own browser sessions and API tokens,
each of which they can end; nobody sees or ends anyone else's."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from django.contrib.sessions.models import Session
from django.test import Client

from audit.models import AuditEvent
from console.accounts import middleware
from console.accounts.models import ApiToken, UserSession
from tests.factories import make_token, make_user

PAGE = "/accounts/security/"
PASSWORD = "pw-12345678"


def _signed_in(username: str, *, agent: str = "Firefox/140", address: str = "10.1.0.1") -> Client:
    browser = Client(enforce_csrf_checks=True, HTTP_USER_AGENT=agent, REMOTE_ADDR=address)
    page = browser.get("/accounts/login/")
    token = browser.cookies["csrftoken"].value
    answer = browser.post(
        "/accounts/login/", {"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert answer.status_code == 302, page.content
    return browser


def _post(browser: Client, path: str):
    return browser.post(path, {"csrfmiddlewaretoken": browser.cookies["csrftoken"].value})


@pytest.fixture
def ada(db):
    return make_user("ada", "reviewer")


@pytest.fixture
def bob(db):
    return make_user("bob", "integrator")


def test_each_sign_in_is_listed_with_its_browser_address_and_times_the_current_one_marked(ada):
    laptop = _signed_in("ada", agent="Firefox/140 (laptop)", address="10.1.0.1")
    _signed_in("ada", agent="Safari/19 (phone)", address="10.1.0.2")
    response = laptop.get(PAGE)
    page = response.content.decode()
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    assert "Firefox/140 (laptop)" in page and "Safari/19 (phone)" in page
    assert "10.1.0.1" in page and "10.1.0.2" in page
    current = re.search(r'<tr aria-current="true"[^>]*>(.*?)</tr>', page, re.S).group(1)
    assert "laptop" in current and "(this browser)" in current
    assert page.count("(this browser)") == 1


def test_ending_a_session_signs_that_browser_out_and_is_audited(ada):
    laptop = _signed_in("ada", agent="laptop")
    phone = _signed_in("ada", agent="phone")
    row = UserSession.objects.get(user_agent="phone")
    assert _post(laptop, f"/accounts/security/sessions/{row.pk}/end/").status_code == 302
    assert phone.get("/refusals/").status_code == 302  # sent to sign in
    assert laptop.get("/refusals/").status_code == 200
    event = AuditEvent.objects.filter(action="session_ended").get()
    assert event.actor == "user:ada" and event.object_id == str(ada.pk)
    assert event.payload["session"]["user_agent"] == "phone"
    assert event.payload["ended_at"]["old"] is None and event.payload["ended_at"]["new"]
    assert row.session_key not in str(event.payload)  # a bearer secret never enters the trail


def test_sign_out_everywhere_else_keeps_only_this_browser(ada):
    here = _signed_in("ada", agent="here")
    elsewhere = [_signed_in("ada", agent=f"elsewhere-{n}") for n in range(3)]
    assert _post(here, "/accounts/security/sessions/end-others/").status_code == 302
    assert all(browser.get("/refusals/").status_code == 302 for browser in elsewhere)
    assert here.get("/refusals/").status_code == 200
    assert list(UserSession.objects.values_list("user_agent", flat=True)) == ["here"]
    assert AuditEvent.objects.filter(action="session_ended").count() == 3


def test_the_current_session_is_not_ended_from_its_row(ada):
    here = _signed_in("ada")
    row = UserSession.objects.get()
    response = _post(here, f"/accounts/security/sessions/{row.pk}/end/")
    assert response.status_code == 302 and here.get("/refusals/").status_code == 200
    assert not AuditEvent.objects.filter(action="session_ended").exists()


def test_a_person_sees_and_revokes_their_own_tokens_only(ada, bob):
    make_token(ada)
    ApiToken.objects.filter(user=ada).update(name="ada-laptop-script")
    bob_key = make_token(bob)
    ApiToken.objects.filter(user=bob).update(name="bob-ingest")
    page = _signed_in("ada").get(PAGE).content.decode()
    assert "ada-laptop-script" in page and "bob-ingest" not in page
    assert "reviewer" in page  # the role the token acts with
    assert 'href="/notifications/"' in page
    browser = _signed_in("ada")
    token = ApiToken.objects.get(user=ada)
    assert _post(browser, f"/accounts/security/tokens/{token.pk}/revoke/").status_code == 302
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    event = AuditEvent.objects.filter(action="token_revoked").get()
    assert event.actor == "user:ada"
    bobs = ApiToken.objects.get(user=bob)
    assert _post(browser, f"/accounts/security/tokens/{bobs.pk}/revoke/").status_code == 404
    assert ApiToken.objects.get(pk=bobs.pk).revoked_at is None
    assert Client().get("/api/v1/routes", HTTP_AUTHORIZATION=f"Token {bob_key}").status_code == 200


def test_nobody_ends_another_persons_session(ada, bob):
    bob_browser = _signed_in("bob", agent="bob's browser")
    ada_browser = _signed_in("ada")
    bobs = UserSession.objects.get(user=bob)
    assert _post(ada_browser, f"/accounts/security/sessions/{bobs.pk}/end/").status_code == 404
    assert "bob&#x27;s browser" not in ada_browser.get(PAGE).content.decode()
    _post(ada_browser, "/accounts/security/sessions/end-others/")
    assert bob_browser.get("/refusals/").status_code == 200
    assert Session.objects.filter(session_key=bobs.session_key).exists()


def test_the_actions_take_post_with_csrf_only(ada):
    browser = _signed_in("ada")
    row = UserSession.objects.get()
    token = ApiToken.objects.get(pk=ApiToken.objects.create(user=ada, key_hash="x" * 64, prefix="arc_x").pk)
    for path in (
        f"/accounts/security/sessions/{row.pk}/end/",
        "/accounts/security/sessions/end-others/",
        f"/accounts/security/tokens/{token.pk}/revoke/",
    ):
        assert browser.get(path).status_code == 405
        assert browser.post(path).status_code == 403  # no CSRF token
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    assert not AuditEvent.objects.filter(action__in=["session_ended", "token_revoked"]).exists()


def test_signed_out_visitors_are_sent_to_sign_in(db):
    assert Client().get(PAGE).status_code == 302
    assert Client().post("/accounts/security/sessions/end-others/").status_code in (302, 403)


def test_last_seen_moves_at_most_once_a_minute(ada, monkeypatch):
    browser = _signed_in("ada", address="10.1.0.1")
    row = UserSession.objects.get()
    browser.get("/refusals/", REMOTE_ADDR="10.1.0.9")
    assert UserSession.objects.get().last_seen_at == row.last_seen_at  # within the minute: nothing written
    later = time.time() + 61
    monkeypatch.setattr(middleware, "time", type("Clock", (), {"time": staticmethod(lambda: later)}))
    browser.get("/refusals/", REMOTE_ADDR="10.1.0.9")
    moved = UserSession.objects.get()
    assert moved.last_seen_at > row.last_seen_at and moved.ip_address == "10.1.0.9"


def test_the_header_links_to_the_page(ada):
    page = _signed_in("ada").get("/refusals/").content.decode()
    assert f'href="{PAGE}"' in page


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_over_http_a_person_cannot_see_or_end_anothers_sessions_or_tokens(live_server):
    """The same, through a real server and real HTTP: two people, each in their own browser."""
    ada, bob = make_user("ada", "reviewer"), make_user("bob", "integrator")
    make_token(bob)
    bobs_token = ApiToken.objects.get(user=bob)

    def browser(username: str) -> httpx.Client:
        client = httpx.Client(base_url=live_server.url, follow_redirects=False, timeout=20)
        client.get("/accounts/login/")
        answer = client.post(
            "/accounts/login/",
            data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": client.cookies["csrftoken"]},
            headers={"Referer": live_server.url},
        )
        assert answer.status_code == 302
        return client

    ada_http, bob_http = browser("ada"), browser("bob")
    try:
        bobs_session = UserSession.objects.get(user=bob)
        page = ada_http.get("/accounts/security/")
        assert page.status_code == 200 and bobs_token.prefix not in page.text
        form = {"csrfmiddlewaretoken": ada_http.cookies["csrftoken"]}
        headers = {"Referer": live_server.url}
        for path in (
            f"/accounts/security/sessions/{bobs_session.pk}/end/",
            f"/accounts/security/tokens/{bobs_token.pk}/revoke/",
        ):
            assert ada_http.post(path, data=form, headers=headers).status_code == 404
        assert ada_http.post("/accounts/security/sessions/end-others/", data=form, headers=headers).status_code == 302
        assert bob_http.get("/refusals/").status_code == 200
        assert ApiToken.objects.get(pk=bobs_token.pk).revoked_at is None
        assert ada.browser_sessions.count() == 1
    finally:
        ada_http.close()
        bob_http.close()
