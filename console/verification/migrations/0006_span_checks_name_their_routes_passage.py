"""A span check names its decision's route's passage.

Ledger 0024 gave every passage its route and split a passage that several routes logged (stored
before its content key held the route) into a row per route: each copy's key is the SHA-256 of
the old key and its route's id (8 bytes, big-endian). A span check of a decision on another route
than its passage's now names that route's copy, found by that key through the key's hash index.
Backwards nothing changes: the copies are passages like any other.
"""

from django.db import migrations

TO_COPIES = """
UPDATE verification_spancheck AS x SET passage_id = c.id
  FROM ledger_decision d, ledger_passage p, ledger_passage c
 WHERE d.id = x.decision_id AND p.id = x.passage_id AND p.route_id <> d.route_id
   AND c.content_key = sha256(p.content_key || int8send(d.route_id))
"""


class Migration(migrations.Migration):
    dependencies = [
        ("verification", "0005_support_month_reference_by_statement"),
        ("ledger", "0024_ranked_passages_on_the_decision"),
    ]

    operations = [migrations.RunSQL(TO_COPIES, migrations.RunSQL.noop)]
