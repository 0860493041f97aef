"""An auditor of one route reads that route's events and nothing else, through every door: the
events API (listing, paging, object filter), the JSON Lines export and the Audit page."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from audit.models import AuditEvent
from tests.factories import make_token, make_user, record
from tests.grading.helpers import api_client, grade, next_item, pooled

User = get_user_model()


@pytest.fixture
def two_routes_of_events(route, other_route):
    """Events on both routes (ingest, grants, grading) and global ones (users, tokens)."""
    [it_decision] = pooled([record()])
    [hr_decision] = pooled([record(route="hr-policy")])
    hr_grader = api_client(make_user("hr-grader-hana", "grader", other_route))
    item = next_item(hr_grader)
    assert grade(hr_grader, item["id"], "incorrect").status_code == 201
    make_token(make_user("hr-bot", "integrator", other_route))
    assert AuditEvent.objects.filter(route="hr-policy").count() >= 4
    assert AuditEvent.objects.filter(route="").exists()
    return {"it": it_decision, "hr": hr_decision}


@pytest.fixture
def it_auditor(route):
    return make_user("it-auditor", "auditor", route)


def _own(events) -> bool:
    return all(event["route"] == "it-support" for event in events)


def test_the_events_api_pages_only_through_the_auditors_route(two_routes_of_events, it_auditor):
    client = api_client(it_auditor)
    seen, after = [], 0
    while after is not None:
        body = client.get(f"/api/v1/audit/events?after={after}").json()
        seen += body["events"]
        after = body["next_after"]
    assert seen and _own(seen)
    assert [e["seq"] for e in seen] == list(AuditEvent.objects.filter(route="it-support").values_list("seq", flat=True))
    assert "hr-grader-hana" not in json.dumps(seen)


def test_the_object_filter_does_not_open_another_routes_history(two_routes_of_events, it_auditor, other_route):
    client = api_client(it_auditor)
    own = client.get(f"/api/v1/audit/events?object=decision:{two_routes_of_events['it']}").json()["events"]
    assert own and _own(own)
    hr_grader = User.objects.get(username="hr-grader-hana")  # created (global) and granted on hr-policy
    for obj in (
        f"decision:{two_routes_of_events['hr']}",
        "route:hr-policy",
        f"route:{other_route.pk}",
        f"user:{hr_grader.pk}",
    ):
        response = client.get(f"/api/v1/audit/events?object={obj}")
        assert response.status_code in (200, 404) and response.json().get("events", []) == [], obj


def test_the_export_holds_only_the_auditors_route(two_routes_of_events, it_auditor):
    response = api_client(it_auditor).get("/api/v1/audit/export")
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert len(lines) == AuditEvent.objects.filter(route="it-support").count() and _own(lines)


def test_the_audit_page_shows_only_the_auditors_route(two_routes_of_events, it_auditor):
    browser = Client()
    browser.force_login(it_auditor)
    page = browser.get("/audit/").content.decode()
    assert "route:it-support" in page
    events = page[page.index("<table") :]  # the filter form above lists every action's name, not events
    assert "route:hr-policy" not in page and "hr-grader-hana" not in page and "Token issued" not in events
    rows = page.count('<tr><td class="num mono">')
    assert rows == AuditEvent.objects.filter(route="it-support").count()


def test_a_global_auditor_reads_every_route_and_the_global_events(two_routes_of_events):
    client = api_client(make_user("chief-auditor", "auditor"))
    response = client.get("/api/v1/audit/export")
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert {line["route"] for line in lines} == {"it-support", "hr-policy", None}
