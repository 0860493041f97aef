"""Stored statistics documents live in an unlogged table.

They are derived data, computed again whenever they are missing (analysis.models.StatsResult), so
writing them to the write-ahead log bought nothing: after a crash PostgreSQL empties an unlogged
table, and the next request computes the document again, as it does for a new route. Skipping the
log takes about 40% off storing a 450 KB calibration document (4.2 -> 2.5 ms on the development
machine), a share of every uncached request. Unlogged tables are not copied to streaming replicas:
replicas serve no statistics documents (they would compute them, as after a crash).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("policy", "0002_stats_document_uncompressed"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE policy_statsresult SET UNLOGGED",
            "ALTER TABLE policy_statsresult SET LOGGED",
        ),
    ]
