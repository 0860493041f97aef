import gc
import os

from celery import Celery
from celery.signals import beat_init, worker_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

# Its signals forget a job's writes when the next job starts, and watch new connections for writes
# (console/core/replica.py); connected here so every process has them before its first query.
import console.core.replica  # noqa: E402, F401

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _lower_priority(**kwargs) -> None:
    """CELERY_WORKER_NICE (set by console/run.py for the worker of trials and embedder refits) lowers
    the worker's CPU priority before its pool forks, so its children (and beat, on a worker that runs
    it) inherit it: on a small machine a refit then takes the CPU the web server, the span checks and
    the fresh question vectors leave, instead of a fair share of it."""
    niceness = int(os.environ.get("CELERY_WORKER_NICE") or 0)
    if niceness > 0:
        os.nice(niceness)


@beat_init.connect
def _one_scheduler(sender=None, **kwargs) -> None:
    """Beat ends with the worker that embeds it and waits for any other scheduler of the same
    schedule file to end before it sends anything (console/beat_guard.py)."""
    from console import beat_guard

    beat_guard.die_with_parent()
    beat_guard.hold_scheduler_lock(sender.schedule_filename if sender is not None else "celerybeat-schedule")


@worker_ready.connect
def _freeze_the_loaded_code(**kwargs) -> None:
    """Everything the main process loaded is moved out of the garbage collector's reach before the
    pool forks its children (make run's pools start empty and fork on demand: console/run.py). A
    child's collections then never write to those objects, so their pages stay shared with the main
    process instead of being copied into every child, and a child forked for one minute's sweep
    does not walk them."""
    gc.freeze()
