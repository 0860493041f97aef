"""Passage text compressed with trained zstd dictionaries (console/ledger/compression.py).

Forwards changes nothing stored: the dictionary job trains the next dictionary with zstd, ingest
then writes the new form (0xFD) with it, and every earlier form stays as it is and reads as before.
Backwards, passages in the new form are deflated again without a dictionary, a batch at a time,
so the code before this migration can read them; the trained dictionaries stay (dictionaries are
never deleted), and deflate can take any bytes as a preset, so a later build simply supersedes them.
"""

from django.db import migrations, models

from console.ledger.migrations._compression_v1 import compress_text
from console.ledger.migrations._compression_v2 import TRAINED_MARKER, decompress_text

BATCH = 2_000


def _without_trained(apps, schema_editor) -> None:
    last = 0
    with schema_editor.connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT id, text FROM ledger_passage WHERE id > %s "
                "AND substring(text FROM 1 FOR 1) = %s ORDER BY id LIMIT %s",
                [last, bytes((TRAINED_MARKER,)), BATCH],
            )
            rows = cursor.fetchall()
            if not rows:
                return
            last = rows[-1][0]
            cursor.execute(
                "UPDATE ledger_passage AS p SET text = v.text "
                "FROM unnest(%s::bigint[], %s::bytea[]) AS v(id, text) WHERE p.id = v.id",
                [
                    [pk for pk, _ in rows],
                    [compress_text(decompress_text(stored, schema_editor.connection)) for _, stored in rows],
                ],
            )


class Migration(migrations.Migration):
    dependencies = [("ledger", "0021_long_answers")]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, _without_trained),
        migrations.AlterField(
            model_name="passagedictionary",
            name="data",
            field=models.BinaryField(
                help_text="A zstd dictionary trained on passage text (before zstd: passage text, the most recent last)."
            ),
        ),
        migrations.AlterField(
            model_name="passagedictionary",
            name="sample_bytes",
            field=models.PositiveIntegerField(help_text="UTF-8 bytes of those passages."),
        ),
    ]
