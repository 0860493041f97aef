"""Vectors inserted into a space's HNSW graph after its bulk build search a shorter candidate list
(SIMILARITY_HNSW_EF_INSERT, 2 x m by default) than the build did (SIMILARITY_HNSW_EF_CONSTRUCTION).

pgvector reads `ef_construction` from the index's options at every insert, and only the build
reads it to make the graph, so the build keeps its list and later inserts take the shorter one.
Setting an index's options needs its owner, as creating it does, so a function run with the
owner's rights does it (`similarity_index_insert_effort`), for the two kinds of similarity index
and nothing else. Going forward sets it on every index there; going backwards puts the build's
value back and drops the function.
"""

from django.conf import settings
from django.db import migrations

FUNCTION = r"""
CREATE OR REPLACE FUNCTION similarity_index_insert_effort(index_name text, ef_construction integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
BEGIN
    IF index_name !~ '^similarity_(sent_r|builtin_v)[1-9][0-9]{0,17}_hnsw$'
       OR ef_construction NOT BETWEEN 4 AND 1000 THEN
        RAISE EXCEPTION 'similarity_index_insert_effort: bad arguments';
    END IF;
    EXECUTE format('ALTER INDEX public.%I SET (ef_construction = %s)', index_name, ef_construction);
END
$fn$;
"""

DROP = "DROP FUNCTION IF EXISTS similarity_index_insert_effort(text, integer)"

INDEXES = (
    "SELECT c.relname FROM pg_class c JOIN pg_am a ON a.oid = c.relam "
    "WHERE c.relkind = 'i' AND a.amname = 'hnsw' AND c.relname ~ '^similarity_(sent_r|builtin_v)[0-9]+_hnsw$' "
    "ORDER BY 1"
)


def _set_every_index(cursor, ef_construction: int) -> None:
    cursor.execute(INDEXES)
    for (name,) in cursor.fetchall():
        cursor.execute("SELECT similarity_index_insert_effort(%s, %s)", [name, ef_construction])


def forwards(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(FUNCTION)
        _set_every_index(cursor, settings.SIMILARITY_HNSW_EF_INSERT)


def backwards(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        _set_every_index(cursor, settings.SIMILARITY_HNSW_EF_CONSTRUCTION)
        cursor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("similarity", "0012_embedder_versions_frontier")]

    operations = [migrations.RunPython(forwards, backwards)]
