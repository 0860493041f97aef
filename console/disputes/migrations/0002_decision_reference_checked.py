"""The decisions are partitioned by month (console/core/partitions.py): a foreign key to a
decision's id alone cannot exist in the database any more. ledger's migration 0007 replaced it
with a trigger that checks the decision on insert; this records the change in Django's state."""

import django.db.models.deletion
from django.db import migrations, models

# An appeal made before ingest is linked to its decision later, by an UPDATE: checked too.
UPDATE_CHECK = (
    "CREATE TRIGGER disputes_dispute_decision_id_exists_on_update AFTER UPDATE ON disputes_dispute "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION console_reference_check('decision_id', 'ledger_decision')"
)


class Migration(migrations.Migration):

    dependencies = [
        ("disputes", "0001_initial"),
        ("ledger", "0007_monthly_partitions"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="dispute",
                    name="decision",
                    field=models.ForeignKey(blank=True, db_constraint=False, help_text="Empty for an appeal made before ingest.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name="disputes", to="ledger.decision"),
                ),
            ],
            database_operations=[migrations.RunSQL(UPDATE_CHECK, "DROP TRIGGER disputes_dispute_decision_id_exists_on_update ON disputes_dispute")],
        ),
    ]
