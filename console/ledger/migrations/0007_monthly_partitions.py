"""Partition the decisions and their ranked passages by month (console/core/partitions.py).

The tables are rebuilt in place as partitioned tables, rows included; a request_id's uniqueness
within its route moves to ledger_requestkey, filled from the stored decisions. One-way: the
partitioned tables would have to be rebuilt again to go back.
"""

import datetime

import django.db.models.deletion
from django.db import migrations, models
from django.utils import timezone

from console.ledger.migrations import _partitions_v1 as partitions


def partition(apps, schema_editor):
    today = timezone.now()
    ahead = [today, today + datetime.timedelta(days=32)]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(partitions.ENSURE_FUNCTION)
        cursor.execute(partitions.REFERENCE_CHECK_FUNCTION)
        partitions.table_partition_by_month(cursor, table="ledger_decision", key="occurred_at", months=ahead)
        partitions.table_partition_by_month(
            cursor,
            table="ledger_decisionpassage",
            key="decision_occurred_at",
            refers=("decision_id", "ledger_decision", "occurred_at"),
        )
        cursor.execute(
            "INSERT INTO ledger_requestkey (route_id, request_id) "
            "SELECT route_id, request_id FROM ledger_decision ORDER BY 1, 2"
        )


class Migration(migrations.Migration):

    dependencies = [
        ("ledger", "0006_storage_redundant_indexes"),
        # every table holding a foreign key to the decisions exists by now: the rebuild turns each
        # into a checked reference
        ("disputes", "0001_initial"),
        ("grading", "0003_label_decision_copies"),
        ("shadow", "0002_one_run_per_decision"),
        ("similarity", "0003_storage_retired_models"),
        ("trials", "0001_initial"),
        ("verification", "0002_span_check_compact"),
    ]

    operations = [
        migrations.CreateModel(
            name="RequestKey",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("request_id", models.CharField(max_length=200)),
                (
                    "route",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="ledger.route",
                    ),
                ),
            ],
        ),
        migrations.AddConstraint(
            model_name="requestkey",
            constraint=models.UniqueConstraint(fields=("route", "request_id"), name="unique_request_key"),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(model_name="decision", name="unique_request_per_route"),
                migrations.AddConstraint(
                    model_name="decision",
                    constraint=models.UniqueConstraint(
                        fields=("route", "request_id", "occurred_at"), name="unique_request_per_route"
                    ),
                ),
                migrations.AddField(
                    model_name="decisionpassage",
                    name="decision_occurred_at",
                    field=models.DateTimeField(
                        help_text="The decision's occurred_at: the month partition key.",
                        default=timezone.now,
                    ),
                    preserve_default=False,
                ),
                migrations.AlterField(
                    model_name="decisionpassage",
                    name="decision",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="ranked_passages",
                        to="ledger.decision",
                    ),
                ),
                migrations.RemoveConstraint(model_name="decisionpassage", name="unique_rank_per_decision"),
                migrations.AddConstraint(
                    model_name="decisionpassage",
                    constraint=models.UniqueConstraint(
                        fields=("decision", "rank", "decision_occurred_at"), name="unique_rank_per_decision"
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(partition)],
        ),
    ]
