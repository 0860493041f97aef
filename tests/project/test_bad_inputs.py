"""Inputs an attacker or a broken client sends: each is a clean 4xx in the error envelope (or the
page's own error), never a 500. Every case here answered 500 before it was fixed."""

from __future__ import annotations

import copy
import json
import logging

import pytest
from django.test import Client

from console.ledger.models import Decision
from tests.factories import ingest, make_user, record

INGEST = "/api/v1/decisions"
HUGE = 10**400  # Python's json reads it as an int; float() overflows


def raw_post(client, url: str, body: str):
    return client.generic("POST", url, body.encode("utf-8", "surrogatepass"), content_type="application/json")


def assert_envelope(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    if code:
        assert body["error"]["code"] == code
    return body["error"]


def test_json_nested_a_hundred_thousand_deep_is_malformed_json(integrator):
    response = raw_post(integrator, INGEST, "[" * 100_000 + "]" * 100_000)
    assert_envelope(response, 400, "malformed_json")


def test_json_nested_five_thousand_deep_inside_segments_is_malformed_json(integrator):
    body = json.dumps({"decisions": [record(segments={"language": "__DEEP__"})]})
    body = body.replace('"__DEEP__"', "[" * 5_000 + "]" * 5_000)
    response = raw_post(integrator, INGEST, body)
    assert_envelope(response, 400, "malformed_json")


def _with(path: str, value) -> dict:
    """A valid record with one field (dotted path, list indexes as numbers) set to `value`."""
    data = record()
    *parents, last = path.split(".")
    target = data
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[int(last) if last.isdigit() else last] = value
    return data


@pytest.mark.parametrize("path", ["gate.score", "gate.cutoff", "passages.0.retrieval_score"])
def test_a_number_too_large_for_a_float_is_a_field_error(integrator, path):
    response = raw_post(integrator, INGEST, json.dumps({"decisions": [_with(path, HUGE)]}))
    error = assert_envelope(response, 400, "invalid")
    assert [d["field"] for d in error["details"]] == [path.replace(".0.", "[0].")]
    assert not Decision.objects.exists()


@pytest.mark.parametrize("embedding", [[HUGE], [1e300], [-3.5e38], [0.5, 1e39]])
def test_an_embedding_value_beyond_single_precision_is_a_field_error(integrator, embedding):
    response = raw_post(integrator, INGEST, json.dumps({"decisions": [_with("passages.0.embedding", embedding)]}))
    error = assert_envelope(response, 400, "invalid")
    assert [d["field"] for d in error["details"]] == ["passages[0].embedding"]


@pytest.mark.parametrize("rank", [2**31, 2**63, HUGE])
def test_a_passage_rank_beyond_a_database_integer_is_a_field_error(integrator, rank):
    response = raw_post(integrator, INGEST, json.dumps({"decisions": [_with("passages.0.rank", rank)]}))
    error = assert_envelope(response, 400, "invalid")
    assert [d["field"] for d in error["details"]] == ["passages[0].rank"]


def test_the_largest_database_integer_is_a_valid_rank(integrator):
    response = integrator.post(INGEST, {"decisions": [_with("passages.0.rank", 2**31 - 1)]}, format="json")
    assert response.status_code == 201, response.content


LONE = "\ud800"
SURROGATE_FIELDS = [
    ("request_id", "request_id"),
    ("question", "question"),
    ("claim", "claim"),
    ("gate.name", "gate.name"),
    ("passages.0.id", "passages[0].id"),
    ("passages.0.text", "passages[0].text"),
    ("passages.0.source", "passages[0].source"),
    ("passages.0.uri", "passages[0].uri"),
    ("versions.model", "versions.model"),
    ("segments.language", "segments.language"),
]


@pytest.mark.parametrize(("path", "field"), SURROGATE_FIELDS)
def test_a_lone_surrogate_in_a_text_field_is_a_field_error(integrator, path, field):
    response = raw_post(integrator, INGEST, json.dumps({"decisions": [_with(path, "a" + LONE + "b")]}))
    error = assert_envelope(response, 400, "invalid")
    assert [d["field"] for d in error["details"]] == [field]
    assert not Decision.objects.exists()


def test_a_lone_surrogate_in_the_served_answer_is_a_field_error(integrator):
    served = record(outcome="served", served_answer="x" + LONE, gate={"name": "g", "score": 0.9, "cutoff": 0.5})
    error = assert_envelope(raw_post(integrator, INGEST, json.dumps({"decisions": [served]})), 400, "invalid")
    assert [d["field"] for d in error["details"]] == ["served_answer"]


@pytest.mark.parametrize("where", ["segments", "versions", "record", "passage"])
def test_a_lone_surrogate_in_a_key_is_reported_without_breaking_the_response(integrator, where):
    data = record()
    {"segments": data["segments"], "versions": data["versions"], "record": data, "passage": data["passages"][0]}[where][
        "k" + LONE
    ] = "v"
    error = assert_envelope(raw_post(integrator, INGEST, json.dumps({"decisions": [data]})), 400, "invalid")
    assert len(error["details"]) == 1
    assert "\\ud800" in error["details"][0]["field"]


def test_an_unknown_route_with_a_lone_surrogate_is_a_field_error(integrator):
    error = assert_envelope(
        raw_post(integrator, INGEST, json.dumps({"decisions": [record(route="r" + LONE)]})), 400, "invalid"
    )
    assert [d["field"] for d in error["details"]] == ["route"]


@pytest.mark.parametrize("field", ["source", "request_id", "route"])
def test_a_lone_surrogate_in_a_label_import_is_a_field_error(integrator, field):
    stored = record()
    ingest([stored])
    label = {"route": "it-support", "request_id": stored["request_id"], "verdict": "correct", "source": "set-1"}
    label[field] = "x" + LONE
    error = assert_envelope(raw_post(integrator, "/api/v1/labels", json.dumps({"labels": [label]})), 400, "invalid")
    assert [d["field"] for d in error["details"]] == [field]


@pytest.mark.parametrize("occurred_at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_timestamp_that_leaves_the_calendar_in_utc_is_a_field_error(integrator, occurred_at):
    response = integrator.post(INGEST, {"decisions": [record(occurred_at=occurred_at)]}, format="json")
    error = assert_envelope(response, 400, "invalid")
    assert [d["field"] for d in error["details"]] == ["occurred_at"]


def test_a_lone_surrogate_in_a_verify_claim_is_the_documented_400(integrator):
    body = json.dumps({"text": "Open Settings", "claim": "Open" + LONE})
    assert_envelope(raw_post(integrator, "/api/v1/verify", body), 400, "text_not_utf8")


# --------------------------------------------------------------------------- the last day of the calendar

STATS_APIS = ["operating-points", "certified-cutoff", "calibration"]


@pytest.mark.parametrize("endpoint", STATS_APIS)
def test_the_statistics_apis_accept_the_last_day_of_the_calendar(reviewer, endpoint):
    ingest([record()])
    response = reviewer.get(f"/api/v1/routes/it-support/{endpoint}", {"from": "0001-01-01", "to": "9999-12-31"})
    assert response.status_code == 200, response.content[:300]


@pytest.fixture
def reviewer_pages(reviewer) -> Client:
    client = Client()
    client.force_login(reviewer.user)
    return client


@pytest.mark.parametrize(
    "url",
    [
        "/refusals/?date_from=0001-01-01&date_to=9999-12-31",
        "/operating-points/?route=it-support&from=0001-01-01&to=9999-12-31",
        "/operating-points/table.csv?route=it-support&to=9999-12-31",
    ],
)
def test_the_pages_accept_the_last_day_of_the_calendar(reviewer_pages, url):
    ingest([record()])
    response = reviewer_pages.get(url)
    assert response.status_code == 200, response.content[:300]


def test_the_refusals_list_up_to_the_last_day_still_lists_the_refusal(reviewer_pages):
    [decision_id] = ingest([record()])
    response = reviewer_pages.get("/refusals/", {"date_to": "9999-12-31"})
    assert f"/decisions/{decision_id}/" in response.content.decode()


# --------------------------------------------------------------------------- audit object and paths


@pytest.mark.parametrize(
    "value", ["decision:\u00b2", "decision:\u0661\u0662", "decision:1\x00", "dec\x00:1", "decision:" + "9" * 40]
)
def test_an_odd_audit_object_is_a_400_or_an_empty_list(auditor, value):
    response = auditor.get("/api/v1/audit/events", {"object": value})
    if response.status_code == 200:
        assert response.json()["events"] == []
    else:
        assert_envelope(response, 400, "invalid_object")


def test_a_digit_that_is_not_ascii_is_not_a_decision_id_for_a_reader(reviewer):
    response = reviewer.get("/api/v1/audit/events", {"object": "decision:\u00b2"})
    assert response.status_code in (403, 404)
    assert_envelope(response, response.status_code)


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/routes/it-support/decisions/q%00x",
        "/api/v1/routes/it%00support/decisions/q-1",
        "/api/v1/grading/items/a%00b/grades",
    ],
)
def test_a_nul_in_an_api_path_is_a_400_in_the_envelope(reviewer, url):
    response = reviewer.get(url) if "grades" not in url else reviewer.post(url, {"verdict": "correct"}, format="json")
    assert_envelope(response, 400, "invalid_path")


