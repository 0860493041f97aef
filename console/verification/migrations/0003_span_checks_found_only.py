"""Span checks: only the rows that say something are kept.

A unit's first row (the one with its text: the lowest id of its rows, written in rank order) and
every row where the search found something stay; the other rows said "not found, no ranges" and
are listed as such by selectors.span_checks_as_list without a row.
"""

from django.db import migrations

FORWARD = """
DELETE FROM verification_spancheck s
 WHERE NOT s.supported AND NOT s.truncated AND s.match_ranges = '[]'::jsonb AND s.char_ranges = '[]'::jsonb
   AND EXISTS (SELECT 1 FROM verification_spancheck first
                WHERE first.decision_id = s.decision_id AND first.unit_index = s.unit_index AND first.id < s.id)
"""


class Migration(migrations.Migration):
    dependencies = [("verification", "0002_span_check_compact")]

    # Not reversible as data (the rows are gone), but nothing reads them: going back keeps the rows left.
    operations = [migrations.RunSQL(FORWARD, migrations.RunSQL.noop)]
