"""`passage_ranks` may be NULL, which says the ranks are 1..n; ingest writes NULL then (41 bytes a
decision of five passages). Rows already stored keep their arrays. Going backwards writes the arrays
back before the column is NOT NULL again.
"""

import django.contrib.postgres.fields
import django.db.models.lookups
from django.db import migrations, models

RANKS_IN_ORDER_WRITTEN_OUT = """
UPDATE ledger_decision
SET passage_ranks = ARRAY(SELECT generate_series(1, cardinality(passage_ids)))
WHERE passage_ranks IS NULL
"""


def _cardinality(name):
    return models.Func(models.F(name), function="cardinality", output_field=models.IntegerField())


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0009_user_sessions"),
        ("ledger", "0024_ranked_passages_on_the_decision"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="decision", name="passage_arrays_of_one_length"),
        migrations.AlterField(
            model_name="decision",
            name="passage_ranks",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.IntegerField(),
                blank=True,
                db_default=models.Value("{}"),
                default=list,
                help_text="The integrator's rank of each passage (1 is the top; unique, not always 1..n), in rank "
                "order; NULL when they are 1..n.",
                null=True,
                size=None,
            ),
        ),
        migrations.RunSQL(migrations.RunSQL.noop, reverse_sql=RANKS_IN_ORDER_WRITTEN_OUT),
        migrations.AddConstraint(
            model_name="decision",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("passage_ranks__isnull", True),
                        django.db.models.lookups.Exact(_cardinality("passage_ranks"), _cardinality("passage_ids")),
                        _connector="OR",
                    ),
                    django.db.models.lookups.Exact(_cardinality("retrieval_scores"), _cardinality("passage_ids")),
                ),
                name="passage_arrays_of_one_length",
            ),
        ),
    ]
