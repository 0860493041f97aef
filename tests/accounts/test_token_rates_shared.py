"""The per-token count is shared by every process and thread that serves the API: it lives in the
token's row and moves under its lock, so concurrent calls (gunicorn's workers) never lose a count."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from console.accounts import services
from tests.factories import TEST_ACTOR, make_route, make_user


@pytest.mark.django_db(transaction=True)
def test_concurrent_calls_of_one_token_get_exactly_its_rate():
    make_route("it-support")
    user = make_user("busy", "integrator")
    key = services.token_issue(actor=TEST_ACTOR, user=user, rate_per_minute=7).key
    statuses: list[int] = []
    start = threading.Barrier(6)

    def caller():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        try:
            start.wait()
            for _ in range(3):
                statuses.append(client.get("/api/v1/routes").status_code)
        finally:
            connection.close()  # each thread had a connection of its own

    threads = [threading.Thread(target=caller) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] * 7 + [429] * 11
