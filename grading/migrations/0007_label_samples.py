"""Final labels packed per route, UTC day and sample group (grading.LabelSample), kept by statement
triggers on the labels: the graded sample of a window then joins a few packed rows per day instead
of grouping and packing every label of the window on each read (8-9 ms for 20,000 labels, about 2
ms from the packed rows).

A statement's triggers rebuild every (route, day) it touched, from the labels as they stand: a
day's rows are never patched, so they cannot drift from a GROUP BY over its labels. An update
rebuilds the day a label left (its old row) as well as the day it moved to. COPY fires them too.
"""

import django.db.models.deletion
from django.db import migrations, models

# audit.services._CHAIN_LOCK_KEY, as in migration 0006.
CHAIN_LOCK_KEY = 1098212457

# One day's labels of one group, packed as the selectors read them: label id order in both strings.
PACKED_COLUMNS = """
       count(*),
       string_agg(float8send(coalesce(label.decision_score, 'NaN'::float8)), ''::bytea ORDER BY label.id),
       string_agg(boolsend(label.correct), ''::bytea ORDER BY label.id)
"""

TOUCHED_DAYS = """
SELECT array_agg(route_id), array_agg(day) INTO touched_routes, touched_days FROM (
    SELECT DISTINCT decision_route_id AS route_id, (decision_occurred_at AT TIME ZONE 'UTC')::date AS day
      FROM {rows} WHERE decision_route_id IS NOT NULL AND decision_occurred_at IS NOT NULL
) touched;
"""

PACK = f"""
CREATE FUNCTION grading_labelsample_rebuild() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    touched_routes bigint[];
    touched_days date[];
BEGIN
    -- Each branch names only the transition tables its event provides.
    IF TG_OP = 'INSERT' THEN
        {TOUCHED_DAYS.format(rows="new_rows")}
    ELSIF TG_OP = 'UPDATE' THEN
        {TOUCHED_DAYS.format(rows="(SELECT * FROM new_rows UNION ALL SELECT * FROM old_rows) moved")}
    ELSE
        {TOUCHED_DAYS.format(rows="old_rows")}
    END IF;
    IF touched_routes IS NULL THEN
        RETURN NULL;
    END IF;
    -- Two writers never rebuild one day from different snapshots: every insert and update of a label
    -- already holds the audit chain's lock until it commits (the revision trigger of migration 0006,
    -- a BEFORE row trigger, so taken before this runs), and a delete takes it here. A writer that
    -- waited then reads, statement by statement (READ COMMITTED), the labels the other committed.
    PERFORM pg_advisory_xact_lock({CHAIN_LOCK_KEY});
    DELETE FROM grading_labelsample sample
     USING unnest(touched_routes, touched_days) AS touched(route_id, day)
     WHERE sample.route_id = touched.route_id AND sample.day = touched.day;
    INSERT INTO grading_labelsample
           (route_id, day, method, source, item_inclusion_probability, item_stratum, labels, scores, correct)
    SELECT touched.route_id, touched.day, label.method, label.source, label.item_inclusion_probability,
           label.item_stratum, {PACKED_COLUMNS}
      FROM unnest(touched_routes, touched_days) AS touched(route_id, day)
      JOIN grading_finallabel label
        ON label.decision_route_id = touched.route_id
       AND label.decision_occurred_at >= touched.day::timestamp AT TIME ZONE 'UTC'
       AND label.decision_occurred_at < (touched.day + 1)::timestamp AT TIME ZONE 'UTC'
     GROUP BY touched.route_id, touched.day, label.method, label.source, label.item_inclusion_probability,
              label.item_stratum;
    RETURN NULL;
END
$$;
-- PostgreSQL allows transition tables only on a trigger of one event: three triggers, one function.
CREATE TRIGGER grading_finallabel_packs_inserted AFTER INSERT ON grading_finallabel
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION grading_labelsample_rebuild();
CREATE TRIGGER grading_finallabel_packs_updated AFTER UPDATE ON grading_finallabel
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION grading_labelsample_rebuild();
CREATE TRIGGER grading_finallabel_packs_deleted AFTER DELETE ON grading_finallabel
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION grading_labelsample_rebuild();
CREATE FUNCTION grading_labelsample_empty() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM grading_labelsample;
    RETURN NULL;
END
$$;
CREATE TRIGGER grading_finallabel_packs_truncated AFTER TRUNCATE ON grading_finallabel
    FOR EACH STATEMENT EXECUTE FUNCTION grading_labelsample_empty();
-- The labels already there, packed after the triggers exist: creating them locked the labels
-- against writes until this migration commits, so no label is written between the two.
INSERT INTO grading_labelsample
       (route_id, day, method, source, item_inclusion_probability, item_stratum, labels, scores, correct)
SELECT label.decision_route_id, (label.decision_occurred_at AT TIME ZONE 'UTC')::date, label.method, label.source,
       label.item_inclusion_probability, label.item_stratum, {PACKED_COLUMNS}
  FROM grading_finallabel label
 WHERE label.decision_route_id IS NOT NULL AND label.decision_occurred_at IS NOT NULL
 GROUP BY 1, 2, 3, 4, 5, 6;
"""

UNPACK = """
DROP TRIGGER grading_finallabel_packs_truncated ON grading_finallabel;
DROP FUNCTION grading_labelsample_empty();
DROP TRIGGER grading_finallabel_packs_deleted ON grading_finallabel;
DROP TRIGGER grading_finallabel_packs_updated ON grading_finallabel;
DROP TRIGGER grading_finallabel_packs_inserted ON grading_finallabel;
DROP FUNCTION grading_labelsample_rebuild();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('grading', '0006_label_revision'),
        ('ledger', '0014_passage_dictionary'),
    ]

    operations = [
        migrations.CreateModel(
            name='LabelSample',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField(help_text="UTC date of the labelled decisions' occurred_at.")),
                ('method', models.CharField(choices=[('unanimous', 'Unanimous graders'), ('majority', 'Majority of graders'), ('adjudicated', 'Adjudicated by a reviewer'), ('imported', 'Imported graded set')], help_text="The labels' method.", max_length=12)),
                ('source', models.CharField(blank=True, help_text="The labels' imported set, empty for grades.", max_length=200)),
                ('item_inclusion_probability', models.FloatField(blank=True, help_text="The labels' pool items' inclusion probability; empty without an item.", null=True)),
                ('item_stratum', models.CharField(blank=True, help_text="The labels' pool items' stratum; empty without an item.", max_length=64, null=True)),
                ('labels', models.PositiveIntegerField(help_text='How many labels the row packs.')),
                ('scores', models.BinaryField(help_text="The labels' decision scores in label id order, big-endian float8 each, NaN for none.")),
                ('correct', models.BinaryField(help_text="The labels' verdicts in the same order, one byte each (1: correct).")),
                ('route', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='ledger.route')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('route', 'day', 'method', 'source', 'item_inclusion_probability', 'item_stratum'), name='unique_label_sample_group', nulls_distinct=False)],
            },
        ),
        migrations.RunSQL(PACK, UNPACK),
    ]
