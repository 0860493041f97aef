"""Every COPY and INSERT the benchmarks send names each column the database cannot fill itself.

COPY and raw INSERT get none of Django's Python-side defaults, so a NOT NULL column added to a
model without a database default breaks the benchmark that writes its table (as `note` on the
final labels did). Read from the benchmarks' source and checked against the migrated test
database, this fails in the fast lane, naming the table and the column; the quick runs in
test_benchmarks_quick.py then prove the statements really run.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.db import connection

BENCH = Path(__file__).resolve().parents[2] / "bench"
_WRITE = re.compile(r"\b(?:COPY|INSERT INTO)\s+(\w+)\s*\(([^)]*)\)", re.IGNORECASE)


def column_lists() -> list[tuple[str, str, list[str]]]:
    """(script, table, columns) of every COPY ... (columns) and INSERT INTO ... (columns) in bench/."""
    found = []
    for script in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(script.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for table, columns in _WRITE.findall(node.value):
                    found.append((script.name, table, [c.strip() for c in columns.split(",") if c.strip()]))
    return found


def test_the_benchmarks_write_the_tables_they_load():
    tables = {table for _script, table, _columns in column_lists()}
    assert {
        "ledger_decision",
        "ledger_passage",
        "grading_gradingitem",
        "grading_finallabel",
        "verification_decisionsupport",
    } <= tables


@pytest.mark.django_db
@pytest.mark.parametrize(("script", "table", "columns"), column_lists(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_required_column_is_named(script, table, columns):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name, is_nullable = 'NO' AND column_default IS NULL AND is_identity = 'NO' "
            "FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = %s",
            [table],
        )
        known = dict(cursor.fetchall())
    assert known, f"{script}: table {table} does not exist"
    assert not set(columns) - set(known), f"{script}: {table} has no column {sorted(set(columns) - set(known))}"
    required = {name for name, needed in known.items() if needed}
    assert not required - set(columns), (
        f"{script}: the write to {table} leaves out {sorted(required - set(columns))}, "
        "NOT NULL without a database default"
    )
