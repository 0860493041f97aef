"""Failed sign-ins and bad API tokens are throttled per username and per client address."""

import time
from types import SimpleNamespace

import pytest
from django.test import Client
from rest_framework.test import APIClient

from console.accounts import throttle
from tests.at_once import at_once
from tests.factories import make_token, make_user

LOGIN = "/accounts/login/"


@pytest.fixture
def ada(db):
    return make_user("ada", "reviewer", password="the-right-password")


def _sign_in(password: str, *, username: str = "ada", address: str = "10.0.0.1", client: Client | None = None):
    client = client or Client()
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_five_wrong_passwords_lock_the_username_even_for_the_right_one(ada):
    for _ in range(5):
        response = _sign_in("wrong")
        assert response.status_code == 200 and "did not match" in response.content.decode()
    response = _sign_in("the-right-password")
    assert response.status_code == 429
    assert "Too many failed attempts; try again in 15 minutes." in response.content.decode()
    assert 0 < int(response["Retry-After"]) <= 900
    assert "_auth_user_id" not in response.client.session


def test_the_username_count_follows_it_across_addresses_and_case(ada):
    for n in range(5):
        _sign_in("wrong", username="ADA" if n % 2 else "ada", address=f"10.0.1.{n}")
    assert _sign_in("the-right-password", address="10.0.9.9").status_code == 429


def test_one_address_failing_for_many_usernames_is_locked_out(ada, settings):
    settings.LOGIN_FAILURES_PER_CLIENT = 8
    for n in range(8):
        _sign_in("guess", username=f"someone-{n}", address="10.0.0.66")
    assert _sign_in("the-right-password", address="10.0.0.66").status_code == 429
    response = _sign_in("the-right-password", address="10.0.0.67")
    assert response.status_code == 302 and response["Location"] == "/"


def test_signing_in_clears_the_usernames_count(ada):
    for _ in range(4):
        _sign_in("wrong")
    assert _sign_in("the-right-password").status_code == 302
    for _ in range(4):
        _sign_in("wrong")
    assert _sign_in("the-right-password").status_code == 302


def test_attempts_are_allowed_again_when_the_window_ends(ada, monkeypatch):
    now = [time.time()]
    monkeypatch.setattr(throttle, "time", SimpleNamespace(time=lambda: now[0]))
    for _ in range(5):
        _sign_in("wrong")
    now[0] += 14 * 60
    response = _sign_in("the-right-password")
    assert response.status_code == 429 and "try again in 1 minute." in response.content.decode()
    now[0] += 60
    assert _sign_in("the-right-password").status_code == 302


def test_behind_a_proxy_the_address_it_appended_is_the_client(ada, settings):
    settings.CLIENT_IP_HEADER = "X-Forwarded-For"
    settings.LOGIN_FAILURES_PER_CLIENT = 3
    for n in range(3):
        # The client controls the left part of the header; the proxy appends the real address last.
        Client().post(
            LOGIN,
            {"username": f"x{n}", "password": "p"},
            REMOTE_ADDR="10.9.9.9",
            HTTP_X_FORWARDED_FOR=f"1.2.3.{n}, 203.0.113.7",
        )
    blocked = Client().post(
        LOGIN,
        {"username": "ada", "password": "the-right-password"},
        REMOTE_ADDR="10.9.9.9",
        HTTP_X_FORWARDED_FOR="203.0.113.7",
    )
    assert blocked.status_code == 429
    other = Client().post(
        LOGIN,
        {"username": "ada", "password": "the-right-password"},
        REMOTE_ADDR="10.9.9.9",
        HTTP_X_FORWARDED_FOR="198.51.100.1",
    )
    assert other.status_code == 302


