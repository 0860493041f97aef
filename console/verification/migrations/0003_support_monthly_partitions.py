"""Partition the span-check figures like the decisions (console/core/partitions.py), and record in
Django's state that the span checks' reference to a decision is a checked one (ledger's 0007)."""

import django.db.models.deletion
from django.db import migrations, models
from django.utils import timezone

from console.ledger.migrations import _partitions_v1 as partitions


def partition(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        partitions.table_partition_by_month(
            cursor,
            table="verification_decisionsupport",
            key="decision_occurred_at",
            refers=("decision_id", "ledger_decision", "occurred_at"),
        )


class Migration(migrations.Migration):

    dependencies = [
        ("verification", "0002_span_check_compact"),
        ("ledger", "0007_monthly_partitions"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="decisionsupport",
                    name="decision_occurred_at",
                    field=models.DateTimeField(
                        help_text="The decision's occurred_at: the month partition key.", default=timezone.now
                    ),
                    preserve_default=False,
                ),
                migrations.AlterField(
                    model_name="decisionsupport",
                    name="decision",
                    field=models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="support",
                        serialize=False,
                        to="ledger.decision",
                    ),
                ),
                migrations.AlterField(
                    model_name="spancheck",
                    name="decision",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="span_checks",
                        to="ledger.decision",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(partition)],
        ),
    ]
