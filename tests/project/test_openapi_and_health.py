import pytest
from django.test import override_settings


def test_the_openapi_schema_describes_the_v1_endpoints(reviewer):
    response = reviewer.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in (
        "/api/v1/decisions",
        "/api/v1/decisions/{decision_id}",
        "/api/v1/audit/verify",
        "/api/v1/routes/{slug}/decisions/{request_id}",
        "/api/v1/audit/events",
    ):
        assert path in paths


def test_the_schema_and_docs_need_authentication(anonymous, db):
    assert anonymous.get("/api/schema/").status_code == 401


def test_the_docs_page_sends_a_signed_out_visitor_to_sign_in_and_back(client, db):
    response = client.get("/api/docs/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/api/docs/"


def test_the_docs_page_serves_its_assets_locally(client, route):
    from tests.factories import make_user

    client.force_login(make_user("docs-reader", "reviewer"))
    page = client.get("/api/docs/").content.decode()
    assert "swagger" in page.lower()
    assert "cdn" not in page.lower() and "unpkg" not in page.lower()


def test_health_reports_database_and_broker(client, db, embedded_broker):
    with override_settings(CELERY_BROKER_URL=embedded_broker):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"ok": True, "checks": {"database": True, "broker": True, "audit_chain": True}}


@pytest.mark.django_db
def test_health_is_503_when_the_broker_is_down(client, tmp_path):
    with override_settings(CELERY_BROKER_URL=f"redis+socket://{tmp_path}/absent.sock"):
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": True, "broker": False, "audit_chain": True}


def test_the_schema_generates_without_a_single_warning_or_error(reviewer):
    from drf_spectacular.drainage import GENERATOR_STATS

    GENERATOR_STATS.reset()
    response = reviewer.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    assert dict(GENERATOR_STATS._warn_cache) == {} and dict(GENERATOR_STATS._error_cache) == {}


def test_the_schema_documents_token_authentication_and_the_audit_bodies(reviewer):
    schema = reviewer.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    schemes = schema["components"]["securitySchemes"]
    token = next(s for s in schemes.values() if s.get("type") == "apiKey" and s.get("in") == "header")
    assert token["name"] == "Authorization" and "Token" in token["description"]
    ingest = schema["paths"]["/api/v1/decisions"]["post"]
    token_name = next(name for name, scheme in schemes.items() if scheme is token)
    assert {token_name: []} in ingest["security"]
    events = schema["paths"]["/api/v1/audit/events"]["get"]["responses"]["200"]["content"]["application/json"]
    assert events["schema"]["$ref"].endswith("/AuditEventPage")
    page = schema["components"]["schemas"]["AuditEventPage"]["properties"]
    assert set(page) == {"results", "next", "events", "next_after"}  # the one paging shape, and the first one
    verify = schema["paths"]["/api/v1/audit/verify"]["get"]["responses"]["200"]["content"]["application/json"]
    assert "schema" in verify
    export = schema["paths"]["/api/v1/audit/export"]["get"]["responses"]["200"]["content"]
    assert "application/x-ndjson" in export


def test_every_page_names_an_icon_that_exists_and_favicon_ico_is_no_404(client, db):
    from django.contrib.staticfiles import finders

    page = client.get("/accounts/login/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
    assert finders.find("favicon.svg")
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