def test_a_nul_in_a_page_path_is_a_400_page(reviewer_pages):
    response = reviewer_pages.get("/decisions/1%00/")
    assert response.status_code in (400, 404)


# --------------------------------------------------------------------------- unhandled errors


def test_an_unhandled_error_in_an_api_view_answers_500_in_the_envelope_and_is_logged(integrator, monkeypatch, caplog):
    from console.ledger import services

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(services, "decision_ingest", broken)
    with caplog.at_level(logging.ERROR):
        response = integrator.post(INGEST, {"decisions": [record()]}, format="json")
    error = assert_envelope(response, 500, "server_error")
    assert "boom" not in error["message"]
    assert any("boom" in (r.exc_text or "") or (r.exc_info and "boom" in str(r.exc_info[1])) for r in caplog.records)


def test_the_server_error_handler_answers_json_under_api_and_a_page_elsewhere(rf):
    from console.core.middleware import server_error

    api = server_error(rf.get("/api/v1/routes"))
    assert api.status_code == 500 and api["Content-Type"].startswith("application/json")
    assert json.loads(api.content)["error"]["code"] == "server_error"
    page = server_error(rf.get("/refusals/"))
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")


def test_the_bad_inputs_leave_nothing_behind(integrator):
    bad = copy.deepcopy(record())
    bad["passages"][0]["embedding"] = [1e300]
    raw_post(integrator, INGEST, json.dumps({"decisions": [record(), bad]}))
    assert not Decision.objects.exists()
    assert make_user("someone")  # the database connection is still usable after the rejected batch


