"""A decision's ranked passages become three arrays of its own row, in rank order: `passage_ids`,
`passage_ranks` (the integrator's ranks, unique but not always 1..n) and `retrieval_scores`
(elements NULL when not sent). The link table `ledger_decisionpassage` cost about 676 bytes a
decision at five passages (342 heap, 201 primary key, 131 passage index: a 24-byte tuple header
and 8-byte alignment per link) and a second COPY of 2,500 rows per 500 decisions at ingest;
the arrays cost the decision row a few dozen bytes (bench/README.md, storage).

Nothing indexes the arrays: "which decisions logged this passage" is asked only by a month's
archive (one scan of the remaining decisions) and by the statement trigger below. The verify API's
access check on a passage id reads the passage's own route instead, a column added here: filled
from the decisions that logged each passage (NULL for a passage no decision logged). A passage
logged by several routes (stored before the content key held the route) is split into a row per
route, and each decision of the other routes names its route's copy, whose key is never matched
again (as the old key was not); the span checks and disputes of those decisions follow in their
apps' migrations (verification 0006, disputes 0005).

A passage a decision logged stays undeletable, as the link table's foreign key kept it: a statement
trigger on the passages looks for each deleted one in the passage ids of its route's decisions.

Forwards, each decision's links are gathered into its arrays (decisions without links keep the
empty arrays the columns default to) and the partitioned link table is dropped with its month
partitions. Backwards, the link table is made again as it was (its columns in their old order, its
keys, index, reference trigger and one partition per month partition of the decisions, with the
same bounds) and filled from the arrays, then the columns go. The functions the trigger runs stay
installed (ledger 0010): the span-check figures use them too.
"""

import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models
from django.db.models.lookups import Exact

from console.ledger.migrations._split_v1 import copy_key_sql

LINKS_TO_ARRAYS = """
UPDATE ledger_decision AS d
   SET passage_ids = l.passage_ids, passage_ranks = l.passage_ranks, retrieval_scores = l.retrieval_scores
  FROM (SELECT decision_id, decision_occurred_at,
               array_agg(passage_id ORDER BY rank) AS passage_ids,
               array_agg(rank ORDER BY rank) AS passage_ranks,
               array_agg(retrieval_score ORDER BY rank) AS retrieval_scores
          FROM ledger_decisionpassage GROUP BY decision_id, decision_occurred_at) AS l
 WHERE d.id = l.decision_id AND d.occurred_at = l.decision_occurred_at
"""

# The link table as ledger 0001, 0007, 0010 and 0012 left it.
LINK_TABLE = [
    "CREATE TABLE ledger_decisionpassage (rank integer NOT NULL CONSTRAINT ledger_decisionpassage_rank_check "
    "CHECK (rank >= 0), retrieval_score double precision NULL, decision_id bigint NOT NULL, "
    "passage_id bigint NOT NULL, decision_occurred_at timestamp with time zone NOT NULL) "
    "PARTITION BY RANGE (decision_occurred_at)",
    "ALTER TABLE ledger_decisionpassage ADD CONSTRAINT ledger_decisionpassage_pkey "
    "PRIMARY KEY (decision_id, rank, decision_occurred_at)",
    "ALTER TABLE ledger_decisionpassage ADD CONSTRAINT ledger_decisionpassage_passage_id_fea8e0bb_fk_ledger_passage_id "
    "FOREIGN KEY (passage_id) REFERENCES ledger_passage (id) DEFERRABLE INITIALLY DEFERRED",
    "CREATE INDEX ledger_decisionpassage_passage_id_fea8e0bb ON ledger_decisionpassage (passage_id)",
]
ARRAYS_TO_LINKS = """
INSERT INTO ledger_decisionpassage (decision_id, decision_occurred_at, passage_id, rank, retrieval_score)
SELECT d.id, d.occurred_at, l.passage_id, l.rank, l.retrieval_score
  FROM ledger_decision d
 CROSS JOIN LATERAL unnest(d.passage_ids, d.passage_ranks, d.retrieval_scores) AS l(passage_id, rank, retrieval_score)
 ORDER BY d.id, l.rank
"""
LINK_CHECK_TRIGGER = (
    "CREATE TRIGGER ledger_decisionpassage_decision_month_exists AFTER INSERT ON ledger_decisionpassage "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION console_decision_month_check()"
)


# What the link table's foreign key did for a passage (Django's PROTECT, the database's NO ACTION):
# a passage a decision logged cannot be deleted. Checked once per statement, by one read of the
# passage ids of the deleted passages' routes' decisions (no index holds them); only an archive
# deletes passages, once a month, and only those no decision names.
PASSAGE_LOGGED_CHECK = """
CREATE FUNCTION ledger_passage_logged_check() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    logged bigint;
BEGIN
    SELECT o.id INTO logged FROM old_rows o
     WHERE o.id IN (SELECT l.id FROM ledger_decision d CROSS JOIN LATERAL unnest(d.passage_ids) AS l(id)
                     WHERE d.route_id IN (SELECT route_id FROM old_rows))
     LIMIT 1;
    IF logged IS NOT NULL THEN
        RAISE EXCEPTION 'delete on table "ledger_passage" violates the reference from "ledger_decision"'
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Passage %s is still logged by a decision.', logged);
    END IF;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER ledger_passage_logged AFTER DELETE ON ledger_passage
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ledger_passage_logged_check();
"""
PASSAGE_LOGGED_CHECK_DROP = """
DROP TRIGGER ledger_passage_logged ON ledger_passage;
DROP FUNCTION ledger_passage_logged_check();
"""


