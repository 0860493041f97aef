"""Dates are typed and shown as YYYY-MM-DD on every page, whatever the browser's locale."""

import re

import pytest
from django.test import Client

from tests.factories import ingest, make_user, record


@pytest.mark.parametrize("path", ["/refusals/", "/audit/", "/operating-points/"])
def test_every_date_input_is_iso_text_not_a_locale_date_picker(route, path):
    from console.accounts import services as accounts
    from tests.factories import TEST_ACTOR

    user = make_user("iso-admin", "reviewer")
    accounts.role_grant(actor=TEST_ACTOR, user=user, role="auditor", route=None)
    accounts.role_grant(actor=TEST_ACTOR, user=user, role="policy_owner", route=route)
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200
    page = response.content.decode()
    assert 'type="date"' not in page
    inputs = re.findall(r'<input[^>]*placeholder="YYYY-MM-DD"[^>]*>', page)
    assert len(inputs) >= 2 and all('type="text"' in i and 'pattern="\\d{4}-\\d{2}-\\d{2}"' in i for i in inputs)


def test_the_dashboard_names_its_days_in_iso(route):
    ingest([record()])
    client = Client()
    client.force_login(make_user("iso-reviewer", "reviewer"))
    page = client.get("/").content.decode()
    assert re.search(r'title="\d{4}-\d{2}-\d{2} \(\w{3}\): \d+ decisions', page)
