"""Every list endpoint of the API pages in one shape, {"results", "next"}, through console.core.paging."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import _client
from tests.factories import ingest, make_route, make_user, record

LISTS = [
    "/api/v1/routes",
    "/api/v1/routes/it-support/decisions",
    "/api/v1/audit/events",
    "/api/v1/disputes",
    "/api/v1/routes/it-support/policies",
    "/api/v1/routes/it-support/rechecks",
    "/api/v1/routes/it-support/alarms",
    "/api/v1/routes/it-support/gaps",
    "/api/v1/grading/adjudications",
    "/api/v1/decisions/{decision}/similar",
]


@pytest.fixture
def admin(route):
    return _client(make_user("ada", "admin"))


@pytest.mark.parametrize("path", LISTS)
def test_every_list_endpoint_answers_results_and_next(route, admin, path):
    [decision_id] = ingest([record()])
    response = admin.get(path.format(decision=decision_id))
    assert response.status_code == 200, response.content
    body = response.json()
    assert isinstance(body["results"], list)
    assert "next" in body


def test_the_older_keys_hold_the_same_items(route, admin):
    body = admin.get("/api/v1/routes").json()
    assert body["routes"] == body["results"] and body["next"] is None
    events = admin.get("/api/v1/audit/events").json()
    assert events["events"] == events["results"]


def test_routes_page_by_slug_until_next_is_null(route, admin):
    for n in range(4):
        make_route(f"route-{n}")
    url, slugs = "/api/v1/routes?limit=2", []
    while url:
        body = admin.get(url).json()
        assert len(body["results"]) <= 2
        slugs += [r["slug"] for r in body["results"]]
        url = body["next"]
    assert slugs == sorted(slugs) and len(slugs) == 5


def test_audit_events_page_by_cursor_and_still_by_after(route, admin):
    ingest([record() for _ in range(3)])
    everything = [e["seq"] for e in admin.get("/api/v1/audit/events?limit=1000").json()["results"]]
    assert len(everything) >= 5
    first = admin.get("/api/v1/audit/events?limit=2").json()
    assert [e["seq"] for e in first["results"]] == everything[:2]
    assert first["next_after"] == everything[1]
    second = admin.get(first["next"]).json()
    assert [e["seq"] for e in second["results"]] == everything[2:4]
    by_after = admin.get(f"/api/v1/audit/events?limit=2&after={first['next_after']}").json()
    assert by_after["results"] == second["results"]
    assert parse_qs(urlsplit(first["next"]).query)["limit"] == ["2"]


def test_a_cursor_of_one_list_is_refused_by_another(route, admin):
    for n in range(3):
        make_route(f"route-{n}")
    routes_next = admin.get("/api/v1/routes?limit=1").json()["next"]
    cursor = parse_qs(urlsplit(routes_next).query)["cursor"][0]
    response = admin.get(f"/api/v1/audit/events?cursor={cursor}")
    assert response.status_code == 400
    assert response.json()["error"]["details"][0] == {
        "field": "cursor",
        "code": "invalid_cursor",
        "message": response.json()["error"]["details"][0]["message"],
    }


@pytest.mark.parametrize("limit", ["0", "1001", "ten", "-3", "1.5"])
def test_a_bad_limit_is_a_400_naming_it(route, admin, limit):
    response = admin.get(f"/api/v1/routes?limit={limit}")
    assert response.status_code == 400
    [problem] = response.json()["error"]["details"]
    assert problem["field"] == "limit" and problem["code"] == "invalid_limit"


@pytest.mark.parametrize("path", LISTS)
def test_an_empty_limit_or_cursor_reads_as_absent(route, admin, path):
    # As a form sends an unset field; the schema says so (below), or a client that sends `limit=`
    # finds a 200 where the schema promised a refusal.
    [decision_id] = ingest([record()])
    plain = admin.get(path.format(decision=decision_id))
    empty = admin.get(path.format(decision=decision_id), {"limit": "", "cursor": ""})
    assert empty.status_code == 200, empty.content
    assert empty.json()["results"] == plain.json()["results"]


def test_the_schema_lets_every_list_take_an_empty_limit_and_cursor():
    document = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
    paged = 0
    for path, item in document["paths"].items():
        for method, operation in item.items():
            parameters = {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"}
            if "limit" not in parameters:
                continue
            paged += 1
            for name in ("limit", "cursor"):
                assert parameters[name].get("allowEmptyValue") is True, f"{method} {path} {name}"
    assert paged == len(LISTS) - 2  # gaps and similar come whole, bounded by their own parameters
