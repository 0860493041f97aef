"""A draft's evidence is a snapshot as of an instant: the instant, and the route's newest decision
id and label revision read just before it (what arrived later is counted from them). Versions
drafted before keep these empty: their evidence named a data version instead and cannot be
derived again."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("governance", "0002_signed_versions_immutable")]

    operations = [
        migrations.AlterField(
            model_name="policyversion",
            name="data_version",
            field=models.CharField(
                help_text="The route's data version when the evidence was computed (not part of the evidence).",
                max_length=200,
            ),
        ),
        migrations.AddField(
            model_name="policyversion",
            name="evidence_as_of",
            field=models.DateTimeField(
                blank=True,
                null=True,
                help_text="The evidence counts decisions ingested and final labels recorded up to this instant; "
                "empty for versions drafted before evidence snapshots.",
            ),
        ),
        migrations.AddField(
            model_name="policyversion",
            name="evidence_decisions_seen",
            field=models.BigIntegerField(
                blank=True,
                null=True,
                help_text="The route's newest decision id read just before as_of: decisions that arrive later "
                "have higher ids.",
            ),
        ),
        migrations.AddField(
            model_name="policyversion",
            name="evidence_labels_seen",
            field=models.BigIntegerField(
                blank=True,
                null=True,
                help_text="The route's newest label revision read just before as_of: a label written later has "
                "a higher one.",
            ),
        ),
    ]
