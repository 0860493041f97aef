"""A function that builds a route's HNSW index, run with its owner's rights.

Each route's question vectors get a partial HNSW index of their own dimension when the route's
first vectors arrive or a new built-in embedder version is fitted, while the console runs. Only a
table's owner may create an index on it, and the app's database role owns nothing (see
console/core/db_roles.py): this function, created by the migration as the owner, builds exactly
the two kinds of index the app needs and nothing else (and drops them again when an embedder
version is retired). Its arguments are numbers and a checked
name, so no SQL text reaches it.
"""

from django.db import migrations

CREATE = r"""
CREATE OR REPLACE FUNCTION similarity_index_create(
    index_name text, dimension integer, for_route bigint, for_embedder bigint, m integer, ef_construction integer
) RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF index_name !~ '^[a-z0-9_]{1,63}$' OR dimension NOT BETWEEN 1 AND 16000
       OR m NOT BETWEEN 2 AND 100 OR ef_construction NOT BETWEEN 4 AND 1000
       OR (for_route IS NULL) = (for_embedder IS NULL) THEN
        RAISE EXCEPTION 'similarity_index_create: bad arguments';
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON similarity_questionvector '
        'USING hnsw ((vector::vector(%s)) vector_cosine_ops) WITH (m = %s, ef_construction = %s) WHERE %s',
        index_name, dimension, m, ef_construction,
        CASE WHEN for_embedder IS NULL
             THEN format('route_id = %s AND embedder_id IS NULL AND refused', for_route)
             ELSE format('embedder_id = %s AND refused', for_embedder) END);
    -- Fresh statistics: a planner that still believes the space holds a handful of rows (bulk loads
    -- before autovacuum has run) sorts them all instead of walking the index.
    ANALYZE similarity_questionvector;
END $$;
"""

CREATE_DROP = r"""
CREATE OR REPLACE FUNCTION similarity_index_drop(index_name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF index_name !~ '^similarity_(sent_r|builtin_v)[0-9]+_hnsw$' THEN
        RAISE EXCEPTION 'similarity_index_drop: not a similarity index';
    END IF;
    EXECUTE format('DROP INDEX IF EXISTS %I', index_name);
END $$;
"""

DROP = ("DROP FUNCTION IF EXISTS similarity_index_create(text, integer, bigint, bigint, integer, integer); "
        "DROP FUNCTION IF EXISTS similarity_index_drop(text)")


class Migration(migrations.Migration):
    dependencies = [("similarity", "0001_initial")]

    operations = [migrations.RunSQL(CREATE + CREATE_DROP, DROP)]
