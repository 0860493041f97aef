"""A dispute's evidence names its decision's route's passage.

Ledger 0024 gave every passage its route and split a passage that several routes logged (stored
before its content key held the route) into a row per route: each copy's key is the SHA-256 of
the old key and its route's id (8 bytes, big-endian). A dispute of a decision on another route
than its quoted passage's now names that route's copy, found by that key through the key's hash
index. Backwards nothing changes: the copies are passages like any other.
"""

from django.db import migrations

from console.ledger.migrations._split_v1 import to_route_copies_sql

TO_COPIES = to_route_copies_sql("disputes_dispute")


class Migration(migrations.Migration):
    dependencies = [
        ("disputes", "0004_route_on_the_ground_floor"),
        ("ledger", "0024_ranked_passages_on_the_decision"),
    ]

    operations = [migrations.RunSQL(TO_COPIES, migrations.RunSQL.noop)]
