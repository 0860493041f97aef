"""Per-token rate limits: 429 with Retry-After past a token's calls a minute, set per token."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from audit.models import Action, AuditEvent
from console.accounts import services
from console.accounts.models import ApiToken, hash_token
from tests.factories import TEST_ACTOR, make_user

URL = "/api/v1/routes"


def _client_with_rate(user, rate: int | None) -> tuple[APIClient, ApiToken]:
    issued = services.token_issue(actor=TEST_ACTOR, user=user, rate_per_minute=rate)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
    return client, issued.token


def _later(token: ApiToken, seconds: float) -> None:
    """As if `seconds` passed: the token's allowance instant moves back by as much."""
    token.refresh_from_db()
    ApiToken.objects.filter(pk=token.pk).update(rate_allowance_at=token.rate_allowance_at - timedelta(seconds=seconds))


@pytest.fixture
def integrator_user(route):
    return make_user("rated", "integrator")


def test_a_token_past_its_rate_gets_429_with_retry_after_in_the_envelope(integrator_user):
    client, _ = _client_with_rate(integrator_user, 2)
    assert [client.get(URL).status_code for _ in range(2)] == [200, 200]
    refused = client.get(URL)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "throttled"
    assert 29 <= int(refused["Retry-After"]) <= 30  # one call every 30 s at 2 a minute


def test_a_refused_call_costs_nothing_and_the_call_after_retry_after_fits(integrator_user):
    client, token = _client_with_rate(integrator_user, 2)
    for _ in range(2):
        client.get(URL)
    for _ in range(5):
        wait = int(client.get(URL)["Retry-After"])
    _later(token, wait)
    assert client.get(URL).status_code == 200
    assert client.get(URL).status_code == 429


def test_each_token_has_its_own_count(integrator_user):
    busy, _ = _client_with_rate(integrator_user, 1)
    other, _ = _client_with_rate(integrator_user, 1)
    assert busy.get(URL).status_code == 200
    assert busy.get(URL).status_code == 429
    assert other.get(URL).status_code == 200


def test_a_token_without_a_rate_takes_the_settings_default(integrator_user, settings):
    settings.API_TOKEN_RATE_PER_MINUTE = 3
    client, _ = _client_with_rate(integrator_user, None)
    assert [client.get(URL).status_code for _ in range(4)] == [200, 200, 200, 429]


def test_a_default_of_zero_leaves_tokens_without_a_rate_unlimited(integrator_user, settings):
    settings.API_TOKEN_RATE_PER_MINUTE = 0
    client, token = _client_with_rate(integrator_user, None)
    assert all(client.get(URL).status_code == 200 for _ in range(20))
    token.refresh_from_db()
    assert token.rate_allowance_at is None


def test_the_default_rate_is_generous_enough_for_the_suite(settings):
    assert settings.API_TOKEN_RATE_PER_MINUTE >= 6000


def test_signed_in_sessions_are_not_rate_limited(integrator_user, settings):
    settings.API_TOKEN_RATE_PER_MINUTE = 1
    client = APIClient()
    client.force_login(integrator_user)
    assert all(client.get(URL).status_code == 200 for _ in range(3))


def test_a_bad_key_is_401_not_counted_against_anyone(integrator_user):
    client, token = _client_with_rate(integrator_user, 1)
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Token arc_not-a-key")
    assert stranger.get(URL).status_code == 401
    assert client.get(URL).status_code == 200


def test_setting_a_tokens_rate_is_audited_as_a_field_change(integrator_user):
    _, token = _client_with_rate(integrator_user, None)
    assert services.token_rate_set(actor=TEST_ACTOR, token=token, rate_per_minute=120)
    assert not services.token_rate_set(actor=TEST_ACTOR, token=token, rate_per_minute=120)
    [event] = AuditEvent.objects.filter(action=Action.TOKEN_RATE_CHANGED)
    assert event.payload["rate_per_minute"] == {"old": None, "new": 120}
    assert event.payload["token_prefix"] == token.prefix


def test_a_new_rate_applies_from_the_next_call(integrator_user):
    client, token = _client_with_rate(integrator_user, 1)
    assert client.get(URL).status_code == 200
    assert client.get(URL).status_code == 429
    services.token_rate_set(actor=TEST_ACTOR, token=token, rate_per_minute=1000)
    assert client.get(URL).status_code == 200


def test_admins_set_a_tokens_rate_on_the_tokens_page(route, integrator_user):
    _, token = _client_with_rate(integrator_user, None)
    admin = Client()
    admin.force_login(make_user("ada", "admin"))
    page = admin.get("/tokens/").content.decode()
    assert f"/tokens/{token.pk}/rate/" in page and "Calls a minute" in page
    response = admin.post(f"/tokens/{token.pk}/rate/", {"rate_per_minute": "90"})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.rate_per_minute == 90
    admin.post(f"/tokens/{token.pk}/rate/", {"rate_per_minute": ""})
    token.refresh_from_db()
    assert token.rate_per_minute is None
    changes = [e.payload["rate_per_minute"] for e in AuditEvent.objects.filter(action=Action.TOKEN_RATE_CHANGED)]
    assert changes == [{"old": None, "new": 90}, {"old": 90, "new": None}]
    admin.post(f"/tokens/{token.pk}/rate/", {"rate_per_minute": "0"})
    token.refresh_from_db()
    assert token.rate_per_minute is None


def test_a_new_token_may_be_given_a_rate_on_the_tokens_page(route, integrator_user):
    admin = Client()
    admin.force_login(make_user("ada", "admin"))
    admin.post("/tokens/", {"name": "fast", "owner": "rated", "expires_on": "", "rate_per_minute": "240"})
    assert ApiToken.objects.get(name="fast").rate_per_minute == 240


def test_only_admins_set_rates(route, integrator_user):
    _, token = _client_with_rate(integrator_user, None)
    reviewer = Client()
    reviewer.force_login(make_user("rex", "reviewer"))
    assert reviewer.post(f"/tokens/{token.pk}/rate/", {"rate_per_minute": "5"}).status_code == 403
    token.refresh_from_db()
    assert token.rate_per_minute is None


def test_issue_token_takes_a_rate(route):
    out = io.StringIO()
    call_command("issue_token", "batchy", "--role", "integrator", "--rate", "30", stdout=out, stderr=io.StringIO())
    key = out.getvalue().strip().splitlines()[-1]
    assert ApiToken.objects.get(key_hash=hash_token(key)).rate_per_minute == 30
