"""Preset dictionaries for deflating passage text (console/ledger/compression.py).

Stored passages name a dictionary by id, so the database refuses to change or delete one: a trigger
refuses UPDATE and DELETE to any role, and TRUNCATE outside test databases (whose runner empties
tables with it); the app role may only add and read rows (console/core/db_roles.py). Existing
passages keep their form, which stays readable. Backwards, passages deflated with a dictionary are
deflated again without one first, a batch at a time, so the table can go.
"""

import django.db.models.functions.text
import django.db.models.lookups
from django.db import migrations, models

from console.ledger.migrations import _fields_v1
from console.ledger.migrations._compression_v1 import DICTIONARY_MARKER, compress_text, decompress_text

BATCH = 2_000

FORWARD = r"""
CREATE FUNCTION ledger_passage_dictionary_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' AND current_database() LIKE 'test\_%' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'passage dictionaries never change: stored passages name them (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER passage_dictionary_no_update_delete
    BEFORE UPDATE OR DELETE ON ledger_passagedictionary
    FOR EACH ROW EXECUTE FUNCTION ledger_passage_dictionary_refuse_change();
CREATE TRIGGER passage_dictionary_no_truncate
    BEFORE TRUNCATE ON ledger_passagedictionary
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_passage_dictionary_refuse_change();
"""

BACKWARD = r"""
DROP TRIGGER IF EXISTS passage_dictionary_no_truncate ON ledger_passagedictionary;
DROP TRIGGER IF EXISTS passage_dictionary_no_update_delete ON ledger_passagedictionary;
DROP FUNCTION IF EXISTS ledger_passage_dictionary_refuse_change();
"""


def _without_dictionaries(apps, schema_editor) -> None:
    """Deflate again, without a dictionary, every passage deflated with one, BATCH rows at a time."""
    last = 0
    with schema_editor.connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT id, text FROM ledger_passage WHERE id > %s "
                "AND substring(text FROM 1 FOR 1) = %s ORDER BY id LIMIT %s",
                [last, bytes((DICTIONARY_MARKER,)), BATCH],
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
    dependencies = [("ledger", "0013_reference_checks_by_index")]

    operations = [
        migrations.CreateModel(
            name="PassageDictionary",
            fields=[
                ("id", models.SmallAutoField(primary_key=True, serialize=False)),
                ("data", models.BinaryField(help_text="The preset dictionary: passage text, the most recent last.")),
                ("sha256", _fields_v1.DigestField(help_text="SHA-256 of data.")),
                ("sample_passages", models.PositiveIntegerField(help_text="Passages whose text went into data.")),
                (
                    "sample_bytes",
                    models.PositiveIntegerField(
                        help_text="UTF-8 bytes of those passages (data keeps the last 32 KiB)."
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("sha256",), name="unique_passage_dictionary_sha256"),
                    models.CheckConstraint(
                        condition=django.db.models.lookups.LessThanOrEqual(
                            django.db.models.functions.text.Length("data"), 32768
                        ),
                        name="passage_dictionary_max_bytes",
                    ),
                ],
            },
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
        migrations.RunPython(migrations.RunPython.noop, _without_dictionaries),
    ]
