"""Partition the question vectors by LIST on a new `space` column, one partition per vector space
(a route's sent vectors `r<route id>`, one built-in embedder version `v<version id>`), rows included.

A refit writes every question's vector again under the new version and then removed the old
version's rows, whose space stayed in the table (half its heap after a few refits); now the old
version's partition is detached and dropped, and its space goes back at once (docs/architecture.md,
"Similarity"). Each space's HNSW index moves onto its partition, with the predicate `refused`.

- `similarity_space_create` / `similarity_space_drop` add and remove a space's partition with the
  table owner's rights (the app's role owns nothing); the drop refuses a version that is not
  retired. `similarity_index_create` now builds the index on the space's partition.
- PostgreSQL wants the partition key in every unique constraint: the primary key in the database
  is (id, space), and the two rules (one vector per decision per embedder version, one sent vector
  per decision) become `unique_vector_per_space`, with `vector_space_key` tying `space` to the
  route and the embedder.
- `console_month_partitions` (ledger) now makes month partitions for tables partitioned by range
  only.

Rows of retired versions (never read again) are not carried over. One-way, like the monthly
partitions: going back would mean rebuilding the table again.
"""

from django.conf import settings
from django.db import migrations, models
from django.db.models import Value
from django.db.models.functions import Cast, Concat

from console.ledger.migrations import _partitions_v1 as partitions

FUNCTIONS = r"""
DROP FUNCTION IF EXISTS similarity_index_create(text, integer, bigint, bigint, integer, integer);

CREATE OR REPLACE FUNCTION similarity_space_create(space text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    part text := 'similarity_questionvector_' || space;
BEGIN
    IF space !~ '^[rv][1-9][0-9]{0,17}$' THEN
        RAISE EXCEPTION 'similarity_space_create: bad space %', space;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_class WHERE relname = part AND relnamespace = 'public'::regnamespace) THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(1399418192, hashtext(space));  -- "SimP": one creation per space
    -- pg_class read by a query, which sees what a racer committed while this one waited on the lock
    IF EXISTS (SELECT 1 FROM pg_class WHERE relname = part AND relnamespace = 'public'::regnamespace) THEN
        RETURN false;
    END IF;
    -- Made on its own and attached: that locks the table against other schema changes only, where
    -- CREATE TABLE ... PARTITION OF would lock out its reads and writes.
    EXECUTE format(
        'CREATE TABLE public.%I (LIKE public.similarity_questionvector INCLUDING DEFAULTS INCLUDING CONSTRAINTS '
        'INCLUDING STORAGE INCLUDING COMPRESSION)', part);
    EXECUTE format('ALTER TABLE public.similarity_questionvector ATTACH PARTITION public.%I FOR VALUES IN (%L)',
                   part, space);
    RETURN true;
END
$fn$;

CREATE OR REPLACE FUNCTION similarity_space_drop(space text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    part text := 'similarity_questionvector_' || space;
BEGIN
    IF space !~ '^v[1-9][0-9]{0,17}$' OR EXISTS (
        SELECT 1 FROM similarity_embedderversion WHERE id = substr(space, 2)::bigint AND state <> 'retired'
    ) THEN
        RAISE EXCEPTION 'similarity_space_drop: % is not the space of a retired embedder version', space;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_class WHERE relname = part AND relnamespace = 'public'::regnamespace) THEN
        RETURN false;
    END IF;
    EXECUTE format('ALTER TABLE public.similarity_questionvector DETACH PARTITION public.%I', part);
    EXECUTE format('DROP TABLE public.%I', part);
    RETURN true;
END
$fn$;

CREATE OR REPLACE FUNCTION similarity_index_create(
    index_name text, space text, dimension integer, m integer, ef_construction integer
) RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    part text := 'similarity_questionvector_' || space;
BEGIN
    IF index_name !~ '^[a-z0-9_]{1,63}$' OR space !~ '^[rv][1-9][0-9]{0,17}$' OR dimension NOT BETWEEN 1 AND 16000
       OR m NOT BETWEEN 2 AND 100 OR ef_construction NOT BETWEEN 4 AND 1000 THEN
        RAISE EXCEPTION 'similarity_index_create: bad arguments';
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON public.%I '
        'USING hnsw ((vector::vector(%s)) vector_cosine_ops) WITH (m = %s, ef_construction = %s) WHERE refused',
        index_name, part, dimension, m, ef_construction);
    -- Fresh statistics: a planner that still believes the space holds a handful of rows (bulk loads
    -- before autovacuum has run) sorts them all instead of walking the index.
    EXECUTE format('ANALYZE public.%I', part);
END
$fn$;
"""

