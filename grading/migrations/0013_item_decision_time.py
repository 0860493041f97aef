"""A pool item carries its decision's occurred_at (issue 36, item 4): the decisions and their ranked
passages are partitioned by month, and the queue's claim reads an item's texts and passages by
(decision id, occurred_at), so it probes one month's partitions instead of every month's."""

from django.db import migrations, models

# Row-level, as the labels' copies (grading 0003). A writer that knows the decision's time passes it
# (pool entry does), and the trigger confirms it with one probe of that month's partition; without
# it, or when it names no such decision, the time is looked up by id. So the copy never disagrees
# with the decision, whoever writes the item (COPY included).
COPY_TRIGGER = """
CREATE FUNCTION grading_gradingitem_copy_decision_time() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.decision_id IS NULL THEN
        NEW.decision_occurred_at := NULL;
    ELSIF NEW.decision_occurred_at IS NULL OR NOT EXISTS (
            SELECT 1 FROM ledger_decision WHERE id = NEW.decision_id AND occurred_at = NEW.decision_occurred_at) THEN
        NEW.decision_occurred_at := (SELECT occurred_at FROM ledger_decision WHERE id = NEW.decision_id);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER grading_gradingitem_copies_decision_time
    BEFORE INSERT OR UPDATE OF decision_id, decision_occurred_at ON grading_gradingitem
    FOR EACH ROW EXECUTE FUNCTION grading_gradingitem_copy_decision_time();
-- Decisions are insert-only in the application; an edit made anyway still reaches the copies.
CREATE FUNCTION grading_gradingitem_follow_decision_time() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE grading_gradingitem AS item SET decision_occurred_at = d.occurred_at
      FROM new_rows d
     WHERE item.decision_id = d.id AND item.decision_occurred_at IS DISTINCT FROM d.occurred_at;
    RETURN NULL;
END
$$;
CREATE TRIGGER grading_gradingitem_follows_decision_time AFTER UPDATE ON ledger_decision
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION grading_gradingitem_follow_decision_time();
UPDATE grading_gradingitem AS item SET decision_occurred_at = d.occurred_at
  FROM ledger_decision d WHERE d.id = item.decision_id;
"""

DROP_COPY_TRIGGER = """
DROP TRIGGER grading_gradingitem_follows_decision_time ON ledger_decision;
DROP FUNCTION grading_gradingitem_follow_decision_time();
DROP TRIGGER grading_gradingitem_copies_decision_time ON grading_gradingitem;
DROP FUNCTION grading_gradingitem_copy_decision_time();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("grading", "0012_label_expected_claims_copy"),
    ]

    operations = [
        migrations.AddField(
            model_name="gradingitem",
            name="decision_occurred_at",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="The decision's occurred_at, its month partition key: the queue's claim reads the "
                "decision's texts and passages from that month's partitions only. Kept by the database (grading "
                "migration 0012).",
                null=True,
            ),
        ),
        migrations.RunSQL(COPY_TRIGGER, DROP_COPY_TRIGGER),
    ]