@pytest.mark.parametrize("occurred_at", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z"])
def test_a_decision_at_the_calendars_edge_is_stored_and_shown(integrator, reviewer, reviewer_pages, occurred_at):
    stored = record(occurred_at=occurred_at)
    assert integrator.post(INGEST, {"decisions": [stored]}, format="json").status_code == 201
    decision = Decision.objects.get()
    for url in ["/refusals/", f"/decisions/{decision.pk}/", "/operating-points/", "/"]:
        assert reviewer_pages.get(url).status_code == 200, url
    page = reviewer_pages.get("/refusals/").content.decode()
    older = [part for part in page.split('"') if "before=" in part]
    for link in older[:1]:
        assert reviewer_pages.get("/refusals/" + link.replace("&amp;", "&")).status_code == 200
    assert reviewer.get(f"/api/v1/decisions/{decision.pk}").status_code == 200
    assert reviewer.get(f"/api/v1/routes/it-support/decisions/{stored['request_id']}").status_code == 200
    assert reviewer.get("/api/v1/routes/it-support/operating-points").status_code == 200


@pytest.mark.parametrize("cursor", ["1." + "9" * 30, "-" + "9" * 25 + ".1", "9" * 25 + ".1", "1.\u00b2", "\x00.1"])
def test_a_crafted_refusals_cursor_gives_a_page(reviewer_pages, cursor):
    ingest([record()])
    for direction in ("before", "after"):
        assert reviewer_pages.get("/refusals/", {direction: cursor}).status_code == 200


@pytest.mark.parametrize("after", ["9" * 30, "-" + "9" * 30, "\u00b2", "1\x00"])
def test_an_odd_audit_after_is_a_400_or_a_page(auditor, after):
    response = auditor.get("/api/v1/audit/events", {"after": after})
    if response.status_code != 200:
        assert_envelope(response, 400, "invalid_after")