def test_a_client_sending_bad_api_tokens_is_throttled_and_good_tokens_still_work(ada, settings):
    settings.LOGIN_FAILURES_PER_CLIENT = 4
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token arc_not-a-real-token")
    for _ in range(4):
        assert client.get("/api/v1/routes", REMOTE_ADDR="10.0.0.5").status_code == 401
    response = client.get("/api/v1/routes", REMOTE_ADDR="10.0.0.5")
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "throttled" and int(response["Retry-After"]) > 0
    assert client.get("/api/v1/routes", REMOTE_ADDR="10.0.0.6").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(ada)}")
    assert client.get("/api/v1/routes", REMOTE_ADDR="10.0.0.5").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_wrong_passwords_sent_at_once_cannot_race_past_the_limit(monkeypatch):
    """Twelve guesses at once against a limit of five: each attempt is checked and counted under
    the username's lock, so at most five are tried and the rest are refused."""

    from django.contrib.auth.models import AbstractBaseUser
    from django.core.cache import cache

    cache.clear()
    make_user("ada", "reviewer", password="the-right-password")
    real_check = AbstractBaseUser.check_password

    def slow_check(self, raw):  # widen the window between reading the count and writing it
        time.sleep(0.2)
        return real_check(self, raw)

    monkeypatch.setattr(AbstractBaseUser, "check_password", slow_check)
    codes = at_once(range(12), lambda n: _sign_in(f"guess-{n}", address=f"10.0.3.{n}").status_code)
    assert sorted(codes) == [200] * 5 + [429] * 7
    cache.clear()


@pytest.mark.django_db(transaction=True)
def test_bad_api_tokens_sent_at_once_cannot_race_past_the_clients_limit(settings, monkeypatch):
    """Twelve bad keys at once from one address against a limit of five: the check and the count
    happen under the client's lock, so five are answered 401 and the rest 429."""

    from django.core.cache import cache
    from django.core.cache.backends.db import DatabaseCache

    cache.clear()
    settings.LOGIN_FAILURES_PER_CLIENT = 5
    real_get = DatabaseCache.get

    def slow_get(self, key, *args, **kwargs):  # widen the window between reading the count and writing it
        value = real_get(self, key, *args, **kwargs)
        if key.startswith("throttle:api-token:"):
            time.sleep(0.2)
        return value

    monkeypatch.setattr(DatabaseCache, "get", slow_get)

    def client_of(n: int) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token arc_guess-{n}")
        return client

    codes = at_once(
        range(12), lambda client: client.get("/api/v1/routes", REMOTE_ADDR="10.0.5.5").status_code, prepare=client_of
    )
    assert sorted(codes) == [401] * 5 + [429] * 7
    cache.clear()


def test_the_failure_that_locks_a_username_out_is_audited_once(ada):
    from audit.models import AuditEvent

    for _ in range(7):
        _sign_in("wrong")
    events = list(AuditEvent.objects.filter(action="sign_in_locked_out"))
    assert len(events) == 1
    event = events[0]
    assert (event.actor, event.object_type, event.object_id) == ("system:sign-in-throttle", "sign_in", "ada")
    assert event.payload["username"] == "ada" and event.payload["client"] == "10.0.0.1"
    assert event.payload["failures"] == 5
    assert event.payload["locked_until"]["old"] is None and event.payload["locked_until"]["new"]


def test_a_client_locked_out_is_audited_by_its_address(ada, settings):
    from audit.models import AuditEvent

    settings.LOGIN_FAILURES_PER_CLIENT = 3
    for n in range(3):
        _sign_in("guess", username=f"someone-{n}", address="10.0.7.7")
    (event,) = AuditEvent.objects.filter(action="sign_in_locked_out")
    assert (event.object_id, event.payload["username"]) == ("10.0.7.7", "someone-2")


def test_an_admin_lifts_a_lockout_with_axes_reset_username(ada):
    from django.core.management import call_command

    for _ in range(5):
        _sign_in("wrong")
    assert _sign_in("the-right-password").status_code == 429
    call_command("axes_reset_username", "ada")
    assert _sign_in("the-right-password").status_code == 302


def test_sign_in_checks_pass_through_django_axes(settings):
    from axes.backends import AxesStandaloneBackend
    from django.utils.module_loading import import_string

    first = import_string(settings.AUTHENTICATION_BACKENDS[0])
    assert issubclass(first, AxesStandaloneBackend)
    assert "axes.middleware.AxesMiddleware" in settings.MIDDLEWARE
