"""Every aria-describedby on a page names an element that exists on it (help texts rendered)."""

import re

import pytest
from django.test import Client

from console.accounts import services as accounts
from tests.factories import TEST_ACTOR, ingest, make_user, record


@pytest.mark.parametrize(
    "path",
    [
        "/refusals/",
        "/refusals/?segment=bad&score_min=x",
        "/audit/",
        "/audit/?object=bad",
        "/operating-points/",
        "/operating-points/?c_w=-1&alpha=7&band_lower=x",
        "/grading/agreement/",
        "/grading/adjudication/",
        "/",
    ],
)
def test_every_described_by_id_exists(route, path):
    ingest([record()])
    user = make_user("aria-reader", "reviewer")
    accounts.role_grant(actor=TEST_ACTOR, user=user, role="auditor", route=None)
    accounts.role_grant(actor=TEST_ACTOR, user=user, role="policy_owner", route=route)
    client = Client()
    client.force_login(user)
    page = client.get(path).content.decode()
    ids = set(re.findall(r'\sid="([^"]+)"', page))
    described = {i for value in re.findall(r'aria-describedby="([^"]+)"', page) for i in value.split()}
    assert described <= ids, described - ids
