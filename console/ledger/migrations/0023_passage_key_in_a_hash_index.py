"""The passages' content key stays unique through an exclusion constraint on a hash index instead of
a unique B-tree: a hash index keeps a 4-byte hash code and the row's address per entry, where the
B-tree kept the whole 32-byte digest in pages that random keys leave about 70% full (bench/README.md,
storage: 77 bytes a passage). The key itself stays the full SHA-256, so an auditor can still
recompute it from the row.

Fillfactor 90 rather than the hash default of 75: buckets split when they average 90% of a page, so
a few overflow for a while (random keys spread unevenly), and the index is smaller at most sizes:
fed random keys in batches, 33-50 bytes a passage against 37-60 at 75 and 76-78 for the B-tree
(bench/README.md, storage, second session).

Ingest's `INSERT ... ON CONFLICT DO NOTHING` names no conflict target, so it treats the exclusion
constraint as it did the unique one: a row whose key is stored is skipped, and one whose key a
concurrent transaction is inserting waits for that transaction to end. Look-ups by key
(`content_key = ANY(...)`) read the hash index through a bitmap scan.

The constraint keeps the old name, so a violation still names `unique_passage_content_key`. Django
cannot declare an exclusion constraint on a hash index (ExclusionConstraint takes GiST or SP-GiST),
so the model's state simply loses the UniqueConstraint; the model says where the key lives. Existing
rows are indexed anew by the ALTER TABLE, inside the migration's transaction (which holds the table
locked: no window without the constraint).
"""

from django.db import migrations

FORWARD = (
    "ALTER TABLE ledger_passage DROP CONSTRAINT unique_passage_content_key, "
    "ADD CONSTRAINT unique_passage_content_key EXCLUDE USING hash (content_key WITH =) WITH (fillfactor = 90)"
)
BACKWARD = (
    "ALTER TABLE ledger_passage DROP CONSTRAINT unique_passage_content_key, "
    "ADD CONSTRAINT unique_passage_content_key UNIQUE (content_key)"
)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0022_passage_text_zstd")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[migrations.RemoveConstraint(model_name="passage", name="unique_passage_content_key")],
        )
    ]
