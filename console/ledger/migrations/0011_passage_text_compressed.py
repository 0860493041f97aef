"""Passage text in a bytea column, deflated when that is shorter (console/ledger/compression.py).

The type change keeps every text as its UTF-8 bytes (convert_to, never a `::bytea` cast, which
would read backslashes as escapes), which is already a valid stored value; existing rows are then
compressed a batch at a time, in id order. Backwards, each deflated row is inflated back to its
UTF-8 bytes first, then the column becomes text again.

The updated rows leave their old versions behind: VACUUM reclaims them for new rows; only
VACUUM FULL (or pg_repack) gives the space back to the file system.
"""

from django.db import migrations

from console.ledger.migrations import _fields_v1
from console.ledger.migrations._compression_v1 import MARKER, compress_text, decompress_text

BATCH = 2_000

TO_BYTEA = "ALTER TABLE ledger_passage ALTER COLUMN text TYPE bytea USING convert_to(text, 'UTF8')"
TO_TEXT = "ALTER TABLE ledger_passage ALTER COLUMN text TYPE text USING convert_from(text, 'UTF8')"


def _rewrite(schema_editor, convert) -> None:
    """Replace each row's stored text by `convert(stored)` where that differs, BATCH rows at a time."""
    last = 0
    with schema_editor.connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT id, text FROM ledger_passage WHERE id > %s ORDER BY id LIMIT %s", [last, BATCH]
            )
            rows = cursor.fetchall()
            if not rows:
                return
            last = rows[-1][0]
            changed = [(pk, new) for pk, stored in rows if (new := convert(bytes(stored))) != bytes(stored)]
            if changed:
                cursor.execute(
                    "UPDATE ledger_passage AS p SET text = v.text "
                    "FROM unnest(%s::bigint[], %s::bytea[]) AS v(id, text) WHERE p.id = v.id",
                    [[pk for pk, _ in changed], [new for _, new in changed]],
                )


def _compress(apps, schema_editor) -> None:
    _rewrite(schema_editor, lambda stored: compress_text(stored.decode()))


def _inflate(apps, schema_editor) -> None:
    _rewrite(
        schema_editor,
        lambda stored: (
            decompress_text(stored, schema_editor.connection).encode() if stored[:1] == bytes((MARKER,)) else stored
        ),
    )


class Migration(migrations.Migration):
    dependencies = [("ledger", "0010_month_references_by_statement")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(TO_BYTEA, TO_TEXT)],
            state_operations=[
                migrations.AlterField(
                    model_name="passage",
                    name="text",
                    field=_fields_v1.CompressedTextField(
                        help_text="Stored deflated when that is shorter; reads give the text."
                    ),
                ),
            ],
        ),
        migrations.RunPython(_compress, _inflate),
    ]
