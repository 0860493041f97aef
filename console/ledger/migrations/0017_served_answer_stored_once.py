"""Store a decision's served answer once: `distinct_served_answer` holds it only when it differs from
the claim (77% of decisions are served, nearly all with the claim itself as the answer, so the
text was stored twice). `Decision.served_answer` reads it back.

The decision table is partitioned by month; adding and dropping the column and the check
constraints on the parent reaches every partition. Forwards, the answers that differ from their
claims move; a refusal's answer does not (ingest never stored one, and the new constraints refuse
it). Backwards, `served_answer` is rebuilt for every served decision before its constraint returns.
"""

from django.db import migrations, models

# Only the rows whose answer is not the claim are written: in the usual workload, few of them.
FORWARD = """
UPDATE ledger_decision SET distinct_served_answer = served_answer
 WHERE outcome <> 'refused' AND served_answer IS DISTINCT FROM claim
"""

BACKWARD = """
UPDATE ledger_decision SET served_answer = coalesce(distinct_served_answer, claim)
 WHERE outcome <> 'refused'
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0016_request_key_natural_key"),
    ]

    # In this order so that, backwards, served_answer is filled before served_has_answer returns.
    operations = [
        migrations.AddField(
            model_name="decision",
            name="distinct_served_answer",
            field=models.TextField(
                blank=True,
                help_text="The served answer when it differs from the claim; NULL when the claim was served or on "
                "a refusal.",
                null=True,
            ),
        ),
        migrations.RemoveConstraint(
            model_name="decision",
            name="served_has_answer",
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
        migrations.RemoveField(
            model_name="decision",
            name="served_answer",
        ),
        migrations.AddConstraint(
            model_name="decision",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("outcome", "refused"), _negated=True),
                    ("distinct_served_answer__isnull", True),
                    _connector="OR",
                ),
                name="refusal_has_no_distinct_answer",
            ),
        ),
        migrations.AddConstraint(
            model_name="decision",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("distinct_served_answer__isnull", True),
                    models.Q(("distinct_served_answer", models.F("claim")), _negated=True),
                    _connector="OR",
                ),
                name="distinct_answer_is_not_the_claim",
            ),
        ),
    ]
