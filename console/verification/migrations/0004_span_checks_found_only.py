"""Span checks: only the rows that say something are kept.

A unit's first row (the one with its text: the lowest id of its rows, written in rank order) and
every row where the search found something stay; the other rows said "not found, no ranges" and
are listed as such by selectors.span_checks_as_list without a row. A unit that is the whole claim
no longer repeats it: its text is emptied and readers take the decision's claim.
"""

from django.db import migrations

FORWARD = """
DELETE FROM verification_spancheck s
 WHERE NOT s.supported AND NOT s.truncated AND s.match_ranges = '[]'::jsonb AND s.char_ranges = '[]'::jsonb
   AND EXISTS (SELECT 1 FROM verification_spancheck first
                WHERE first.decision_id = s.decision_id AND first.unit_index = s.unit_index AND first.id < s.id)
"""
WHOLE_CLAIM = """
UPDATE verification_spancheck s SET unit_text = ''
  FROM ledger_decision d
 WHERE d.id = s.decision_id AND s.unit_text <> '' AND s.unit_text = d.claim
"""
# Back: the unit's first row gets the claim again (old code reads the text from a row).
WHOLE_CLAIM_BACK = """
UPDATE verification_spancheck s SET unit_text = d.claim
  FROM ledger_decision d
 WHERE d.id = s.decision_id AND s.unit_text = ''
   AND NOT EXISTS (SELECT 1 FROM verification_spancheck o WHERE o.decision_id = s.decision_id
                   AND o.unit_index = s.unit_index AND (o.id < s.id OR o.unit_text <> ''))
"""


class Migration(migrations.Migration):
    dependencies = [("verification", "0003_support_monthly_partitions")]

    # The deleted rows are not brought back (going back lists only the pairs left), the texts are.
    operations = [
        migrations.RunSQL(FORWARD, migrations.RunSQL.noop),
        migrations.RunSQL(WHOLE_CLAIM, WHOLE_CLAIM_BACK),
    ]
