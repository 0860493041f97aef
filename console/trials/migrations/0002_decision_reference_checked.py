"""The decisions are partitioned by month (console/core/partitions.py): a foreign key to a
decision's id alone cannot exist in the database any more. ledger's migration 0007 replaced it
with a trigger that checks the decision on insert; this records the change in Django's state."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("trials", "0001_initial"),
        ("ledger", "0007_monthly_partitions"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="trialcall",
                    name="decision",
                    field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="ledger.decision"),
                ),
            ],
            database_operations=[],
        ),
    ]
