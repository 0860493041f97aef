"""The span-check figures' reference to their decision's (id, occurred_at), checked once per
statement instead of by a foreign key checked per row (see ledger migration 0010)."""

from django.db import migrations

from console.ledger.migrations import _partitions_v1 as partitions


def _forward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        partitions.month_reference_by_statement(cursor, table="verification_decisionsupport")


class Migration(migrations.Migration):

    dependencies = [
        ("verification", "0004_span_checks_found_only"),
        ("ledger", "0010_month_references_by_statement"),
    ]

    operations = [migrations.RunPython(_forward)]
