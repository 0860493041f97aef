"""The Celery queues, one per kind of work, and which task names go to which.

A slow shadow pipeline or a long statistics recompute must never hold up pool entry or span
checks: each kind of work has its own queue, so one can be given its own workers (docker-compose.yml
runs one worker service per group of queues, each scaled with `--scale`) while `make run`'s single
worker consumes them all. Routing is by the stable task-name prefix (`<app>.<task>`), so a new task
of an existing app is routed without touching this file; tests/jobs/test_queues.py checks that
every registered task lands on one of these queues.

Kept free of Django so that console/run.py can name the queues without loading settings.
"""

from __future__ import annotations

# Task-name prefix -> queue. Several apps may share a queue (audit checkpoints and the ledger's
# passage dictionaries are housekeeping, done on the monitoring queue).
QUEUE_OF_PREFIX: dict[str, str] = {
    "verification": "verification",
    "shadow": "shadow",
    "grading": "pool",
    "analysis": "statistics",
    "notify": "notifications",
    "audit": "monitoring",
    "ledger": "monitoring",
    "monitoring": "monitoring",
    "governance": "monitoring",
    "disputes": "disputes",
    "trials": "trials",
    "similarity": "similarity",
}

# Task name -> queue, for a task that must not share its app's queue. An embedder refit re-embeds
# every question of its route (70-85 s at 100,000-200,000 under a stream): on the similarity queue it
# held the background worker's one process, and every queue behind it waited, the fresh question
# vectors of the batches arriving meanwhile included (bench/README.md, issue 36).
QUEUE_OF_TASK: dict[str, str] = {"similarity.embedder_fit": "refits"}

# Every queue, in the order a worker that consumes them all lists them (the after-ingest work first).
QUEUES: tuple[str, ...] = tuple(dict.fromkeys([*QUEUE_OF_PREFIX.values(), *QUEUE_OF_TASK.values()]))

# What stands between ingest and a gradable decision: span checks and pool entry. `make run` gives
# them a worker of their own, so an embedder refit or a statistics recompute never holds the
# processes they need; every other queue shares a second, smaller worker (with beat).
GRADABLE_PATH_QUEUES: tuple[str, ...] = ("verification", "pool")
# Candidate gate trials call URLs a reviewer chose, which may answer slowly or never: they get a
# worker of their own too, so a trial can never delay notifications, escalations or checkpoints.
TRIAL_QUEUES: tuple[str, ...] = ("trials",)
# Embedder refits hold a process for minutes too: `make run` gives them to the trials' worker (an
# always-on process already, at the lower priority), so fresh vectors and the rest keep going.
REFIT_QUEUES: tuple[str, ...] = ("refits",)
BACKGROUND_QUEUES: tuple[str, ...] = tuple(
    queue
    for queue in QUEUES
    if queue not in GRADABLE_PATH_QUEUES and queue not in TRIAL_QUEUES and queue not in REFIT_QUEUES
)


def task_routes() -> dict[str, dict[str, str]]:
    """CELERY_TASK_ROUTES: exact task names, then glob patterns on task names, e.g. {"shadow.*":
    {"queue": "shadow"}} (Celery looks a name up exactly before it tries the patterns)."""
    return {
        **{name: {"queue": queue} for name, queue in QUEUE_OF_TASK.items()},
        **{f"{prefix}.*": {"queue": queue} for prefix, queue in QUEUE_OF_PREFIX.items()},
    }


def queue_for(task_name: str) -> str | None:
    """The queue a task name is routed to, or None if no prefix matches (it would fall to 'celery')."""
    if task_name in QUEUE_OF_TASK:
        return QUEUE_OF_TASK[task_name]
    prefix = task_name.split(".", 1)[0]
    return QUEUE_OF_PREFIX.get(prefix) if "." in task_name else None
