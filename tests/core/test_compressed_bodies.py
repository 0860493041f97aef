"""API request bodies may come gzip- (or zstd-) encoded; decoding is bounded like a plain body."""

from __future__ import annotations

import gzip
import json

import pytest
import zstandard

from tests.factories import record


def _post(client, body: bytes, encoding: str):
    return client.generic(
        "POST", "/api/v1/decisions", body, content_type="application/json", HTTP_CONTENT_ENCODING=encoding
    )


def _batch(n: int = 2) -> bytes:
    return json.dumps({"decisions": [record() for _ in range(n)]}).encode()


def test_a_gzip_body_is_ingested_as_if_it_came_plain(route, integrator):
    response = _post(integrator, gzip.compress(_batch(3)), "gzip")
    assert response.status_code == 201, response.content
    assert response.json() == {"created": 3, "unchanged": 0}


def test_a_body_of_several_gzip_members_is_read_whole(route, integrator):
    body = _batch(2)
    half = len(body) // 2
    response = _post(integrator, gzip.compress(body[:half]) + gzip.compress(body[half:]), "gzip")
    assert response.status_code == 201, response.content


def test_a_zstd_body_is_ingested(route, integrator):
    response = _post(integrator, zstandard.ZstdCompressor().compress(_batch(2)), "zstd")
    assert response.status_code == 201, response.content


def test_an_encoding_the_server_cannot_decode_is_415_in_the_envelope(route, integrator):
    response = _post(integrator, b"\x1b\x00", "br")
    assert response.status_code == 415
    error = response.json()["error"]
    assert error["code"] == "unsupported_content_encoding" and "br" in error["message"]
    assert error["details"] == []


# mtime=0: the same bytes (and test id) in every process that collects them, pytest-xdist's workers too.
@pytest.mark.parametrize(
    "body", [b"not gzip at all", gzip.compress(b'{"decisions": []}', mtime=0)[:-12]], ids=["not-gzip", "truncated"]
)
def test_a_broken_or_truncated_gzip_body_is_a_malformed_body_not_malformed_json(route, integrator, body):
    response = _post(integrator, body, "gzip")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_body"


def test_a_body_that_inflates_past_the_limit_is_413_however_small_it_came(route, integrator, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    bomb = gzip.compress(b"[" + b" " * 50_000_000 + b"]")
    assert len(bomb) < 100_000
    response = _post(integrator, bomb, "gzip")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_a_body_at_the_limit_once_decoded_is_accepted(route, integrator, settings):
    body = _batch(1)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(body)
    assert _post(integrator, gzip.compress(body), "gzip").status_code == 201


def test_a_compressed_body_that_is_bad_json_is_malformed_json(route, integrator):
    response = _post(integrator, gzip.compress(b"{not json"), "gzip")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_json"


def test_identity_is_no_encoding(route, integrator):
    assert _post(integrator, _batch(1), "identity").status_code == 201


def test_a_read_that_names_an_encoding_without_a_body_is_answered(route, integrator):
    response = integrator.get("/api/v1/routes", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200


def test_pages_are_left_alone(route, integrator):
    from django.test import Client

    response = Client().post("/accounts/login/", b"\x1f\x8b", content_type="text/plain", HTTP_CONTENT_ENCODING="br")
    assert response.status_code != 415
