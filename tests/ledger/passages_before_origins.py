"""The passages table as it was before ledger 0027 kept origins apart, for tests that run the SQL of
earlier migrations on it: corpus snapshot and source are columns of each passage again, and they
and the route's column (0027 leaves it, NULL) are filled from its origin by 0027's own backwards;
the origin's reference may be NULL (on rows that SQL adds). Run inside a transaction the test rolls
back."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

from django.db import connection

_ORIGINS = importlib.import_module("console.ledger.migrations.0027_passage_origins")


def passage_columns_restored() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "ALTER TABLE ledger_passage ADD COLUMN corpus_snapshot varchar(200) NOT NULL DEFAULT '', "
            "ADD COLUMN source varchar(200) NOT NULL DEFAULT '', ALTER COLUMN origin_id DROP NOT NULL"
        )
    _ORIGINS.origins_spell_out(None, SimpleNamespace(connection=connection))


def passage_routes() -> dict[int, int | None]:
    """Each passage's route as the restored column holds it, by passage id."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, route_id FROM ledger_passage")
        return dict(cursor.fetchall())
