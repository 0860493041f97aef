"""The decisions' monthly partitions: what the ledger adds to the generic helpers of
console/core/partitions.py.

`ledger_decision` is partitioned by RANGE (occurred_at). A per-decision table that grows with
every decision (the span-check figures) carries a copy of its decision's
occurred_at in `decision_occurred_at`, is partitioned the same way, and refers to its decision by
(decision_id, decision_occurred_at): a month's rows of every such table live in partitions of the
same month, and `manage.py archive_month` detaches them together, the decisions last
(`decision_month_partitions`). That reference is checked once per statement
(`console_decision_month_check`), and statement triggers on the decisions carry a changed
occurred_at to those rows and delete them with their decision; a foreign key did the same, but
checked each row with a query on the partitioned decisions, which halved ingest.

The decision's primary key is (id, occurred_at), so the smaller tables that point at a decision
(pool items, labels, disputes, vectors, shadow runs, trial calls, span checks) keep their
decision_id and get core's `console_reference_check` trigger instead. Deleting a decision goes
through Django, whose on_delete rules still protect or cascade; the archive command takes care of
a month's dependants.

The SQL below is what the database runs: ledger migrations 0010 and 0013 installed it from a
frozen copy (console/ledger/migrations/_partitions_v1.py), and
tests/project/test_frozen_migrations.py checks the two agree. Changing it takes a new migration.
"""

from __future__ import annotations

from console.core.partitions import MonthPartition, month_partitions

DECISION_TABLE = "ledger_decision"


def decision_month_partitions(*, cursor=None) -> list[MonthPartition]:
    """Every month partition of the schema, oldest month first, the decisions' last within a month,
    so that a month is never left with rows whose decision is gone (the archive detaches in this order)."""
    return month_partitions(referred=(DECISION_TABLE,), cursor=cursor)


# A per-decision table's reference to its decision's (id, occurred_at), checked once per statement
# (a foreign key would check it once per row, each a query on the partitioned decisions: that
# halved ingest), and the decisions' statement triggers that carry a changed occurred_at to those
# rows and delete them with their decision. The per-decision tables are found by their check
# trigger's name.
MONTH_REFERENCE_FUNCTIONS = """
CREATE OR REPLACE FUNCTION console_decision_month_check() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    missing bigint;
BEGIN
    SELECT n.decision_id INTO missing FROM (SELECT DISTINCT decision_id, decision_occurred_at FROM new_rows) n
     WHERE NOT EXISTS (SELECT 1 FROM ledger_decision d
                        WHERE d.id = n.decision_id AND d.occurred_at = n.decision_occurred_at OFFSET 0)
     LIMIT 1;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'insert on table "%" violates the reference to "ledger_decision"', TG_TABLE_NAME
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Key (decision_id, decision_occurred_at) of decision %s is not present in '
                                  'table "ledger_decision".', missing);
    END IF;
    RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION ledger_decision_month_follow() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    child text;
BEGIN
    FOR child IN
        SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE NOT t.tgisinternal AND NOT c.relispartition AND t.tgname = c.relname || '_decision_month_exists'
         ORDER BY c.relname
    LOOP
        IF TG_OP = 'UPDATE' THEN
            EXECUTE format(
                'UPDATE %I AS c SET decision_occurred_at = n.occurred_at '
                'FROM new_rows n JOIN old_rows o ON o.id = n.id '
                'WHERE c.decision_id = n.id AND n.occurred_at IS DISTINCT FROM o.occurred_at', child);
        ELSE
            EXECUTE format('DELETE FROM %I AS c USING old_rows o WHERE c.decision_id = o.id', child);
        END IF;
    END LOOP;
    RETURN NULL;
END
$fn$;
"""

DECISION_FOLLOW_TRIGGERS = """
CREATE TRIGGER ledger_decision_month_followed_update AFTER UPDATE ON ledger_decision
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_decision_month_follow();
CREATE TRIGGER ledger_decision_month_followed_delete AFTER DELETE ON ledger_decision
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ledger_decision_month_follow();
"""


def month_reference_by_statement(cursor, *, table: str) -> None:
    """Replace `table`'s foreign key on (decision_id, decision_occurred_at) by the statement check."""
    cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT IF EXISTS "{table}_decision_id_month_fk"')
    cursor.execute(
        f"CREATE TRIGGER {table}_decision_month_exists AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION console_decision_month_check()"
    )
