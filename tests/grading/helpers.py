"""Helpers of the grading tests: decisions in the pool, API clients, one call per queue action."""

from __future__ import annotations

from rest_framework.test import APIClient

from grading.services import pool as pool_services
from tests import factories


def pooled(records: list[dict]) -> list[int]:
    """Ingest the records and put their decisions into the pool (the ingest hook's job, done inline)."""
    decision_ids = factories.ingest(records)
    pool_services.grading_pool_enter(actor=factories.TEST_ACTOR, decision_ids=decision_ids)
    return decision_ids


def api_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {factories.make_token(user)}")
    client.user = user
    return client


def next_item(client, route: str | None = None) -> dict | None:
    response = client.post("/api/v1/grading/next", {"route": route} if route else {}, format="json")
    assert response.status_code in (200, 204), response.content
    return response.json()["item"] if response.status_code == 200 else None


def grade(client, item_id: str, verdict: str, note: str = ""):
    return client.post(f"/api/v1/grading/items/{item_id}/grades", {"verdict": verdict, "note": note}, format="json")
