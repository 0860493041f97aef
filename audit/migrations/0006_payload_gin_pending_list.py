"""The payload's GIN index is built again with a 256 kB pending list, as the decisions' indexes are
(ledger migration 0015 says why): with the default 4 MB, a few hundred events carried megabytes of
free pages in the index file."""

import django.contrib.postgres.indexes
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0005_route_scope_no_action_choices"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="auditevent", name="audit_payload_gin"),
        migrations.AddIndex(
            model_name="auditevent",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["payload"], gin_pending_list_limit=256, name="audit_payload_gin", opclasses=["jsonb_path_ops"]
            ),
        ),
    ]
