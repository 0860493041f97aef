"""Stored statistics documents out of line without compression.

A calibration document holds its whole risk-coverage curve (about 450 KB at 20,000 graded
decisions): PostgreSQL's default compression (pglz) took about 50 ms to store one, longer than
computing it, while an uncompressed write takes a few. There is one row per route and query, so
the space given up stays small.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("policy", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE policy_statsresult ALTER COLUMN document SET STORAGE EXTERNAL",
            "ALTER TABLE policy_statsresult ALTER COLUMN document SET STORAGE EXTENDED",
        ),
    ]
