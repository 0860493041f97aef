"""Passages no longer store the SHA-256 of their text: `Passage.text_sha256` works it out from the
text. The content key is a SHA-256 over that hash with the id, corpus, source and uri, so a stored
row is still checked by recomputing both; the copy cost 33 bytes a passage, about 130 a decision
(bench/README.md, storage).

Dropping the column is a catalog change: existing rows keep its bytes until they are rewritten.
Backwards, the column comes back and every passage's hash is computed again from its text, in
batches (the text is stored deflated, so only Python can read it).
"""

import hashlib

from django.db import migrations

from console.ledger.migrations._compression_v1 import decompress_text

BATCH = 5_000


def _hash_again(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        last = 0
        while True:
            cursor.execute("SELECT id, text FROM ledger_passage WHERE id > %s ORDER BY id LIMIT %s", [last, BATCH])
            rows = cursor.fetchall()
            if not rows:
                return
            cursor.execute(
                "UPDATE ledger_passage AS p SET text_sha256 = v.digest "
                "FROM unnest(%s::bigint[], %s::bytea[]) AS v(id, digest) WHERE p.id = v.id",
                [
                    [pk for pk, _ in rows],
                    [
                        hashlib.sha256(decompress_text(text, schema_editor.connection).encode()).digest()
                        for _, text in rows
                    ],
                ],
            )
            last = rows[-1][0]


class Migration(migrations.Migration):
    dependencies = [("ledger", "0018_decision_content_hash_bytea")]

    operations = [
        migrations.SeparateDatabaseAndState(
            # Listed so that, run backwards (last first), the column comes back, is filled, then
            # becomes NOT NULL; forwards only the last one does anything.
            database_operations=[
                migrations.RunSQL(
                    migrations.RunSQL.noop, "ALTER TABLE ledger_passage ALTER COLUMN text_sha256 SET NOT NULL"
                ),
                migrations.RunPython(migrations.RunPython.noop, _hash_again),
                migrations.RunSQL(
                    "ALTER TABLE ledger_passage DROP COLUMN text_sha256",
                    "ALTER TABLE ledger_passage ADD COLUMN text_sha256 bytea",
                ),
            ],
            state_operations=[migrations.RemoveField(model_name="passage", name="text_sha256")],
        ),
    ]
