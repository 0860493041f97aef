"""Request keys are keyed by (route, request_id) alone: no surrogate id, one index (ledger 0016)."""

from __future__ import annotations

import pytest
from django.db import connection

from console.ledger.models import RequestKey
from tests.factories import ingest, record

pytestmark = pytest.mark.django_db


def test_a_request_key_is_stored_as_its_route_and_request_id_with_one_index(route):
    ingest([record(request_id="req-1"), record(request_id="req-2")])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'ledger_requestkey'::regclass "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
        )
        assert sorted(name for (name,) in cursor.fetchall()) == ["request_id", "route_id"]
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'ledger_requestkey'")
        (definition,) = [row[0] for row in cursor.fetchall()]
    assert "UNIQUE" in definition and "(route_id, request_id)" in definition
    assert sorted(RequestKey.objects.values_list("request_id", flat=True)) == ["req-1", "req-2"]
