"""Decisions per route, UTC hour and logged cutoff, kept by the counters' trigger function.

The function is the one migration 0005 wrote, with one more grouped upsert per statement (and
its subtraction for updates and deletes); the counts of the decisions already stored are filled.
"""

import importlib

import django.db.models.deletion
from django.db import migrations, models

counts = importlib.import_module("console.ledger.migrations.0005_route_score_counts")

HOUR = "date_trunc('hour', {t}occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
CUTOFF_COUNTS_GONE = """
        UPDATE ledger_routecutoffcount AS counts SET decisions = counts.decisions - gone.decisions
        FROM (SELECT route_id, {hour} AS hour, cutoff, count(*) AS decisions
              FROM old_rows GROUP BY 1, 2, 3) AS gone
        WHERE counts.route_id = gone.route_id AND counts.hour = gone.hour AND counts.cutoff = gone.cutoff;
""".format(hour=HOUR.format(t=""))
CUTOFF_COUNTS_NEW = """
        INSERT INTO ledger_routecutoffcount (route_id, hour, cutoff, decisions)
        SELECT route_id, {hour}, cutoff, count(*)
        FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (route_id, hour, cutoff)
        DO UPDATE SET decisions = ledger_routecutoffcount.decisions + EXCLUDED.decisions;
""".format(hour=HOUR.format(t=""))
BACKFILL = """
INSERT INTO ledger_routecutoffcount (route_id, hour, cutoff, decisions)
SELECT route_id, {hour}, cutoff, count(*) FROM ledger_decision GROUP BY 1, 2, 3;
""".format(hour=HOUR.format(t=""))


class Migration(migrations.Migration):

    dependencies = [
        ("ledger", "0008_passage_digests_bytea"),
    ]

    operations = [
        migrations.CreateModel(
            name="RouteCutoffCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("hour", models.DateTimeField(help_text="Start of the UTC hour of occurred_at.")),
                ("cutoff", models.FloatField(help_text="The cutoff the decisions logged.")),
                ("decisions", models.BigIntegerField(help_text="Decisions of the route that hour with this cutoff.")),
                (
                    "route",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="cutoff_counts",
                        to="ledger.route",
                    ),
                ),
            ],
        ),
        migrations.AddConstraint(
            model_name="routecutoffcount",
            constraint=models.UniqueConstraint(fields=("route", "hour", "cutoff"), name="unique_route_hour_cutoff"),
        ),
        migrations.RunSQL(
            counts.count_function(
                counts.DAY_COUNTS_GONE + counts.SCORE_COUNTS_GONE + CUTOFF_COUNTS_GONE,
                counts.DAY_COUNTS_NEW + counts.SCORE_COUNTS_NEW + CUTOFF_COUNTS_NEW,
            )
            + BACKFILL,
            counts.count_function(
                counts.DAY_COUNTS_GONE + counts.SCORE_COUNTS_GONE, counts.DAY_COUNTS_NEW + counts.SCORE_COUNTS_NEW
            ),
        ),
    ]
