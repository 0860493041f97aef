"""Builders for test data: API-shaped decision records, routes, users with roles and tokens."""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from audit.services import Actor
from console.accounts import services as accounts
from console.accounts.models import Route
from console.ledger import services as ledger
from console.ledger.validation import validate_batch
from console.shadow.services import route_shadow_set
from grading.services.pool import route_grading_set
from tests.sample_record import BASE_RECORD

_counter = itertools.count(1)
TEST_ACTOR = Actor.system("tests")


def record(**overrides: Any) -> dict[str, Any]:
    """A valid decision record; `request_id` is unique unless given."""
    data = copy.deepcopy(BASE_RECORD)
    data["request_id"] = f"q-{next(_counter):06d}"
    for key, value in overrides.items():
        data[key] = value
    return data


def recent(days: int = 1) -> str:
    """An `occurred_at` inside every rolling window (30-day counts, pool sweeps): the sample record's
    fixed date ages out of them as the calendar moves on."""
    return (datetime.now(UTC) - timedelta(days=days)).isoformat().replace("+00:00", "Z")


def served_record(**overrides: Any) -> dict[str, Any]:
    overrides.setdefault("outcome", "served")
    overrides.setdefault("served_answer", "Open Settings > Security and choose Reset.")
    overrides.setdefault("gate", {"name": "entailment", "score": 0.93, "cutoff": 0.85})
    return record(**overrides)


def make_route(
    slug: str = "it-support",
    name: str | None = None,
    *,
    guidelines: str | None = None,
    graders_per_item: int | None = None,
    shadow_config: dict | None = None,
) -> Route:
    """The route, created with its settings where it does not exist: each app's part through that
    app's own service (grading's guidelines and graders per item, shadow's pipeline)."""
    existing = Route.objects.filter(slug=slug).first()
    if existing:
        return existing
    route = accounts.route_create(actor=TEST_ACTOR, slug=slug, name=name or slug.replace("-", " ").title())
    if guidelines is not None or graders_per_item is not None:
        route_grading_set(actor=TEST_ACTOR, route=route, guidelines=guidelines, graders_per_item=graders_per_item)
    if shadow_config:
        route_shadow_set(actor=TEST_ACTOR, route=route, config=shadow_config)
    return route


def set_grading(route: Route, **settings) -> Route:
    """Change the route's grading settings (guidelines, graders_per_item) through grading's service."""
    route_grading_set(actor=TEST_ACTOR, route=route, **settings)
    return route


def set_answer_settings(route: Route, **settings) -> Route:
    """Change the route's answer settings (answer_form, harm_model, support_threshold,
    expected_claims, gate_functional) through the ledger's service."""
    ledger.route_answer_settings_set(actor=TEST_ACTOR, route=route, **settings)
    return route


def long_record(claims: list[str], *, citations: list[list[str]] | None = None, **overrides: Any) -> dict[str, Any]:
    """A served decision whose answer makes `claims` (each cites the record's first passage unless
    `citations` says otherwise); the claim text is the claims joined."""
    cited = citations if citations is not None else [[BASE_RECORD["passages"][0]["id"]]] * len(claims)
    answer = " ".join(claims)
    overrides.setdefault("claim", answer)
    overrides.setdefault("claims", [{"text": c, "citations": ids} for c, ids in zip(claims, cited, strict=True)])
    return served_record(served_answer=overrides.pop("served_answer", answer), **overrides)


def make_user(username: str, role: str | None = None, route: Route | None = None, password: str = "pw-12345678"):
    user = accounts.user_ensure(actor=TEST_ACTOR, username=username)
    user.set_password(password)
    user.save()
    if role:
        accounts.role_grant(actor=TEST_ACTOR, user=user, role=role, route=route)
    return user


def make_token(user) -> str:
    return accounts.token_issue(actor=TEST_ACTOR, user=user).key


def ingest(records: list[dict]) -> list[int]:
    items, errors = validate_batch(records)
    assert not errors, errors
    routes, route_errors = ledger.routes_for_items(items)
    assert not route_errors, route_errors
    return ledger.decision_ingest(actor=TEST_ACTOR, items=items, routes=routes).created_ids
