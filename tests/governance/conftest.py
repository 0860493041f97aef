"""Fixtures of the policy sign-off tests: a route with graded decisions and a draft body.

The graded decisions are built once per test module, as a world (tests/worlds.py): a test that takes
`graded` starts from them, with their route and integrator, and its own writes roll back after it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests import factories
from tests.analysis.populations import census_world


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {factories.make_token(user)}")
    client.user = user
    return client


# 300 decisions of it-support, every one labelled (logged cutoff 0.7): a test takes them as `graded`.
graded_world = census_world(n=300, seed=3)


def draft_body(**overrides) -> dict:
    body = {
        "cutoff": 0.85,
        "band_lower": 0.4,
        "exchange_rate": 3.0,
        "exchange_answers": [{"rate": 10, "accept": True}, {"rate": 100, "accept": False}],
        "costs": {"c_w": 20, "c_a": 0.5, "q": 0.6, "c_v": 0.2},
        "owner": "owner",
        "rationale": "Three correct answers withheld per wrong one removed is acceptable.",
        "escalation": {"contact": "IT service desk lead", "channel": "mailto:desk@example.org", "response_hours": 24},
        "refusal_message": "I can't answer this **reliably**. The service desk replies within a day.",
    }
    body.update(overrides)
    return body


@pytest.fixture
def draft(reviewer, owner, graded):
    """A draft by the reviewer naming the route's policy owner; the API's JSON."""
    response = reviewer.post("/api/v1/routes/it-support/policies", draft_body(), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.fixture
def other_owner(other_route):
    """The owner of another route (hr-policy)."""
    return client_for(factories.make_user("hr-owner", "policy_owner", other_route))


@pytest.fixture
def admin(route):
    return client_for(factories.make_user("boss", "admin"))
