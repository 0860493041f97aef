"""The decisions are partitioned by month (console/core/partitions.py): a foreign key to a
decision's id alone cannot exist in the database any more. ledger's migration 0007 replaced it
with a trigger that checks the decision on insert; this records the change in Django's state."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("grading", "0003_label_decision_copies"),
        ("ledger", "0007_monthly_partitions"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="gradingitem",
                    name="decision",
                    field=models.ForeignKey(blank=True, db_constraint=False, help_text="Empty for gold items written by hand.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name="grading_items", to="ledger.decision"),
                ),
                migrations.AlterField(
                    model_name="finallabel",
                    name="decision",
                    field=models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.PROTECT, related_name="final_label", to="ledger.decision"),
                ),
            ],
            database_operations=[],
        ),
    ]
