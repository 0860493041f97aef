"""Shadow evaluation jobs: thin wrappers that take ids; the services claim the work."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from audit.services import Actor
from console.shadow import services

# A database that is briefly away is worth waiting for; pipeline failures are not retried here
# (the HTTP adapter retries with backoff itself and the run records the failure).
_RETRYING = {"acks_late": True, "autoretry_for": (OperationalError, InterfaceError), "retry_backoff": True,
             "retry_backoff_max": 600, "retry_jitter": True, "max_retries": 8}


@shared_task(**_RETRYING)
def shadow_runs_open(decision_ids: list[int]) -> int:
    return len(services.shadow_runs_open(actor=Actor.system("shadow_runs_open"), decision_ids=decision_ids))


@shared_task(**_RETRYING)
def shadow_run_execute(run_id: int) -> str | None:
    run = services.shadow_run_execute(run_id=run_id)
    return run.status if run else None


@shared_task(**_RETRYING)
def shadow_runs_sweep() -> dict[str, int]:
    return services.shadow_runs_sweep(actor=Actor.system("shadow_runs_sweep"))
