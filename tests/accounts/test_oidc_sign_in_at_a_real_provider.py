"""Sign-in at a real, certified OpenID provider (oidc-provider on Node.js, tests/accounts/oidc_provider)
started by these tests, with people and groups the tests write: the whole authorization code flow with
PKCE, the roles that follow the groups (and go when a group is removed), a replayed answer refused,
the session's maximum age, step-up (the provider asks again), and logout both ways (the console's
sign-out ends the provider's session; the provider's back-channel logout ends the console's)."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import httpx
import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from audit.models import AuditEvent
from console.accounts.models import RoleGrant, UserSession
from tests import factories
from tests.accounts.oidc_fixtures import RealProvider

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def console_url(live_server):
    # One host for both: Node's fetch (the back-channel logout) and httpx reach 127.0.0.1 alike.
    return live_server.url.replace("localhost", "127.0.0.1")


@pytest.fixture(scope="module")
def idp(console_url, tmp_path_factory):
    provider = RealProvider(console_url, tmp_path_factory.mktemp("oidc") / "users.json")
    yield provider
    provider.stop()


@pytest.fixture
def configured(idp, settings):
    idp.configure(settings)
    factories.make_route("it-support", "IT support")
    return idp


_browsers: list[httpx.Client] = []


@pytest.fixture(autouse=True)
def _close_browsers():
    # A kept-alive connection keeps the live server's thread, and its database connection, open.
    yield
    while _browsers:
        _browsers.pop().close()


def browse(console_url: str, login: str, password: str, *, browser: httpx.Client | None = None):
    """A person's browser: from the console's sign-in link to the provider's login form, and back."""
    if browser is None:
        browser = httpx.Client(follow_redirects=True, timeout=20)
        _browsers.append(browser)
    page = browser.get(f"{console_url}/accounts/oidc/login/?next=/refusals/")
    if "/interaction/" in str(page.url):
        page = browser.post(f"{page.url}/login", data={"login": login, "password": password})
    return browser, page


def callback_url(page: httpx.Response) -> str:
    return next(str(r.url) for r in page.history if "/accounts/oidc/callback/" in str(r.url))


def test_a_person_signs_in_at_the_provider_with_the_roles_their_groups_name(configured, console_url):
    configured.set_users(
        {"ada": {"password": "pw", "email": "ada@example.org", "groups": ["reviewer:it-support", "grader", "hr"]}}
    )
    browser, page = browse(console_url, "ada", "pw")
    assert page.status_code == 200 and page.url.path == "/refusals/"
    grants = {
        (g.role, g.route.slug if g.route_id else None, g.source) for g in RoleGrant.objects.filter(user__username="ada")
    }
    assert grants == {("reviewer", "it-support", "provider"), ("grader", None, "provider")}
    # The session lasts no longer than the maximum age: the provider may never say it ended.
    session = Session.objects.get(session_key=browser.cookies["sessionid"])
    assert session.expire_date <= timezone.now() + timedelta(seconds=8 * 3600 + 5)


def test_a_group_removed_at_the_provider_takes_the_role_away_at_the_next_sign_in(configured, console_url):
    configured.set_users(
        {"bob": {"password": "pw", "email": "bob@example.org", "groups": ["reviewer:it-support", "reader"]}}
    )
    browse(console_url, "bob", "pw")
    configured.set_users({"bob": {"password": "pw", "email": "bob@example.org", "groups": ["reader"]}})
    browse(console_url, "bob", "pw")  # a new browser: a new sign-in at the provider
    assert set(RoleGrant.objects.filter(user__username="bob").values_list("role", flat=True)) == {"reader"}
    revoked = AuditEvent.objects.get(action="role_revoked", payload__username="bob")
    assert revoked.payload["role"] == {"old": "reviewer", "new": None}


def test_a_replayed_answer_from_the_provider_is_refused(configured, console_url):
    configured.set_users({"cy": {"password": "pw", "email": "cy@example.org", "groups": ["reader"]}})
    browser, page = browse(console_url, "cy", "pw")
    answer = callback_url(page)
    assert browser.get(answer).status_code == 400  # the same browser: its state was used up
    assert (
        httpx.get(answer, timeout=20, headers={"Connection": "close"}).status_code == 400
    )  # another browser never started it


def test_a_wrong_password_at_the_provider_signs_nobody_in(configured, console_url):
    configured.set_users({"dee": {"password": "pw", "email": "dee@example.org", "groups": ["reader"]}})
    _, page = browse(console_url, "dee", "wrong")
    assert "Wrong login or password" in page.text
    assert not RoleGrant.objects.filter(user__username="dee").exists()


def _confirm_logout_at_provider(browser: httpx.Client, page: httpx.Response) -> httpx.Response:
    xsrf = re.search(r'name="xsrf" value="([^"]+)"', page.text)
    assert xsrf, page.text[:500]
    action = re.search(r'action="([^"]+)"', page.text)[1]
    return browser.post(httpx.URL(str(page.url)).join(action), data={"xsrf": xsrf[1], "logout": "yes"})


