"""The per-decision tables' reference to their decision's (id, occurred_at): checked once per
statement instead of by a foreign key, whose check ran once per row as a query on the partitioned
decision table and halved ingest (bench/README.md, "Ten million decisions").

- `console_decision_month_check` (a statement trigger on each per-decision table) refuses rows
  whose (decision_id, decision_occurred_at) names no decision, in one join per statement;
- `ledger_decision_month_follow` (statement triggers on the decisions) does what the foreign
  key's ON UPDATE / ON DELETE CASCADE did: a decision's new occurred_at reaches its rows, and its
  rows go with it.
"""

from django.db import migrations

from console.ledger.migrations import _partitions_v1 as partitions


def _forward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(partitions.MONTH_REFERENCE_FUNCTIONS)
        partitions.month_reference_by_statement(cursor, table="ledger_decisionpassage")
        cursor.execute(partitions.DECISION_FOLLOW_TRIGGERS)


class Migration(migrations.Migration):

    dependencies = [
        ("ledger", "0009_route_cutoff_counts"),
    ]

    operations = [migrations.RunPython(_forward)]
