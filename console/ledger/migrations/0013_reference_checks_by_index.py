"""The statement checks that stand in for foreign keys to the decisions look up each referred key
by index instead of hashing the whole decisions table once per statement (console/core/partitions.py)."""

from django.db import migrations

from console.ledger.migrations import _partitions_v1 as partitions


def install(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(partitions.REFERENCE_CHECK_FUNCTION)
        cursor.execute(partitions.MONTH_REFERENCE_FUNCTIONS)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0012_decision_passage_natural_key")]

    operations = [migrations.RunPython(install, migrations.RunPython.noop)]
