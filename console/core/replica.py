"""Reads that may go to a streaming replica (DATABASE_REPLICA_URL), and the router that sends them.

Nothing goes to the replica unless a read path asks for it: the statistics documents, the monitoring
reads, the refusals export and the similarity reads open `replica_reads()` around what they read.
Inside that scope a read goes to the "replica" database alias only when all of these hold:

- a replica is configured (the alias exists; without DATABASE_REPLICA_URL everything is as before);
- the default connection is not inside `transaction.atomic`: a read in a transaction belongs to
  that transaction's snapshot, and may be reading what the transaction wrote;
- this request (or job) has written nothing yet on the default connection: a read after the
  request's own write must see it, and the replica may not have replayed it. Writes are noticed by
  an execute wrapper on the default connection (every INSERT, UPDATE, DELETE, COPY, MERGE, TRUNCATE,
  and a WITH that does one of them), forgotten when the next request or job starts. Bookkeeping that
  no read of the request depends on (a token's call count, a stored statistics document) says so
  with `bookkeeping_writes()` and does not count;
- the replica is following the primary (`pg_is_in_recovery()`) and its replay lag is at most
  DATABASE_REPLICA_MAX_LAG_SECONDS, as last measured (at most DATABASE_REPLICA_LAG_CHECK_SECONDS ago).
  The answer is taken once when the outermost scope opens, so one scope never mixes the primary's
  newer rows with the replica's older ones because the lag crossed the limit halfway.

Writes always go to the default database (`ReplicaRouter.db_for_write`), and migrations never run on
the replica. Raw SQL of a read path takes its cursor from `read_connection()`, which applies the
same rules, since a router only ever sees the ORM.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from celery.signals import task_prerun
from django.conf import settings
from django.core.signals import request_started
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.signals import connection_created

logger = logging.getLogger(__name__)

REPLICA = "replica"

# The first keyword of a statement that changes rows; a WITH counts when one of its parts does.
_WRITE = re.compile(r"^\s*(insert|update|delete|copy|merge|truncate)\b", re.IGNORECASE)
_WRITE_IN_WITH = re.compile(
    r"^\s*with\b.*\b(insert\s+into|update\s+\S+\s+(as\s+\S+\s+)?set|delete\s+from)\b", re.IGNORECASE | re.DOTALL
)

_local = threading.local()  # scope depth, bookkeeping depth, the scope's decision


def configured() -> bool:
    return REPLICA in connections.settings


# ---------------------------------------------------------------------------------------- the scope


@contextmanager
def replica_reads() -> Iterator[None]:
    """Reads inside may go to the replica (see the module's docstring for when they do). Also a
    decorator. Nested scopes share the outermost one's decision."""
    depth = getattr(_local, "depth", 0)
    if depth == 0:
        _local.usable = configured() and replica_status().used
    _local.depth = depth + 1
    try:
        yield
    finally:
        _local.depth = depth


@contextmanager
def bookkeeping_writes() -> Iterator[None]:
    """Writes inside are bookkeeping that no later read of the request needs to see (a token's call
    count, a cached document): they leave the request's reads where they were."""
    _local.bookkeeping = getattr(_local, "bookkeeping", 0) + 1
    try:
        yield
    finally:
        _local.bookkeeping -= 1


def read_alias() -> str:
    """The database alias a read made now should use: "replica" or the default."""
    if not getattr(_local, "depth", 0) or not getattr(_local, "usable", False) or not configured():
        return DEFAULT_DB_ALIAS
    default = connections[DEFAULT_DB_ALIAS]
    if default.in_atomic_block or getattr(default, "console_wrote", False):
        return DEFAULT_DB_ALIAS
    return REPLICA


def read_connection():
    """The connection a raw-SQL read should take its cursor from (the default one outside a scope)."""
    return connections[read_alias()]


class ReplicaRouter:
    """DATABASE_ROUTERS entry: reads as `read_alias()` says, writes and migrations on the default."""

    def db_for_read(self, model, **hints: Any) -> str:
        return read_alias()

    def db_for_write(self, model, **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints: Any) -> bool:
        return True  # both aliases hold the same database

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        if db == REPLICA:
            return False  # a standby is read-only; it gets the schema by replaying the primary's
        return None


# ------------------------------------------------------------------------------------------- writes


def _note_writes(execute, sql, params, many, context):
    if not getattr(_local, "bookkeeping", 0) and isinstance(sql, str):
        if _WRITE.match(sql) or _WRITE_IN_WITH.match(sql):
            context["connection"].console_wrote = True
    return execute(sql, params, many, context)


def _watch(sender=None, connection=None, **kwargs) -> None:
    """On every new default connection, while a replica is configured: notice the request's writes."""
    if connection is not None and connection.alias == DEFAULT_DB_ALIAS and configured():
        if _note_writes not in connection.execute_wrappers:
            connection.execute_wrappers.append(_note_writes)


def forget_writes(**kwargs) -> None:
    """A new request or job starts: what the previous one wrote no longer holds its reads back."""
    if configured():
        connections[DEFAULT_DB_ALIAS].console_wrote = False


def _job_starts(sender=None, task=None, **kwargs) -> None:
    # An eager job (CELERY_TASK_ALWAYS_EAGER) runs inside the request that queued it, whose writes
    # still hold that request's later reads on the primary.
    if task is not None and getattr(task.request, "is_eager", False):
        return
    forget_writes()


connection_created.connect(_watch, dispatch_uid="console.core.replica.watch")
request_started.connect(forget_writes, dispatch_uid="console.core.replica.request")
task_prerun.connect(_job_starts, dispatch_uid="console.core.replica.task")


# ---------------------------------------------------------------------------------------------- lag


@dataclass(frozen=True)
class ReplicaStatus:
    lag_seconds: float | None  # None: the replica did not answer, or is not following a primary
    in_recovery: bool
    used: bool
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"lag_seconds": self.lag_seconds, "used": self.used, "in_recovery": self.in_recovery}
        if self.error:
            body["error"] = self.error
        return body