def test_signing_out_of_the_console_ends_the_session_at_the_provider_too(configured, console_url):
    configured.set_users({"eve": {"password": "pw", "email": "eve@example.org", "groups": ["reader"]}})
    browser, page = browse(console_url, "eve", "pw")
    csrf = browser.cookies["csrftoken"]
    page = browser.post(
        f"{console_url}/accounts/logout/", data={"csrfmiddlewaretoken": csrf}, headers={"Referer": console_url}
    )
    assert "/session/end" in str(page.url)
    page = _confirm_logout_at_provider(browser, page)
    assert page.url.path == "/accounts/login/"
    # Signing in again asks for the password at the provider: its session ended.
    again = browser.get(f"{console_url}/accounts/oidc/login/")
    assert "/interaction/" in str(again.url)


def test_the_providers_back_channel_logout_ends_the_console_session(configured, console_url):
    configured.set_users({"fay": {"password": "pw", "email": "fay@example.org", "groups": ["reader"]}})
    browser, _ = browse(console_url, "fay", "pw")
    assert browser.get(f"{console_url}/refusals/").url.path == "/refusals/"
    # The person signs out at the provider (another application's sign-out, say), not in the console.
    page = browser.get(f"{configured.issuer}/session/end", params={"client_id": configured.client_id})
    _confirm_logout_at_provider(browser, page)
    assert "backchannel.success" in configured.log.read_text(), configured.log.read_text()
    assert browser.get(f"{console_url}/refusals/").url.path == "/accounts/login/"


def test_a_back_channel_logout_is_audited_and_leaves_the_persons_other_sessions_listed_correctly(
    configured, console_url
):
    """Two browsers of one person at the provider; the provider ends one of its sessions: that console
    session ends (audited as session_ended by the back-channel logout) and the other stays on the
    person's Security page."""
    configured.set_users({"kit": {"password": "pw", "email": "kit@example.org", "groups": ["reader"]}})
    first, _ = browse(console_url, "kit", "pw")
    second, _ = browse(console_url, "kit", "pw")
    assert UserSession.objects.filter(user__username="kit").count() == 2
    page = first.get(f"{configured.issuer}/session/end", params={"client_id": configured.client_id})
    _confirm_logout_at_provider(first, page)
    assert first.get(f"{console_url}/refusals/").url.path == "/accounts/login/"
    security = second.get(f"{console_url}/accounts/security/")
    assert security.status_code == 200 and security.text.count("(this browser)") == 1
    assert UserSession.objects.filter(user__username="kit").count() == 1
    event = AuditEvent.objects.filter(action="session_ended").get()
    assert event.actor == "system:oidc-backchannel-logout" and event.payload["username"] == "kit"


def test_a_forged_back_channel_logout_is_refused(configured, console_url):
    response = httpx.post(
        f"{console_url}/accounts/oidc/backchannel-logout/",
        data={"logout_token": "e30.e30.sig"},
        headers={"Connection": "close"},
    )
    assert response.status_code == 400


def test_step_up_makes_the_provider_ask_for_the_password_again_and_keeps_its_evidence(configured, console_url):
    configured.set_users({"gus": {"password": "pw", "email": "gus@example.org", "groups": ["policy_owner"]}})
    browser, _ = browse(console_url, "gus", "pw")
    started = int(time.time())
    # The provider's session is live: a plain sign-in would come straight back; a step-up must ask.
    page = browser.get(f"{console_url}/accounts/oidc/login/?step_up=1&next=/refusals/")
    assert "/interaction/" in str(page.url) and 'name="password"' in page.text
    page = browser.post(f"{page.url}/login", data={"login": "gus", "password": "pw"})
    assert page.url.path == "/refusals/"
    evidence = SessionStore(session_key=browser.cookies["sessionid"])["oidc_fresh_auth"]
    assert evidence["auth_time"] >= started - 1 and evidence["subject"] == "gus"


def test_a_step_up_as_someone_else_is_refused(configured, console_url):
    configured.set_users(
        {
            "hal": {"password": "pw", "email": "hal@example.org", "groups": ["policy_owner"]},
            "ivy": {"password": "pw", "email": "ivy@example.org", "groups": ["reader"]},
        }
    )
    browse(console_url, "ivy", "pw")  # ivy has an account too
    browser, _ = browse(console_url, "hal", "pw")
    page = browser.get(f"{console_url}/accounts/oidc/login/?step_up=1&next=/refusals/")
    page = browser.post(f"{page.url}/login", data={"login": "ivy", "password": "pw"})
    if "document.forms[0].submit()" in page.text:  # the provider's page for a changed account submits itself
        action = re.search(r'action="([^"]+)"', page.text)[1]
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
        page = browser.post(httpx.URL(str(page.url)).join(action.replace("&amp;", "&")), data=fields)
    # Another account at the provider ends hal's session there, and its back-channel logout ends hal's
    # session here: the answer finds no sign-in waiting for it and is refused; nothing is confirmed.
    assert page.status_code in (400, 403), (str(page.url), page.text[:300])
    assert not any("oidc_fresh_auth" in session.get_decoded() for session in Session.objects.all())
    assert browser.get(f"{console_url}/refusals/").url.path == "/accounts/login/"