_SPACE_OF = "CASE WHEN embedder_id IS NULL THEN 'r' || route_id ELSE 'v' || embedder_id END"
_COLUMNS = "id, decision_id, route_id, embedder_id, refused, occurred_at, vector"


def _partition(apps, schema_editor):
    table, old = "similarity_questionvector", "similarity_questionvector_unpartitioned"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(partitions.ENSURE_FUNCTION)
        cursor.execute(FUNCTIONS)
        cursor.execute(
            "SELECT 'r' || route_id, dimension, 'similarity_sent_r' || route_id || '_hnsw' "
            "FROM similarity_routeembedding WHERE source = 'sent' "
            "UNION ALL SELECT 'v' || id, dimension, 'similarity_builtin_v' || id || '_hnsw' "
            "FROM similarity_embedderversion WHERE state <> 'retired' ORDER BY 1"
        )
        spaces = cursor.fetchall()
        cursor.execute("SELECT relname FROM pg_class WHERE relname LIKE 'similarity\\_%\\_hnsw' AND relkind = 'i'")
        indexed = {name for (name,) in cursor.fetchall()}
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass "
            "AND contype = 'f'",
            [table],
        )
        foreign_keys = cursor.fetchall()
        cursor.execute(f"SELECT max(id) FROM {table}")
        last_id = cursor.fetchone()[0]

        cursor.execute(f"DROP TRIGGER IF EXISTS {table}_decision_id_exists ON {table}")
        cursor.execute(f"ALTER TABLE {table} ALTER COLUMN id DROP IDENTITY")
        cursor.execute(f"ALTER TABLE {table} RENAME TO {old}")
        cursor.execute(
            f"CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE "
            "INCLUDING COMPRESSION, space varchar(24) NOT NULL) PARTITION BY LIST (space)"
        )
        cursor.execute(f"ALTER TABLE {table} ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY")
        if last_id is not None:
            cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", [table, last_id])
        for space, _, _ in spaces:
            cursor.execute("SELECT similarity_space_create(%s)", [space])
        cursor.execute(
            f"INSERT INTO {table} ({_COLUMNS}, space) SELECT {_COLUMNS}, {_SPACE_OF} FROM {old} "
            f"WHERE {_SPACE_OF} = ANY(%s)",
            [[space for space, _, _ in spaces]],
        )
        cursor.execute(f"DROP TABLE {old}")  # its constraints and indexes with it, which frees their names
        cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY (id, space)")
        for name, definition in foreign_keys:
            cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
        cursor.execute(partitions.reference_check_sql(table, "decision_id", "ledger_decision"))
        for space, dimension, index_name in spaces:
            if index_name in indexed:
                cursor.execute(
                    "SELECT set_config('maintenance_work_mem', %s, true), similarity_index_create(%s, %s, %s, %s, %s)",
                    [
                        settings.SIMILARITY_INDEX_BUILD_MEMORY,
                        index_name,
                        space,
                        dimension,
                        settings.SIMILARITY_HNSW_M,
                        settings.SIMILARITY_HNSW_EF_CONSTRUCTION,
                    ],
                )


class Migration(migrations.Migration):
    dependencies = [
        ("similarity", "0005_embedder_models_float16"),
        ("ledger", "0010_month_references_by_statement"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="questionvector", name="unique_vector_per_embedder"),
        migrations.RemoveConstraint(model_name="questionvector", name="unique_sent_vector"),
        migrations.RemoveIndex(model_name="questionvector", name="similarity_vector_space_idx"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="questionvector",
                    name="space",
                    field=models.CharField(
                        default="",
                        help_text="The partition: r<route id> for sent vectors, v<embedder version id> for built-in ones.",
                        max_length=24,
                    ),
                    preserve_default=False,
                ),
            ],
            database_operations=[migrations.RunPython(_partition)],
        ),
        migrations.AddConstraint(
            model_name="questionvector",
            constraint=models.UniqueConstraint(fields=("decision", "space"), name="unique_vector_per_space"),
        ),
        migrations.AddConstraint(
            model_name="questionvector",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("embedder__isnull", True),
                    ("space", Concat(Value("r"), Cast("route_id", models.TextField()), output_field=models.TextField())),
                )
                | models.Q(
                    ("embedder__isnull", False),
                    ("space", Concat(Value("v"), Cast("embedder_id", models.TextField()), output_field=models.TextField())),
                ),
                name="vector_space_key",
            ),
        ),
    ]
