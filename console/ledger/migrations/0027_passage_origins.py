"""A passage's route, corpus snapshot, source and the start of its uri move to `ledger_passageorigin`,
a row for each combination, and the passage keeps a 4-byte reference to it. A uri that ends with the
passage's external id keeps only its start in the origin and is stored as NULL (read back as prefix
followed by id); any other uri is stored whole. The content key is unchanged: it is worked out from
the strings, not from where they are kept.

The check that a passage a decision logged is not deleted (ledger 0024) finds the deleted passages'
routes through their origins. The passages' `route_id` column stays, NULL and unread: two
migrations of apps above the ledger read it (below). Going backwards writes the route and the three
strings out on every passage again. Rows stored before this keep the old columns' bytes until the
table is rewritten (VACUUM FULL): dropping a column only hides it.
"""

import hashlib
import json

import django.db.models.deletion
from django.db import migrations, models

from console.ledger.migrations import _fields_v1

# The parts of every stored passage, by the rule of `uri_split` (console/ledger/models.py).
_PARTS = """
CREATE TEMPORARY TABLE passage_origin_parts ON COMMIT DROP AS
SELECT id, route_id, corpus_snapshot, source,
       CASE WHEN ends_with_id THEN left(uri, length(uri) - length(external_id)) ELSE '' END AS uri_prefix,
       CASE WHEN ends_with_id THEN NULL ELSE uri END AS stored_uri
  FROM (SELECT *, external_id <> '' AND right(uri, length(external_id)) = external_id AS ends_with_id
          FROM ledger_passage) p
"""


# Ledger 0024's check that no decision logged a deleted passage, with the deleted passages' routes
# read from `{routes}`: their origins' now, their own column before.
_LOGGED_CHECK_OF = """
CREATE OR REPLACE FUNCTION ledger_passage_logged_check() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    logged bigint;
BEGIN
    SELECT o.id INTO logged FROM old_rows o
     WHERE o.id IN (SELECT l.id FROM ledger_decision d CROSS JOIN LATERAL unnest(d.passage_ids) AS l(id)
                     WHERE d.route_id IN ({routes}))
     LIMIT 1;
    IF logged IS NOT NULL THEN
        RAISE EXCEPTION 'delete on table "ledger_passage" violates the reference from "ledger_decision"'
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Passage %s is still logged by a decision.', logged);
    END IF;
    RETURN NULL;
END
$fn$;
"""
_LOGGED_CHECK = _LOGGED_CHECK_OF.replace(
    "{routes}", "SELECT g.route_id FROM ledger_passageorigin g WHERE g.id IN (SELECT origin_id FROM old_rows)"
)
_LOGGED_CHECK_BEFORE = _LOGGED_CHECK_OF.replace("{routes}", "SELECT route_id FROM old_rows")


def _key(route_id: int | None, corpus_snapshot: str, source: str, uri_prefix: str) -> bytes:
    # origin_key (console/ledger/models.py), as it is today
    return hashlib.sha256(json.dumps([route_id, corpus_snapshot, source, uri_prefix]).encode()).digest()


def origins_make(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(_PARTS)
        cursor.execute("SELECT DISTINCT route_id, corpus_snapshot, source, uri_prefix FROM passage_origin_parts")
        origins = [(*parts, _key(*parts)) for parts in cursor.fetchall()]
        if not origins:
            return
        cursor.executemany(
            "INSERT INTO ledger_passageorigin (route_id, corpus_snapshot, source, uri_prefix, key) "
            "VALUES (%s, %s, %s, %s, %s)",
            origins,
        )
        cursor.execute(
            "UPDATE ledger_passage p SET origin_id = o.id, uri = parts.stored_uri, route_id = NULL "
            "FROM passage_origin_parts parts JOIN ledger_passageorigin o "
            "ON o.route_id IS NOT DISTINCT FROM parts.route_id AND (o.corpus_snapshot, o.source, o.uri_prefix) "
            "= (parts.corpus_snapshot, parts.source, parts.uri_prefix) "
            "WHERE p.id = parts.id"
        )


def origins_spell_out(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ledger_passage p SET route_id = o.route_id, corpus_snapshot = o.corpus_snapshot, "
            "source = o.source, uri = coalesce(p.uri, o.uri_prefix || p.external_id) "
            "FROM ledger_passageorigin o WHERE o.id = p.origin_id"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0009_user_sessions"),
        ("ledger", "0026_trained_dictionaries_up_to_256_kib"),
    ]

    operations = [
        migrations.CreateModel(
            name="PassageOrigin",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                (
                    "route",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="accounts.route",
                    ),
                ),
                (
                    "corpus_snapshot",
                    models.CharField(blank=True, help_text="versions.corpus at request time.", max_length=200),
                ),
                ("source", models.CharField(blank=True, max_length=200)),
                (
                    "uri_prefix",
                    models.CharField(
                        blank=True,
                        help_text="A passage's uri is this prefix followed by its external id.",
                        max_length=2000,
                    ),
                ),
                (
                    "key",
                    _fields_v1.DigestField(
                        help_text="SHA-256 over route, corpus snapshot, source and uri prefix (origin_key).",
                        unique=True,
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="passage",
            name="origin",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="ledger.passageorigin",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="passage", name="uri"),
                migrations.AddField(
                    model_name="passage",
                    name="stored_uri",
                    field=models.CharField(
                        blank=True,
                        db_column="uri",
                        help_text="The uri when it is not the origin's prefix followed by the external id; else NULL.",
                        max_length=2000,
                        null=True,
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE ledger_passage ALTER COLUMN uri DROP NOT NULL",
                    "ALTER TABLE ledger_passage ALTER COLUMN uri SET NOT NULL",
                ),
            ],
        ),
        migrations.RunPython(origins_make, origins_spell_out),
        migrations.RemoveField(model_name="passage", name="corpus_snapshot"),
        migrations.RemoveField(model_name="passage", name="source"),
        migrations.RunSQL(_LOGGED_CHECK, _LOGGED_CHECK_BEFORE),
        # The column stays in the table, unwritten (NULL, which costs a row nothing: it has a null
        # bitmap already): verification 0006 and disputes 0005, of apps above the ledger, read it,
        # and on a fresh database they may run after this.
        migrations.SeparateDatabaseAndState(state_operations=[migrations.RemoveField(model_name="passage", name="route")]),
        migrations.AlterField(
            model_name="passage",
            name="origin",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="ledger.passageorigin",
            ),
        ),
        migrations.AlterModelOptions(
            name="passage",
            options={"base_manager_name": "objects"},
        ),
    ]
