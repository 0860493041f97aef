"""A pool item's copy of its decision's occurred_at (migration 0013) is confirmed once per insert
statement instead of once per row.

Ingest enters a batch's 500 items in one statement, each with its decision's time. The row trigger
ran a query of its own for each of them, a third of the statement's time (bench/README.md). The
times given are now checked by one statement-level trigger: it finds, in one anti-join, the new
items whose time names no such decision (each probe reads only the month the time names, and
`OFFSET 0` keeps the probes from becoming a hash of every decision), and sets those from their
decision, as the row trigger did. A row without a time still gets it from the row trigger as it
goes in, which a condition on the trigger limits to such rows. Nothing changes for whoever writes
an item: a time left out, a wrong one or one given without a decision ends as before. Updates
keep the row trigger.
"""

from django.db import migrations

CHECK_PER_STATEMENT = """
DROP TRIGGER grading_gradingitem_copies_decision_time ON grading_gradingitem;
CREATE TRIGGER grading_gradingitem_copies_decision_time
    BEFORE UPDATE OF decision_id, decision_occurred_at ON grading_gradingitem
    FOR EACH ROW EXECUTE FUNCTION grading_gradingitem_copy_decision_time();
-- A writer that passes no time (a COPY, an item made in the ORM) gets it as the row goes in: the
-- condition is read without calling the function, so rows that carry a time cost nothing here.
CREATE TRIGGER grading_gradingitem_copies_decision_time_left_out
    BEFORE INSERT ON grading_gradingitem
    FOR EACH ROW WHEN (NEW.decision_occurred_at IS NULL) EXECUTE FUNCTION grading_gradingitem_copy_decision_time();
-- A time that names no such decision (or one given without a decision) is set from the decision,
-- after the statement: rare, so the rows are written twice only then.
CREATE FUNCTION grading_gradingitem_copy_decision_time_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE grading_gradingitem AS item
       SET decision_occurred_at = (SELECT d.occurred_at FROM ledger_decision d WHERE d.id = n.decision_id)
      FROM new_rows n
     WHERE item.id = n.id
       AND n.decision_occurred_at IS NOT NULL
       AND (n.decision_id IS NULL OR NOT EXISTS (
                SELECT 1 FROM ledger_decision d
                 WHERE d.id = n.decision_id AND d.occurred_at = n.decision_occurred_at OFFSET 0));
    RETURN NULL;
END
$$;
CREATE TRIGGER grading_gradingitem_copies_decision_time_inserted
    AFTER INSERT ON grading_gradingitem REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION grading_gradingitem_copy_decision_time_inserted();
"""

# Backwards: the row trigger on every insert too, as 0013 created it.
CHECK_PER_ROW = """
DROP TRIGGER grading_gradingitem_copies_decision_time_inserted ON grading_gradingitem;
DROP FUNCTION grading_gradingitem_copy_decision_time_inserted();
DROP TRIGGER grading_gradingitem_copies_decision_time_left_out ON grading_gradingitem;
DROP TRIGGER grading_gradingitem_copies_decision_time ON grading_gradingitem;
CREATE TRIGGER grading_gradingitem_copies_decision_time
    BEFORE INSERT OR UPDATE OF decision_id, decision_occurred_at ON grading_gradingitem
    FOR EACH ROW EXECUTE FUNCTION grading_gradingitem_copy_decision_time();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0014_route_read_through_the_queue_index"),
    ]

    operations = [migrations.RunSQL(CHECK_PER_STATEMENT, CHECK_PER_ROW)]
