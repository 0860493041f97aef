"""Final labels get a revision, stamped by a trigger on every write from a sequence drawn under the
audit chain's lock, and an index that gives a route's newest revision in one probe.

The statistics' data version used to count and sum every label of the route on every request (3 ms
for 20,000 labels); the newest revision now tells the same: any insert or update of a route's label
moves it. The sequence is drawn under the lock every audited write takes until it commits
(audit.services, `_CHAIN_LOCK_KEY`), so revisions are handed out in commit order: a label written
by a transaction that commits later can never carry a revision lower than one already seen.
Labels written before this migration keep no revision: the version's format changes with it, so no
document stored before matches, and the next write to any label stamps one.
"""

from django.db import migrations, models

# audit.services._CHAIN_LOCK_KEY (0x41756469); tests/analysis/test_data_version.py checks the trigger
# takes that lock.
CHAIN_LOCK_KEY = 1098212457

STAMP = f"""
CREATE SEQUENCE grading_finallabel_revision_seq;
CREATE FUNCTION grading_finallabel_stamp_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({CHAIN_LOCK_KEY});
    NEW.revision := nextval('grading_finallabel_revision_seq');
    RETURN NEW;
END
$$;
CREATE TRIGGER grading_finallabel_stamps_revision BEFORE INSERT OR UPDATE ON grading_finallabel
    FOR EACH ROW EXECUTE FUNCTION grading_finallabel_stamp_revision();
"""

UNSTAMP = """
DROP TRIGGER grading_finallabel_stamps_revision ON grading_finallabel;
DROP FUNCTION grading_finallabel_stamp_revision();
DROP SEQUENCE grading_finallabel_revision_seq;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0005_label_item_copies"),
        ("ledger", "0013_reference_checks_by_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="finallabel",
            name="revision",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(STAMP, UNSTAMP),
        migrations.AddIndex(
            model_name="finallabel",
            index=models.Index(fields=["decision_route", "revision"], name="label_revision_idx"),
        ),
    ]
