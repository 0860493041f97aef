"""Job conventions, and queueing background jobs so that nothing is lost when the broker is down.

Every task is declared with `job`: an explicit, stable name (the beat schedule and queued
messages use it, so moving a module renames nothing), late acknowledgement (a worker killed
mid-job leaves the message for another), the one database-retry policy below, and soft and hard
time limits.

Jobs take ids and re-read state, so a job that never reached the broker is not lost: the state it
would have changed is still pending in the database, and each app's sweeper (run by beat) queues
it again. `enqueue` therefore queues after the surrounding transaction commits and only logs when
the broker cannot be reached, instead of failing the request that made the change.

A broker can also be reachable but silent (paused, overloaded, a half-open connection): the
socket timeout in CELERY_BROKER_TRANSPORT_OPTIONS bounds one publish, and after a failed publish
this process leaves jobs to the sweepers for BROKER_BACKOFF_SECONDS instead of waiting again, so
an ingest request stays within a few seconds however many jobs it queues.

The project's Celery app (the one the project package makes when it is imported) is
reached as `celery.current_app`, as `shared_task` reaches it: core does not import the project's
wiring.
"""

from __future__ import annotations

import logging
import reprlib
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from celery import current_app, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

logger = logging.getLogger(__name__)

# A database that is briefly away is worth waiting for; any other failure is recorded by the
# service itself (a failed shadow run, a failed span check) and not retried blindly.
DATABASE_RETRY = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": True,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "max_retries": 8,
}


def job(name: str, *, soft_time_limit: int = 300, time_limit: int | None = None):
    """Declare a Celery task by the project's conventions. `time_limit` (the hard kill) defaults to
    a minute past the soft limit, which raises SoftTimeLimitExceeded inside the task first."""
    return shared_task(
        name=name,
        acks_late=True,
        soft_time_limit=soft_time_limit,
        time_limit=time_limit or soft_time_limit + 60,
        **DATABASE_RETRY,
    )


_tasks_imported = threading.Lock()


def _tasks_import() -> None:
    """Import the apps' tasks modules, one thread at a time. Two threads of a gunicorn worker that
    queued their first jobs together each ran Celery's import of every tasks module; the second
    found modules the first was still importing and its task missing (NotRegistered), which failed
    that request's ingest batch."""
    with _tasks_imported:
        current_app.loader.import_default_modules()


def enqueue(task: Any, *args: Any, **kwargs: Any) -> None:
    """Queue `task(*args, **kwargs)` once the current transaction commits (at once outside one).

    `task` is a task or its registered name: a service queues the task that wraps another service
    of its own app by name, since the tasks module imports the services module."""
    if isinstance(task, str):
        if task not in current_app.tasks:  # a web process imports the apps' tasks modules on first need
            _tasks_import()
        task = current_app.tasks[task]

    def publish() -> None:
        if _embedded_broker_absent():
            logger.warning("embedded broker is not running; %s%r left for the sweeper", task.name, args)
            return
        if _broker_backing_off():
            logger.info("broker failed recently; %s%r left for the sweeper", task.name, args)
            return
        try:
            task.apply_async(args=args, kwargs=kwargs, argsrepr=_short_repr(args), kwargsrepr=_short_repr(kwargs))
        except Exception:  # broker down or silent: the sweeper will find the pending work
            _broker_failed()
            logger.warning("could not queue %s%r; the sweeper will retry", task.name, args, exc_info=True)

    transaction.on_commit(publish)


# What a job's arguments look like in the worker's log and in monitoring tools: a list's first ids
# and how many follow. Celery's own summary of an after-ingest job's 500 ids walked a third of them
# element by element on the request's thread, seven jobs a batch (bench/README.md).
class _Arguments(reprlib.Repr):
    def repr_list(self, x, level):
        shown = super().repr_list(x, level)
        return shown if len(x) <= self.maxlist else f"{shown[:-1]} {len(x):,} in all]"


_ARGUMENTS_SHOWN = _Arguments()  # Python 3.11's Repr takes no arguments
_ARGUMENTS_SHOWN.maxlist = _ARGUMENTS_SHOWN.maxtuple = _ARGUMENTS_SHOWN.maxdict = 8
_ARGUMENTS_SHOWN.maxstring = _ARGUMENTS_SHOWN.maxother = 80
_ARGUMENTS_SHOWN.maxlevel = 3


def _short_repr(value: Any) -> str:
    return _ARGUMENTS_SHOWN.repr(value)


# Until when (time.monotonic()) this process skips publishing after a failure; 0 when the last try worked.
_broker_down_until = 0.0


def _broker_failed() -> None:
    global _broker_down_until
    _broker_down_until = time.monotonic() + settings.BROKER_BACKOFF_SECONDS


def _broker_backing_off() -> bool:
    """True for a while after a failed publish. Eager mode (tests) runs tasks in process and never
    waits on a broker, so it never backs off."""
    return not current_app.conf.task_always_eager and time.monotonic() < _broker_down_until


def broker_recovered() -> None:
    """Publish again at once (a test that starts a broker, or an operator who fixed it)."""
    global _broker_down_until
    _broker_down_until = 0.0


def _embedded_broker_absent() -> bool:
    """True when the broker is a unix socket that does not exist: publishing could only time out.

    Eager mode (tests) never touches the broker, so it is never absent there.
    """
    if current_app.conf.task_always_eager:
        return False
    url = current_app.conf.broker_url or ""
    if not url.startswith("redis+socket://"):
        return False
    return not Path(unquote(url.removeprefix("redis+socket://"))).exists()


def commit_without_waiting() -> None:
    """Inside the transaction of work that is redone when it is missing (a job a sweeper queues
    again, a statistics document the next request computes again): let its
    COMMIT return before the write-ahead log reaches disk (PostgreSQL's `synchronous_commit = off`,
    for this transaction only). A crash of the database server can then lose the last fraction of
    a second of such commits, whole: never part of one (its audit event goes with its rows), and
    never one that a later, waited-for commit builds on, whose flush carries every earlier commit.
    The sweepers queue the lost decisions again. The span checks and pool entry do this (a commit
    that waits for the disk was a tenth of their time right after a burst). The store of a
    statistics document, a single statement, does the same within that statement
    (console/analysis/cache.py)."""
    from django.db import connection

    if len(connection.atomic_blocks) != 1:
        return  # inside a request's (or a test's) transaction: its own writes keep their wait
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit = off")
