"""The gate's policy endpoint honours If-None-Match as RFC 9110 reads it: weak comparison and `*`."""

from __future__ import annotations

import pytest

URL = "/api/v1/routes/it-support/policy"


@pytest.fixture
def signed(draft, owner):
    owner.post(f"/api/v1/policies/{draft['id']}/sign", {"evidence_sha256": draft["evidence_sha256"]}, format="json")


def test_a_weakened_copy_of_the_etag_still_gets_304(signed, integrator):
    etag = integrator.get(URL)["ETag"]
    assert not etag.startswith("W/")
    response = integrator.get(URL, HTTP_IF_NONE_MATCH=f"W/{etag}")
    assert response.status_code == 304
    assert response["ETag"] == etag


def test_the_etag_anywhere_in_a_list_of_tags_gets_304(signed, integrator):
    etag = integrator.get(URL)["ETag"]
    assert integrator.get(URL, HTTP_IF_NONE_MATCH=f'"other", W/"older",{etag}').status_code == 304


def test_a_star_gets_304_once_a_policy_is_signed(draft, owner, integrator):
    response = integrator.get(URL, HTTP_IF_NONE_MATCH="*")
    assert response.status_code == 404  # nothing is signed: no current representation to match
    owner.post(f"/api/v1/policies/{draft['id']}/sign", {"evidence_sha256": draft["evidence_sha256"]}, format="json")
    assert integrator.get(URL, HTTP_IF_NONE_MATCH="*").status_code == 304


def test_another_or_malformed_tag_gets_the_policy(signed, integrator):
    assert integrator.get(URL, HTTP_IF_NONE_MATCH='"not-this-one"').status_code == 200
    assert integrator.get(URL, HTTP_IF_NONE_MATCH="no quotes, W/").status_code == 200
