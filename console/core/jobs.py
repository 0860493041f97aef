"""Job conventions, and queueing background jobs so that nothing is lost when the broker is down.

Every task is declared with `job`: an explicit, stable name (the beat schedule and queued
messages use it, so moving a module renames nothing), late acknowledgement (a worker killed
mid-job leaves the message for another), the one database-retry policy below, and soft and hard
time limits.

Jobs take ids and re-read state, so a job that never reached the broker is not lost: the state it
would have changed is still pending in the database, and each app's sweeper (run by beat) queues
it again. `enqueue` therefore queues after the surrounding transaction commits and only logs when
the broker cannot be reached, instead of failing the request that made the change.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from celery import shared_task
from django.db import InterfaceError, OperationalError, transaction

logger = logging.getLogger(__name__)

# A database that is briefly away is worth waiting for; any other failure is recorded by the
# service itself (a failed shadow run, a failed span check) and not retried blindly.
DATABASE_RETRY = {"autoretry_for": (OperationalError, InterfaceError), "retry_backoff": True,
                  "retry_backoff_max": 600, "retry_jitter": True, "max_retries": 8}


def job(name: str, *, soft_time_limit: int = 300, time_limit: int | None = None):
    """Declare a Celery task by the project's conventions. `time_limit` (the hard kill) defaults to
    a minute past the soft limit, which raises SoftTimeLimitExceeded inside the task first."""
    return shared_task(name=name, acks_late=True, soft_time_limit=soft_time_limit,
                       time_limit=time_limit or soft_time_limit + 60, **DATABASE_RETRY)


def enqueue(task: Any, *args: Any, **kwargs: Any) -> None:
    """Queue `task(*args, **kwargs)` once the current transaction commits (at once outside one).

    `task` is a task or its registered name: a service queues the task that wraps another service
    of its own app by name, since the tasks module imports the services module."""
    if isinstance(task, str):
        from console.celery import app

        task = app.tasks[task]

    def publish() -> None:
        if _embedded_broker_absent():
            logger.warning("embedded broker is not running; %s%r left for the sweeper", task.name, args)
            return
        try:
            task.apply_async(args=args, kwargs=kwargs)
        except Exception:  # broker down: the sweeper will find the pending work
            logger.warning("could not queue %s%r; the sweeper will retry", task.name, args, exc_info=True)

    transaction.on_commit(publish)


def _embedded_broker_absent() -> bool:
    """True when the broker is a unix socket that does not exist: publishing could only time out.

    Eager mode (tests) never touches the broker, so it is never absent there.
    """
    from console.celery import app

    if app.conf.task_always_eager:
        return False
    url = app.conf.broker_url or ""
    if not url.startswith("redis+socket://"):
        return False
    return not Path(unquote(url.removeprefix("redis+socket://"))).exists()