# Replay lag: 0 while the replica has replayed everything it received (an idle primary sends
# nothing, and the time since the last replayed commit would grow without anything being behind);
# otherwise the age of the last commit it replayed.
_LAG_SQL = """
SELECT pg_is_in_recovery(),
       CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
            ELSE greatest(0, extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()))
       END
"""

_status_lock = threading.Lock()
_status: tuple[float, ReplicaStatus] | None = None  # (time.monotonic() when measured, the reading)


def replica_status(*, refresh: bool = False) -> ReplicaStatus:
    """The replica's lag and whether reads may use it, measured at most every
    DATABASE_REPLICA_LAG_CHECK_SECONDS per process (now, with `refresh`)."""
    global _status
    if not configured():
        return ReplicaStatus(lag_seconds=None, in_recovery=False, used=False, error="not configured")
    now = time.monotonic()
    with _status_lock:
        if not refresh and _status is not None and now - _status[0] < settings.DATABASE_REPLICA_LAG_CHECK_SECONDS:
            return _status[1]
    status = _measure()
    with _status_lock:
        _status = (time.monotonic(), status)
    return status


def forget_status() -> None:
    """Measure again at the next read (tests, and an operator's shell after a change)."""
    global _status
    with _status_lock:
        _status = None


def _measure() -> ReplicaStatus:
    connection = connections[REPLICA]
    try:
        with connection.cursor() as cursor:
            cursor.execute(_LAG_SQL)
            in_recovery, lag = cursor.fetchone()
    except DatabaseError as exc:
        logger.warning("the read replica did not answer; reads stay on the primary: %s", exc)
        connection.close()
        return ReplicaStatus(lag_seconds=None, in_recovery=False, used=False, error="unreachable")
    if not in_recovery:
        # Promoted, or pointed at a primary: it no longer follows this database, so nothing says how
        # far it is behind (the test suite's mirror of the test database also lands here).
        return ReplicaStatus(lag_seconds=None, in_recovery=False, used=False, error="not in recovery")
    if lag is None:  # behind, with no commit replayed since it started: how far is unknown
        return ReplicaStatus(lag_seconds=None, in_recovery=True, used=False, error="lag unknown")
    lag = round(float(lag), 3)
    return ReplicaStatus(lag_seconds=lag, in_recovery=True, used=lag <= settings.DATABASE_REPLICA_MAX_LAG_SECONDS)
