"""Text search over question and claim, and the refusals list sorted by score.

The GIN index is on the exact expression console.ledger.selectors.TEXT_SEARCH_VECTOR filters on
(an expression index serves only its own expression). The b-tree on (outcome, gate_score, id)
serves the score-ordered keyset pages across routes; per route, decision_route_score_idx does.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("ledger", "0003_route_day_counts"),
    ]

    operations = [
        migrations.RunSQL(
            sql="CREATE INDEX decision_text_search_idx ON ledger_decision "
                "USING gin (to_tsvector('simple'::regconfig, question || ' ' || claim))",
            reverse_sql="DROP INDEX IF EXISTS decision_text_search_idx",
        ),
        migrations.AddIndex(
            model_name="decision",
            index=models.Index(fields=["outcome", "gate_score", "id"], name="decision_outcome_score_idx"),
        ),
    ]
