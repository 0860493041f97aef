"""Give back the bytes of the versions' dropped `model` column (migration 0007): a dropped column's
values stay in the table and its TOAST until the table is rewritten. The table is a few rows once
the models are gone, so rewriting it takes no time; outside a transaction, as VACUUM must be."""

from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("similarity", "0007_embedder_models_by_version")]

    operations = [migrations.RunSQL("VACUUM FULL similarity_embedderversion", migrations.RunSQL.noop)]
