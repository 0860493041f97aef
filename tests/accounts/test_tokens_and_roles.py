import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.test import APIClient

from console.accounts.models import ApiToken, RoleGrant
from tests.factories import ingest, make_route, record


def _issue(capsys, *args) -> str:
    call_command("issue_token", *args)
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_issue_token_creates_the_user_and_prints_the_token_last(db, capsys):
    key = _issue(capsys, "newbie", "--role", "reviewer")
    assert key.startswith("arc_") and len(key) > 40
    grant = RoleGrant.objects.get(user__username="newbie")
    assert grant.role == "reviewer" and grant.route is None


def test_tokens_are_stored_only_as_hashes(db, capsys):
    key = _issue(capsys, "someone", "--role", "auditor")
    token = ApiToken.objects.get(user__username="someone")
    assert token.key_hash != key and len(token.key_hash) == 64
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM accounts_apitoken WHERE key_hash = %s OR prefix = %s", [key, key])
        assert cursor.fetchone()[0] == 0


def test_an_issued_token_authenticates_with_its_role(route, capsys):
    [decision_id] = ingest([record()])
    key = _issue(capsys, "api-reader", "--role", "reviewer")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get(f"/api/v1/decisions/{decision_id}").status_code == 200


def test_a_role_with_a_route_covers_only_that_route(route, capsys):
    make_route("hr-policy")
    key = _issue(capsys, "it-only", "--role", "integrator", "--route", "it-support")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.post("/api/v1/decisions", {"decisions": [record()]}, format="json").status_code == 201
    # Another route reads as unknown (400 unknown_route), so the token learns nothing about it.
    assert (
        client.post("/api/v1/decisions", {"decisions": [record(route="hr-policy")]}, format="json").status_code == 400
    )


def test_issue_token_refuses_an_unknown_route_or_role(db):
    with pytest.raises(CommandError, match="Unknown route"):
        call_command("issue_token", "x", "--role", "grader", "--route", "nope")
    with pytest.raises(CommandError):
        call_command("issue_token", "x", "--role", "emperor")


def test_a_revoked_token_is_refused(route, capsys):
    from django.utils import timezone

    key = _issue(capsys, "leaver", "--role", "reviewer")
    ApiToken.objects.filter(user__username="leaver").update(revoked_at=timezone.now())
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/routes").status_code == 401
