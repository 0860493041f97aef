"""Passage digests (content_key, text_sha256) as 32 bytes instead of 64 hex characters.

Existing rows are converted in place with decode(..., 'hex'); the unique index on content_key is
rebuilt by the type change. The model still reads and writes hex (DigestField).
"""

from django.db import migrations

from console.ledger.migrations import _fields_v1

FORWARD = (
    "ALTER TABLE ledger_passage "
    "ALTER COLUMN content_key TYPE bytea USING decode(content_key, 'hex'), "
    "ALTER COLUMN text_sha256 TYPE bytea USING decode(text_sha256, 'hex')"
)
BACKWARD = (
    "ALTER TABLE ledger_passage "
    "ALTER COLUMN content_key TYPE varchar(64) USING encode(content_key, 'hex'), "
    "ALTER COLUMN text_sha256 TYPE varchar(64) USING encode(text_sha256, 'hex')"
)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0007_monthly_partitions")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.AlterField(
                    model_name="passage",
                    name="content_key",
                    field=_fields_v1.DigestField(
                        help_text="SHA-256 over id, corpus, text hash, source, uri."
                    ),
                ),
                migrations.AlterField(
                    model_name="passage",
                    name="text_sha256",
                    field=_fields_v1.DigestField(help_text="SHA-256 of the UTF-8 text."),
                ),
            ],
        )
    ]
