"""Without DATABASE_REPLICA_URL every read is where it was (console/core/replica.py); the standby's
tests are tests/core/test_replica_standby.py."""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections

from console.accounts.models import Route
from console.core import replica


def test_without_a_replica_every_read_is_on_the_primary_and_health_is_unchanged(client, db):
    assert not replica.configured()
    with replica.replica_reads():
        assert replica.read_alias() == DEFAULT_DB_ALIAS
        assert replica.read_connection() is connections[DEFAULT_DB_ALIAS]
        assert replica.ReplicaRouter().db_for_read(Route) == DEFAULT_DB_ALIAS
    assert replica.replica_status().used is False
    assert "replica" not in client.get("/healthz").json()
    assert replica._note_writes not in connections[DEFAULT_DB_ALIAS].execute_wrappers


def test_only_statements_that_change_rows_count_as_writes():
    writes = [
        "INSERT INTO t VALUES (1)",
        "  update t set a = 1",
        "DELETE FROM t",
        "COPY t FROM STDIN",
        "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x",
        "WITH found AS (SELECT id FROM t) , spent AS (UPDATE t AS u SET a = 1 FROM found) SELECT 1",
    ]
    reads = ["SELECT 1", "WITH x AS (SELECT 1) SELECT * FROM x", "SAVEPOINT s1", "SELECT pg_advisory_xact_lock(1)"]
    counted = [sql for sql in writes + reads if replica._WRITE.match(sql) or replica._WRITE_IN_WITH.match(sql)]
    assert counted == writes
