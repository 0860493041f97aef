"""A built-in embedder version's HNSW graph may hold only the leading components of its vectors.

The built-in embedder's SVD orders its components by variance, so the leading half of a vector
keeps most of what places it among the others. A graph of those (`subvector(vector, 1, P)`) is
smaller and each of its steps compares half the numbers; lookups take the graph's nearest few
dozen and re-rank them by the whole vector (console/similarity/selectors.py). A refusal's insert
into the graph was what kept question vectors from keeping up with a stream (bench/README.md).

`similarity_index_create` gains the graph's dimension: the whole vector (sent vectors, and every
index built before) or a prefix of it. `EmbedderVersion.graph_dimension` records which a version's
graph holds; versions built before have none and keep their graphs until their route refits.
"""

import importlib

from django.db import migrations, models

half_precision = importlib.import_module("console.similarity.migrations.0009_vectors_in_half_precision")

INDEX_FUNCTION = r"""
DROP FUNCTION IF EXISTS similarity_index_create(text, text, integer, integer, integer);
CREATE OR REPLACE FUNCTION similarity_index_create(
    index_name text, space text, dimension integer, m integer, ef_construction integer, graph_dimension integer
) RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    part text := 'similarity_questionvector_' || space;
    graphed text;
BEGIN
    IF index_name !~ '^[a-z0-9_]{1,63}$' OR space !~ '^[rv][1-9][0-9]{0,17}$' OR dimension NOT BETWEEN 1 AND 4000
       OR m NOT BETWEEN 2 AND 100 OR ef_construction NOT BETWEEN 4 AND 1000
       OR graph_dimension NOT BETWEEN 1 AND dimension THEN
        RAISE EXCEPTION 'similarity_index_create: bad arguments';
    END IF;
    IF graph_dimension = dimension THEN
        graphed := format('(vector::halfvec(%s))', dimension);
    ELSE
        graphed := format('(subvector(vector, 1, %s)::halfvec(%s))', graph_dimension, graph_dimension);
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON public.%I '
        'USING hnsw (%s halfvec_cosine_ops) WITH (m = %s, ef_construction = %s) WHERE refused',
        index_name, part, graphed, m, ef_construction);
    -- Fresh statistics: a planner that still believes the space holds a handful of rows (bulk loads
    -- before autovacuum has run) sorts them all instead of walking the index.
    EXECUTE format('ANALYZE public.%I', part);
END
$fn$;
"""

EARLIER_FUNCTION = (
    "DROP FUNCTION IF EXISTS similarity_index_create(text, text, integer, integer, integer, integer);"
    + half_precision.INDEX_FUNCTION
)


class Migration(migrations.Migration):
    dependencies = [("similarity", "0013_graph_inserts_with_a_shorter_candidate_list")]

    operations = [
        migrations.AddField(
            model_name="embedderversion",
            name="graph_dimension",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="The leading components its refusals' HNSW graph holds (lookups re-rank by the whole "
                "vector); empty: the whole vector, as every version built before graphs held fewer.",
                null=True,
            ),
        ),
        migrations.RunSQL(INDEX_FUNCTION, EARLIER_FUNCTION),
    ]
