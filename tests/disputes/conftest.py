"""Fixtures of the dispute tests: refused and served decisions of it-support, people in each role."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests import factories

PASSAGES = [
    {
        "id": "kb/mfa#2",
        "text": "To reset MFA, open Settings > Security and choose Reset.",
        "rank": 1,
        "retrieval_score": 0.81,
    },
    {
        "id": "de/adresse#1",
        "text": "Die Lieferadresse ist Hauptstraße 5, Zimmer 12.",
        "rank": 2,
        "retrieval_score": 0.4,
    },
]
REFUSED_SCORE = 0.6137


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {factories.make_token(user)}")
    client.user = user
    return client


def pages_for(user) -> Client:
    """A browser-like client signed in as `user`, for the HTML pages."""
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def reader_pages(reader):
    return pages_for(reader.user)


@pytest.fixture
def reviewer_pages(reviewer):
    return pages_for(reviewer.user)


@pytest.fixture
def decisions(route, other_route):
    """(refused, served, refused on hr-policy) decision ids."""
    return factories.ingest(
        [
            factories.record(
                request_id="req-refused",
                passages=PASSAGES,
                question="Where do parcels go?",
                gate={"name": "nli", "score": REFUSED_SCORE, "cutoff": 0.85},
                versions={"model": "gen-SECRET-MODEL-7", "retriever": "hyb-3", "corpus": "snap-Q", "gate": "nli-4"},
            ),
            factories.served_record(request_id="req-served", passages=PASSAGES),
            factories.record(route="hr-policy", request_id="req-hr"),
        ]
    )


@pytest.fixture
def reader(route):
    user = factories.make_user("support-agent", "reader", route)
    user.email = "agent@example.org"
    user.save()
    return client_for(user)


@pytest.fixture
def owner_client(route):
    user = factories.make_user("owner", "policy_owner", route)
    user.email = "owner@example.org"
    user.save()
    return client_for(user)


def open_body(**overrides) -> dict:
    body = {
        "kind": "answerable_from_passages",
        "reason": "The first passage says exactly how.",
        "evidence": {"passage_id": None, "quote": "open Settings > Security and choose Reset"},
    }
    body.update(overrides)
    return body


def passage_id(decision_id: int, rank: int) -> int:
    from console.ledger.models import Decision

    decision = Decision.objects.get(pk=decision_id)
    return next(pk for pk, at, _ in decision.ranking if at == rank)


def open_dispute(client, decision_id: int, **overrides):
    body = open_body(**overrides)
    if body.get("evidence") and "passage_id" in body["evidence"] and body["evidence"]["passage_id"] is None:
        body["evidence"]["passage_id"] = passage_id(decision_id, 1)
    return client.post(f"/api/v1/decisions/{decision_id}/disputes", body, format="json")


def sign_policy(
    route,
    owner,
    *,
    channel: str = "mailto:desk@example.org",
    hours: int = 24,
    message: str = "I could not answer this reliably. The IT desk will reply.",
):
    """A policy version signed through the governance services by its owner (a User)."""
    from audit.services import Actor
    from console.governance import services
    from console.governance.validation import parse_draft

    draft = parse_draft(
        {
            "cutoff": 0.85,
            "owner": owner.get_username(),
            "rationale": "Refuse below 0.85.",
            "escalation": {"contact": "IT desk lead", "channel": channel, "response_hours": hours},
            "refusal_message": message,
        },
        route=route,
    )
    policy = services.policy_draft(actor=Actor.user(owner), user=owner, route=route, draft=draft)
    return services.policy_sign(
        actor=Actor.user(owner), user=owner, policy=policy, evidence_sha256=policy.evidence_sha256
    )


@pytest.fixture
def signed_policy(route, decisions, owner_client):
    """Version 1 of it-support's policy, signed: response within 24 h, escalation by email."""
    return sign_policy(route, owner_client.user)
