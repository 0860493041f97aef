"""Every answer under /api/ that is not a success is the JSON error envelope, whoever fails the
request (the URL resolver, the CSRF middleware, DRF, a service), and its `details` is always a list
of {"field", "index"?, "code", "message"}."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import Client, RequestFactory

from console.core.middleware import bad_request, csrf_failure, page_not_found, permission_denied, server_error
from tests.factories import make_token, make_user, record

INGEST = "/api/v1/decisions"


def assert_envelope(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    error = body["error"]
    assert isinstance(error["code"], str) and error["code"] and isinstance(error["message"], str)
    assert isinstance(error["details"], list)
    for entry in error["details"]:
        assert {"field", "code", "message"} <= set(entry), entry
        assert entry["field"] is None or isinstance(entry["field"], str)
        assert isinstance(entry["code"], str) and isinstance(entry["message"], str)
    if code:
        assert error["code"] == code
    return error


@pytest.fixture
def session(route):
    """A signed-in browser session whose client checks CSRF as a browser's requests are checked."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("session-admin", "admin"))
    return client


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete", "get"])
@pytest.mark.parametrize("path", ["/api/v1/decisions/", "/api/v1/decisions/abc", "/api/v1/nowhere", "/api/v2/x"])
def test_an_unmatched_api_path_is_a_json_404_for_every_method_even_in_a_session(session, path, method):
    if method == "get":
        response = session.get(path)
    else:
        response = getattr(session, method)(path, data="{}", content_type="application/json")
    assert_envelope(response, 404, "not_found")


def test_a_trailing_slash_on_ingest_is_a_json_404_with_a_token_and_without_one(integrator, anonymous):
    assert_envelope(integrator.post(INGEST + "/", {"decisions": [record()]}, format="json"), 404, "not_found")
    assert_envelope(anonymous.post(INGEST + "/", {"decisions": [record()]}, format="json"), 404, "not_found")


def test_a_session_post_without_its_csrf_token_is_a_json_403(session):
    response = session.post(INGEST, data={"decisions": [record()]}, content_type="application/json")
    error = assert_envelope(response, 403, "forbidden")
    assert "CSRF" in error["message"]


def test_the_csrf_failure_view_answers_json_under_api_and_a_page_elsewhere():
    factory = RequestFactory()
    api = csrf_failure(factory.post("/api/v1/anything"), reason="CSRF cookie not set.")
    assert_envelope(api, 403, "csrf_failed")
    page = csrf_failure(factory.post("/refusals/"), reason="CSRF cookie not set.")
    assert page.status_code == 403 and page["Content-Type"].startswith("text/html")


def test_a_wrong_method_is_a_json_405(integrator):
    assert_envelope(integrator.put(INGEST, {"decisions": []}, format="json"), 405, "method_not_allowed")
    assert_envelope(integrator.delete("/api/v1/routes"), 405, "method_not_allowed")


def test_a_body_that_is_not_json_is_a_json_415(integrator):
    response = integrator.generic("POST", INGEST, b"decisions=1", content_type="text/plain")
    assert_envelope(response, 415, "unsupported_media_type")


