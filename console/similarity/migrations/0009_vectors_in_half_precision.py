"""Question vectors in half precision: `halfvec`, scaled to unit length, and HNSW indexes with
`halfvec_cosine_ops`.

A built-in vector of 256 float32 was 1,032 of its row's 1,110 bytes, and the HNSW index holds each
refused vector again: half precision halves both (bench/README.md, "Question vectors in half
precision"). Every search is by cosine, which does not depend on a vector's length, so vectors are
scaled to length 1 first; then every number fits half precision whatever an integrator sent, and
cosines move by about 1e-3.

`halfvec` came with pgvector 0.7. The embedded server ships a newer pgvector and brings its
databases up to it at start (console/embedded.py); a server of one's own must have pgvector 0.7
or later, which this migration checks before it changes anything.

The indexes are dropped, the column is rewritten in every partition, and each index that existed
is built again on its partition. Going back rewrites them as `vector` again, without the digits
half precision lost.
"""

from django.conf import settings
from django.db import migrations
from pgvector.django import HalfVectorField

# HNSW indexes halfvec of at most 4,000 dimensions (vector: 2,000).
INDEX_FUNCTION = r"""
CREATE OR REPLACE FUNCTION similarity_index_create(
    index_name text, space text, dimension integer, m integer, ef_construction integer
) RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    part text := 'similarity_questionvector_' || space;
BEGIN
    IF index_name !~ '^[a-z0-9_]{1,63}$' OR space !~ '^[rv][1-9][0-9]{0,17}$' OR dimension NOT BETWEEN 1 AND 4000
       OR m NOT BETWEEN 2 AND 100 OR ef_construction NOT BETWEEN 4 AND 1000 THEN
        RAISE EXCEPTION 'similarity_index_create: bad arguments';
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON public.%I '
        'USING hnsw ((vector::halfvec(%s)) halfvec_cosine_ops) WITH (m = %s, ef_construction = %s) WHERE refused',
        index_name, part, dimension, m, ef_construction);
    -- Fresh statistics: a planner that still believes the space holds a handful of rows (bulk loads
    -- before autovacuum has run) sorts them all instead of walking the index.
    EXECUTE format('ANALYZE public.%I', part);
END
$fn$;
"""

MINIMUM = (0, 7)


def _pgvector_version(cursor) -> tuple[int, ...]:
    cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    row = cursor.fetchone()
    return tuple(int(part) for part in row[0].split(".")[:2]) if row else (0, 0)


def _indexes(cursor) -> list[tuple[str, str, int | None]]:
    """(name, space, dimension) of every space's HNSW index; no dimension for a space whose route
    or version is gone."""
    cursor.execute(
        "SELECT c.relname, substr(p.relname, length('similarity_questionvector_') + 1), "
        "coalesce(e.dimension, r.dimension) "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class p ON p.oid = i.indrelid "
        "LEFT JOIN similarity_embedderversion e ON c.relname = 'similarity_builtin_v' || e.id || '_hnsw' "
        "LEFT JOIN similarity_routeembedding r ON c.relname = 'similarity_sent_r' || r.route_id || '_hnsw' "
        "WHERE c.relname LIKE 'similarity\\_%\\_hnsw' AND c.relkind = 'i' ORDER BY 1"
    )
    return cursor.fetchall()


def _rewrite(cursor, *, column_type: str, using: str, index_function: str) -> None:
    """Drop the indexes, give the column its new type, and build each index again."""
    indexes = _indexes(cursor)
    for name, _, _ in indexes:
        cursor.execute(f'DROP INDEX "{name}"')
    cursor.execute(f"ALTER TABLE similarity_questionvector ALTER COLUMN vector TYPE {column_type} USING {using}")
    cursor.execute(index_function)
    for name, space, dimension in indexes:
        if dimension is None:
            continue  # nothing searches a space whose route or version is gone
        cursor.execute(
            "SELECT set_config('maintenance_work_mem', %s, true), similarity_index_create(%s, %s, %s, %s, %s)",
            [
                settings.SIMILARITY_INDEX_BUILD_MEMORY,
                name,
                space,
                dimension,
                settings.SIMILARITY_HNSW_M,
                settings.SIMILARITY_HNSW_EF_CONSTRUCTION,
            ],
        )


def _to_half_precision(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        if _pgvector_version(cursor) < MINIMUM:
            raise RuntimeError(
                "question vectors are stored as halfvec, which needs pgvector 0.7 or later in the database; "
                "install it and run `ALTER EXTENSION vector UPDATE` as a superuser in this database, then migrate again"
            )
        _rewrite(
            cursor,
            column_type="halfvec",
            using="(CASE WHEN vector_norm(vector) > 0 THEN l2_normalize(vector) ELSE vector END)::halfvec",
            index_function=INDEX_FUNCTION,
        )


def _to_single_precision(apps, schema_editor):
    """Back to `vector` (unit length and the digits half precision kept) and the earlier indexes."""
    with schema_editor.connection.cursor() as cursor:
        _rewrite(
            cursor,
            column_type="vector",
            using="vector::vector",
            index_function=INDEX_FUNCTION.replace("halfvec", "vector").replace("AND 4000", "AND 16000"),
        )


class Migration(migrations.Migration):
    dependencies = [("similarity", "0008_embedder_versions_compact")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="questionvector",
                    name="vector",
                    field=HalfVectorField(
                        help_text="Scaled to length 1 and kept in half precision (cosine is all that is asked of it)."
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(_to_half_precision, _to_single_precision)],
        ),
    ]
