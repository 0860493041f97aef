"""A decision's content hash as its 32 bytes instead of 64 hex characters, as the passages' digests
already are (migration 0008): 33 bytes a decision less. The model still reads and writes hex
(DigestField), and a check refuses any value that is not 32 bytes, so a writer that hands COPY the
hex text fails instead of storing 64 bytes.

Existing rows are converted in place with decode(..., 'hex'): the type change rewrites every month
partition of the decisions (README, "Upgrading a large console").
"""

import django.db.models.functions.text
import django.db.models.lookups
from django.db import migrations, models

from console.ledger.migrations import _fields_v1

FORWARD = "ALTER TABLE ledger_decision ALTER COLUMN content_hash TYPE bytea USING decode(content_hash, 'hex')"
BACKWARD = "ALTER TABLE ledger_decision ALTER COLUMN content_hash TYPE varchar(64) USING encode(content_hash, 'hex')"


class Migration(migrations.Migration):
    dependencies = [("ledger", "0017_served_answer_stored_once")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.AlterField(
                    model_name="decision",
                    name="content_hash",
                    field=_fields_v1.DigestField(
                        help_text="SHA-256 of the decision as sent; replays compare it."
                    ),
                ),
            ],
        ),
        migrations.AddConstraint(
            model_name="decision",
            constraint=models.CheckConstraint(
                condition=django.db.models.lookups.Exact(django.db.models.functions.text.Length("content_hash"), 32),
                name="content_hash_is_a_digest",
            ),
        ),
    ]