def test_a_body_over_the_size_limit_is_a_json_413(integrator, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = integrator.post(INGEST, {"decisions": [record(question="x" * 4096)]}, format="json")
    assert_envelope(response, 413, "too_large")


def test_a_body_that_does_not_parse_is_malformed_json(integrator):
    response = integrator.generic("POST", INGEST, b'{"decisions": [', content_type="application/json")
    error = assert_envelope(response, 400, "malformed_json")
    assert error["details"] == []


def test_a_serializer_error_lists_each_field_with_its_own_code(reviewer):
    response = reviewer.post("/api/v1/verify", {"text": "Some text."}, format="json")
    error = assert_envelope(response, 400)
    assert {"field": "claim", "code": "required"}.items() <= error["details"][0].items()
    assert "index" not in error["details"][0]


def test_a_batch_error_names_the_index_and_the_field_path_of_each_problem(integrator):
    bad = record(gate={"name": "g", "score": "high", "cutoff": 0.5})
    error = assert_envelope(integrator.post(INGEST, {"decisions": [record(), bad]}, format="json"), 400, "invalid")
    assert error["details"] == [
        {"field": "gate.score", "index": 1, "code": "invalid_type", "message": "must be a number"}
    ]


def test_a_whole_item_that_is_not_an_object_has_a_null_field(integrator):
    error = assert_envelope(integrator.post(INGEST, {"decisions": ["nope"]}, format="json"), 400)
    assert error["details"] == [{"field": None, "index": 0, "code": "invalid", "message": "must be an object"}]


def test_a_single_body_error_has_no_index(route, owner):
    response = owner.post("/api/v1/routes/it-support/policies", {"cutoff": "high"}, format="json")
    error = assert_envelope(response, 400)
    assert error["details"] and all("index" not in entry for entry in error["details"])
    assert "cutoff" in {entry["field"] for entry in error["details"]}


def test_an_error_without_details_has_an_empty_list(anonymous, route):
    assert_envelope(anonymous.post(INGEST, {"decisions": [record()]}, format="json"), 401, "not_authenticated")
    assert anonymous.post(INGEST, {"decisions": [record()]}, format="json").json()["error"]["details"] == []


def test_the_schema_documents_the_one_details_shape(reviewer):
    schema = reviewer.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    schemas = schema["components"]["schemas"]
    details = schemas["ErrorBody"]["properties"]["details"]
    assert details["type"] == "array" and details["items"]["$ref"].endswith("/ErrorDetail")
    detail = schemas["ErrorDetail"]
    assert set(detail["properties"]) == {"field", "index", "code", "message"}
    assert set(detail["required"]) == {"field", "code", "message"}
    assert detail["properties"]["field"].get("nullable") is True


@pytest.mark.parametrize("scheme", ["Token", "Bearer", "bearer"])
def test_a_token_authenticates_as_token_or_as_bearer(route, scheme):
    client = Client()
    key = make_token(make_user("integrator", "integrator"))
    response = client.get("/api/v1/routes", HTTP_AUTHORIZATION=f"{scheme} {key}")
    assert response.status_code == 200, response.content
    created = client.post(
        INGEST, {"decisions": [record()]}, content_type="application/json", HTTP_AUTHORIZATION=f"{scheme} {key}"
    )
    assert created.status_code == 201


@pytest.mark.parametrize("scheme", ["Token", "Bearer"])
def test_a_wrong_key_is_401_with_either_scheme(route, scheme):
    response = Client().get("/api/v1/routes", HTTP_AUTHORIZATION=f"{scheme} arc_not-a-real-token")
    assert_envelope(response, 401)


def test_the_schema_offers_bearer_or_token_for_each_operation(reviewer):
    schema = reviewer.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    schemes = schema["components"]["securitySchemes"]
    bearer = next(name for name, s in schemes.items() if s.get("type") == "http" and s.get("scheme") == "bearer")
    token = next(name for name, s in schemes.items() if s.get("type") == "apiKey" and s.get("name") == "Authorization")
    security = schema["paths"]["/api/v1/decisions"]["post"]["security"]
    assert {bearer: []} in security and {token: []} in security  # either one, not both together


@pytest.mark.parametrize(
    ("handler", "status"),
    [(page_not_found, 404), (permission_denied, 403), (bad_request, 400), (server_error, 500)],
)
def test_djangos_error_handlers_answer_the_envelope_under_api_and_a_page_elsewhere(db, handler, status):
    factory = RequestFactory()
    extra = () if handler is server_error else (None,)
    assert_envelope(handler(factory.get("/api/v1/x"), *extra), status)
    request = factory.get("/refusals/")
    request.user = AnonymousUser()
    page = handler(request, *extra)
    assert page.status_code == status and page["Content-Type"].startswith("text/html")


def test_too_many_form_fields_under_api_is_a_json_400(integrator, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 2
    response = integrator.post(INGEST, "a=1&b=2&c=3", content_type="application/x-www-form-urlencoded")
    assert response.status_code in (400, 415) and response["Content-Type"].startswith("application/json")
