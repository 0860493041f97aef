"""Every GIN index keeps a short pending list, month partitions included, and so does a month made
after the migration: with PostgreSQL's default of 4 MB, each one kept megabytes of free pages that
VACUUM never gives back (console.ledger.models.GIN_PENDING_LIST_KB)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from console.core.partitions import months_ensure
from console.ledger.models import GIN_PENDING_LIST_KB

pytestmark = pytest.mark.django_db

_GIN_INDEXES = """
SELECT c.relname, coalesce(c.reloptions, '{}')
FROM pg_class c JOIN pg_am am ON am.oid = c.relam JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE am.amname = 'gin' AND n.nspname = current_schema()
"""


def _gin_indexes() -> dict[str, list[str]]:
    with connection.cursor() as cursor:
        cursor.execute(_GIN_INDEXES)
        return dict(cursor.fetchall())


def test_every_gin_index_has_a_short_pending_list():
    indexes = _gin_indexes()
    names = set(indexes)
    assert {"decision_versions_gin", "decision_segments_gin", "decision_text_search_idx", "audit_payload_gin"} <= names
    assert any(name.startswith("ledger_decision_y") for name in names), "the month partitions' own indexes"
    for name, options in indexes.items():
        assert f"gin_pending_list_limit={GIN_PENDING_LIST_KB}" in options, name


def test_a_month_made_later_inherits_the_short_pending_list():
    before = set(_gin_indexes())
    assert months_ensure([datetime(2031, 7, 15, tzinfo=UTC)]) > 0
    added = {name: options for name, options in _gin_indexes().items() if name not in before}
    assert len(added) >= 3, added  # text search, versions, segments of the new month
    for name, options in added.items():
        assert f"gin_pending_list_limit={GIN_PENDING_LIST_KB}" in options, name