# Each passage's route: the (first) route of the decisions that logged it.
PASSAGE_ROUTES = """
UPDATE ledger_passage AS p SET route_id = l.route_id
  FROM (SELECT dp.passage_id, min(d.route_id) AS route_id FROM ledger_decisionpassage dp
          JOIN ledger_decision d ON d.id = dp.decision_id AND d.occurred_at = dp.decision_occurred_at
         GROUP BY dp.passage_id) AS l
 WHERE p.id = l.passage_id
"""
# A copy of a shared passage for each other route that logged it, with an id of its own and a key no
# ingest computes (`_split_v1.copy_key_sql`), so the apps whose rows name a passage find their
# route's copy in their own migrations (verification 0006, disputes 0005).
PASSAGE_SPLITS = """
CREATE TEMPORARY TABLE passage_split AS
SELECT old_id, route_id, nextval(pg_get_serial_sequence('ledger_passage', 'id')) AS new_id
  FROM (SELECT DISTINCT dp.passage_id AS old_id, d.route_id FROM ledger_decisionpassage dp
          JOIN ledger_decision d ON d.id = dp.decision_id AND d.occurred_at = dp.decision_occurred_at
          JOIN ledger_passage p ON p.id = dp.passage_id
         WHERE d.route_id <> p.route_id) AS shared
"""
# The copies themselves, the shared row's fields under the new id, key and route.
PASSAGE_COPIES = f"""
INSERT INTO ledger_passage (id, external_id, corpus_snapshot, text, source, uri, embedding, content_key, route_id)
SELECT s.new_id, p.external_id, p.corpus_snapshot, p.text, p.source, p.uri, p.embedding,
       {copy_key_sql("p", "s.route_id")}, s.route_id
  FROM passage_split s JOIN ledger_passage p ON p.id = s.old_id
"""
# Each decision of another route names its route's copy.
LINKS_TO_COPIES = """
UPDATE ledger_decisionpassage AS x SET passage_id = s.new_id FROM passage_split s, ledger_decision d
 WHERE x.passage_id = s.old_id AND d.id = x.decision_id AND d.occurred_at = x.decision_occurred_at
   AND d.route_id = s.route_id
"""


def _passage_routes(cursor) -> None:
    """Give every passage that a decision logged its route, splitting the passages several routes
    logged. A passage no decision logged keeps no route (nobody may read it through the verify API,
    as before, when that took a decision that logged it)."""
    cursor.execute(PASSAGE_ROUTES)
    cursor.execute(PASSAGE_SPLITS)
    cursor.execute(PASSAGE_COPIES)
    cursor.execute(LINKS_TO_COPIES)
    cursor.execute("DROP TABLE passage_split")


def links_to_arrays(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        _passage_routes(cursor)
        cursor.execute(LINKS_TO_ARRAYS)
        cursor.execute("DROP TABLE ledger_decisionpassage")


def arrays_to_links(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for statement in LINK_TABLE:
            cursor.execute(statement)
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'ledger_decision'::regclass ORDER BY 1"
        )
        for name, bound in cursor.fetchall():
            month = name.removeprefix("ledger_decision")  # _yYYYYmMM
            cursor.execute(f"CREATE TABLE ledger_decisionpassage{month} PARTITION OF ledger_decisionpassage {bound}")
        cursor.execute(ARRAYS_TO_LINKS)
        cursor.execute(LINK_CHECK_TRIGGER)


def _cardinality(field: str) -> models.Func:
    return models.Func(models.F(field), function="cardinality", output_field=models.IntegerField())


class Migration(migrations.Migration):
    dependencies = [("accounts", "0005_route_on_the_ground_floor"), ("ledger", "0023_passage_key_in_a_hash_index")]

    operations = [
        migrations.AddField(
            model_name="passage",
            name="route",
            field=models.ForeignKey(
                null=True,
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="accounts.route",
            ),
        ),
        migrations.AddField(
            model_name="decision",
            name="passage_ids",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.BigIntegerField(),
                db_default=models.Value("{}"),
                default=list,
                help_text="The logged passages' ids (ledger_passage), in rank order.",
                size=None,
            ),
        ),
        migrations.AddField(
            model_name="decision",
            name="passage_ranks",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.IntegerField(),
                db_default=models.Value("{}"),
                default=list,
                help_text="The integrator's rank of each passage (1 is the top; unique, not always 1..n), "
                "in rank order.",
                size=None,
            ),
        ),
        migrations.AddField(
            model_name="decision",
            name="retrieval_scores",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.FloatField(null=True),
                db_default=models.Value("{}"),
                default=list,
                help_text="The retriever's score of each passage (NULL when not sent), in rank order.",
                size=None,
            ),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(links_to_arrays, arrays_to_links)],
            state_operations=[
                migrations.RemoveField(model_name="decision", name="passages"),
                migrations.DeleteModel(name="DecisionPassage"),
            ],
        ),
        migrations.AddConstraint(
            model_name="decision",
            constraint=models.CheckConstraint(
                condition=Exact(_cardinality("passage_ranks"), _cardinality("passage_ids"))
                & Exact(_cardinality("retrieval_scores"), _cardinality("passage_ids")),
                name="passage_arrays_of_one_length",
            ),
        ),
        migrations.RunSQL(PASSAGE_LOGGED_CHECK, PASSAGE_LOGGED_CHECK_DROP),
    ]
