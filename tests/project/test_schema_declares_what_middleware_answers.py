"""Every operation declares the statuses the console answers before its view runs: 414 for a URL past
MAX_URL_LENGTH, 413 for a body past MAX_REQUEST_BYTES, and, on an action that takes no body, 400
for any field sent to it. A generated client or a fuzzer that meets one of these otherwise meets an
undocumented status.

Each test sends the request over HTTP and reads the declared statuses from docs/openapi.json, which
tests/project/test_schema_snapshot.py holds equal to the schema the code serves.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tests.factories import make_token, make_user

pytestmark = pytest.mark.django_db
DOCUMENT = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
WRITES = {"post", "put", "patch"}
_SAMPLE = {"slug": "it-support", "request_id": "q-1", "item_id": "0af66f46-c822-4057-8d8c-00eac3bd43b4"}


def _operations(*, methods=None, without_body=False):
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            if methods and method not in methods:
                continue
            if without_body and "requestBody" in operation:
                continue
            yield pytest.param(method, path, operation["responses"], id=f"{method} {path}")


def _url(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: _SAMPLE.get(m.group(1), "1"), path)


@pytest.fixture
def admin() -> APIClient:
    client = APIClient()  # a fresh client builds its own middleware, which reads the settings then
    client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(make_user('schema-admin', 'admin'))}")
    return client


@pytest.mark.parametrize(("method", "path", "declared"), list(_operations()))
def test_every_operation_declares_the_414_of_a_url_too_long(settings, admin, method, path, declared):
    settings.MAX_URL_LENGTH = 2048
    response = admin.generic(method.upper(), _url(path) + "?pad=" + "x" * 3000)
    assert response.status_code == 414
    assert response.json()["error"]["code"] == "uri_too_long"
    assert "414" in declared


@pytest.mark.parametrize(("method", "path", "declared"), list(_operations(methods=WRITES)))
def test_every_write_declares_the_413_of_a_body_too_large(settings, admin, method, path, declared):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    # Compressed, so the middleware decodes it (and stops past the limit) before any view looks.
    body = gzip.compress(json.dumps({"padding": "x" * 10_000}).encode())
    response = admin.generic(
        method.upper(), _url(path), body, content_type="application/json", HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert "413" in declared


@pytest.mark.parametrize(("method", "path", "declared"), list(_operations(methods=WRITES, without_body=True)))
def test_an_action_without_a_body_refuses_a_field_and_declares_it(admin, method, path, declared):
    response = admin.generic(method.upper(), _url(path), json.dumps({"note": "x"}), content_type="application/json")
    assert response.status_code == 400, response.content
    assert [d["code"] for d in response.json()["error"]["details"]] == ["unknown_field"]
    assert "400" in declared
    response = admin.generic(method.upper(), _url(path), "note", content_type="text/plain")
    assert response.status_code == 415, response.content
    assert "415" in declared


def test_the_actions_without_a_body_are_the_five_known_ones():
    # The test above is only as good as this list: a new no-body action joins it by itself.
    assert sorted(p.id for p in _operations(methods=WRITES, without_body=True)) == [
        "post /api/v1/disputes/{dispute_id}/assign",
        "post /api/v1/grading/items/{item_id}/skip",
        "post /api/v1/policies/{policy_id}/recompute-evidence",
        "post /api/v1/policies/{policy_id}/withdraw",
        "post /api/v1/shadow-runs/{run_id}/retry",
    ]
