"""Embedder models move from a column of the versions to `similarity_embeddermodel`, partitioned by
LIST on the version: one partition per live version, made with its vector partition and dropped
with it when the version retires.

Emptying a retired version's model in place left its megabytes dead in the versions' TOAST, where
the next version's model (written while the old one still answered) sat after them, so the table
kept a retired model's bytes besides the current one's. Live versions' models are carried over;
retired ones are already empty. Migration 0008 then gives the dropped column's bytes back.
"""

import django.db.models.deletion
from django.db import migrations, models

FUNCTIONS = r"""
CREATE TABLE similarity_embeddermodel (
    version_id bigint NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT similarity_embeddermodel_pkey PRIMARY KEY (version_id),
    CONSTRAINT similarity_embeddermodel_version_id_fk FOREIGN KEY (version_id)
        REFERENCES similarity_embedderversion (id) DEFERRABLE INITIALLY DEFERRED
) PARTITION BY LIST (version_id);

CREATE OR REPLACE FUNCTION similarity_space_create(space text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    parts text[] := ARRAY['similarity_questionvector'];
    parent text;
    part text;
    made boolean := false;
BEGIN
    IF space !~ '^[rv][1-9][0-9]{0,17}$' THEN
        RAISE EXCEPTION 'similarity_space_create: bad space %', space;
    END IF;
    IF space LIKE 'v%' THEN
        parts := parts || 'similarity_embeddermodel'::text;
    END IF;
    PERFORM pg_advisory_xact_lock(1399418192, hashtext(space));  -- "SimP": one creation per space
    FOREACH parent IN ARRAY parts LOOP
        part := parent || '_' || space;
        -- pg_class read by a query, which sees what a racer committed while this one waited on the lock
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_class WHERE relname = part AND relnamespace = 'public'::regnamespace);
        -- Made on its own and attached: that locks the table against other schema changes only,
        -- where CREATE TABLE ... PARTITION OF would lock out its reads and writes.
        EXECUTE format(
            'CREATE TABLE public.%I (LIKE public.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS '
            'INCLUDING STORAGE INCLUDING COMPRESSION)', part, parent);
        EXECUTE format('ALTER TABLE public.%I ATTACH PARTITION public.%I FOR VALUES IN (%L)', parent, part,
                       CASE WHEN parent = 'similarity_questionvector' THEN space ELSE substr(space, 2) END);
        made := true;
    END LOOP;
    RETURN made;
END
$fn$;

CREATE OR REPLACE FUNCTION similarity_space_drop(space text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    parent text;
    part text;
    dropped boolean := false;
BEGIN
    IF space !~ '^v[1-9][0-9]{0,17}$' OR EXISTS (
        SELECT 1 FROM similarity_embedderversion WHERE id = substr(space, 2)::bigint AND state <> 'retired'
    ) THEN
        RAISE EXCEPTION 'similarity_space_drop: % is not the space of a retired embedder version', space;
    END IF;
    FOREACH parent IN ARRAY ARRAY['similarity_questionvector', 'similarity_embeddermodel'] LOOP
        part := parent || '_' || space;
        CONTINUE WHEN NOT EXISTS (
            SELECT 1 FROM pg_class WHERE relname = part AND relnamespace = 'public'::regnamespace);
        EXECUTE format('ALTER TABLE public.%I DETACH PARTITION public.%I', parent, part);
        EXECUTE format('DROP TABLE public.%I', part);
        dropped := true;
    END LOOP;
    RETURN dropped;
END
$fn$;
"""


def _carry_models(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(FUNCTIONS)
        cursor.execute("SELECT id FROM similarity_embedderversion WHERE state <> 'retired' ORDER BY id")
        for (version_id,) in cursor.fetchall():
            cursor.execute("SELECT similarity_space_create(%s)", [f"v{int(version_id)}"])
        cursor.execute(
            "INSERT INTO similarity_embeddermodel (version_id, data) "
            "SELECT id, model FROM similarity_embedderversion WHERE state <> 'retired'"
        )


class Migration(migrations.Migration):
    dependencies = [("similarity", "0006_vectors_partitioned_by_space")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="EmbedderModel",
                    fields=[
                        (
                            "version",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                primary_key=True,
                                related_name="fitted_model",
                                serialize=False,
                                to="similarity.embedderversion",
                            ),
                        ),
                        ("data", models.BinaryField()),
                    ],
                ),
            ],
            database_operations=[migrations.RunPython(_carry_models)],
        ),
        migrations.RemoveField(model_name="embedderversion", name="model"),
    ]
