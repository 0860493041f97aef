"""Waiting for a lock for a bounded time, where waiting forever would hang a request or a job."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import OperationalError, connection, transaction
from psycopg.errors import LockNotAvailable


class LockWaitExpired(Exception):
    """A statement inside `lock_wait_at_most` waited for a lock longer than it was allowed."""


@contextmanager
def lock_wait_at_most(timeout: str) -> Iterator[None]:
    """A savepoint in which every lock wait gives up after `timeout` (PostgreSQL's interval text,
    such as "2s"), raising LockWaitExpired; only the savepoint's work is undone then. The setting
    outlives a savepoint, so the previous value is put back when the block ends normally (a
    rollback to the savepoint restores it by itself)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)", [timeout])
            [previous, _] = cursor.fetchone()
            yield
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])
    except OperationalError as error:
        if isinstance(error.__cause__, LockNotAvailable):
            raise LockWaitExpired from error
        raise
