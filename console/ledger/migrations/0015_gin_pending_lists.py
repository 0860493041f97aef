"""The decisions' GIN indexes are built again with a 256 kB pending list (GIN_PENDING_LIST_KB).

With PostgreSQL's default of 4 MB, each month's text-search, versions and segments index kept the
pages of its last merged pending list as free space that VACUUM never returns: measured on 20,000
decisions, 5.9 MB for 1.4 MB of entries in the text-search index alone. The limit is a storage
parameter of the index, and a partitioned index takes it only when it is created (ALTER INDEX
cannot set it there), so each index is dropped and created again; its month partitions inherit the
setting, and so do months created later. Ingest waits while this runs: on a large console, run
`manage.py migrate` in a quiet hour (README, "Upgrading a large console").
"""

import django.contrib.postgres.indexes
from django.db import migrations

TEXT_SEARCH = (
    "CREATE INDEX decision_text_search_idx ON ledger_decision "
    "USING gin (to_tsvector('simple'::regconfig, question || ' ' || claim))"
)


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0014_passage_dictionary"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="decision", name="decision_versions_gin"),
        migrations.RemoveIndex(model_name="decision", name="decision_segments_gin"),
        migrations.AddIndex(
            model_name="decision",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["versions"],
                gin_pending_list_limit=256,
                name="decision_versions_gin",
                opclasses=["jsonb_path_ops"],
            ),
        ),
        migrations.AddIndex(
            model_name="decision",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["segments"],
                gin_pending_list_limit=256,
                name="decision_segments_gin",
                opclasses=["jsonb_path_ops"],
            ),
        ),
        migrations.RunSQL(
            sql=["DROP INDEX decision_text_search_idx", TEXT_SEARCH + " WITH (gin_pending_list_limit = 256)"],
            reverse_sql=["DROP INDEX decision_text_search_idx", TEXT_SEARCH],
        ),
    ]
