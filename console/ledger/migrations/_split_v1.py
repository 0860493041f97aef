"""Frozen for migrations: how ledger 0024 split a passage that several routes logged, used by
ledger 0024, verification 0006 and disputes 0005. Never edit this module: a change is a new module
beside it and a new migration (docs/architecture.md, "Migrations are frozen").

Before the content key held the route, two routes that logged one chunk shared its row. Ledger
0024 keeps the row for one route and gives each other route a copy, whose key is the SHA-256 of
the old key and the route's id (8 bytes, big-endian): no ingest computes such a key, so the copy is
never matched again, as the old key was not, and an upper app's migration finds its route's copy
by that key alone, through the key's hash index.

Django's migration loader skips modules whose name starts with an underscore.
"""

from __future__ import annotations


def copy_key_sql(passage: str, route_id: str) -> str:
    """SQL for the key of the copy of the passage row `passage` (an alias) for route `route_id`."""
    return f"sha256({passage}.content_key || int8send({route_id}))"


def to_route_copies_sql(table: str) -> str:
    """SQL that points each row of `table` (its `passage_id` and `decision_id` columns) whose
    decision is on another route than its passage at that route's copy."""
    return f"""
UPDATE {table} AS x SET passage_id = c.id
  FROM ledger_decision d, ledger_passage p, ledger_passage c
 WHERE d.id = x.decision_id AND p.id = x.passage_id AND p.route_id <> d.route_id
   AND c.content_key = {copy_key_sql("p", "d.route_id")}
"""
