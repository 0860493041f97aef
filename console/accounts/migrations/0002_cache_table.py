"""The table of Django's database cache (settings.CACHES), which holds the sign-in throttle's counts.

Created here so that every place that migrates (make run, docker compose, the tests) has it;
`createcachetable` does nothing when the table exists.
"""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(create_cache_table, migrations.RunPython.noop),
    ]
