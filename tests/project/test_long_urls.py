"""A URL past MAX_URL_LENGTH is a 414 in the console's own shape, never a server's HTML page."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_a_long_api_url_is_a_json_414(db, settings, method):
    settings.MAX_URL_LENGTH = 2048  # read once per middleware instance: a fresh client builds one
    response = getattr(Client(), method)("/api/v1/audit/events?object=" + "d" * 3000)
    assert response.status_code == 414
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == "uri_too_long" and "3,0" in error["message"]


def test_a_long_page_url_is_the_error_page(db, settings):
    settings.MAX_URL_LENGTH = 2048
    response = Client().get("/refusals/?q=" + "x" * 5000)
    assert response.status_code == 414
    assert "Address too long" in response.content.decode()


def test_a_url_at_the_limit_is_read(db, settings):
    settings.MAX_URL_LENGTH = 2048
    path = "/api/v1/audit/events"
    response = Client().get(path, {"object": "d" * (2048 - len(path) - len("object="))})
    assert response.status_code == 401  # past the length check: the API asks who is calling
