"""Shadow evaluation jobs: thin wrappers that take ids; the services claim the work."""

from django.conf import settings

from audit.services import Actor
from console.core.jobs import job
from console.shadow import services

# Pipeline failures are not retried by the job: the HTTP adapter retries with backoff itself and
# the run records the failure. A run longer than SHADOW_RUN_TIMEOUT_SECONDS is presumed dead and
# queued again by the sweeper, so the job's own limit is the same.


@job("shadow.shadow_runs_open")
def shadow_runs_open(decision_ids: list[int]) -> int:
    return len(services.shadow_runs_open(actor=Actor.system("shadow_runs_open"), decision_ids=decision_ids))


@job("shadow.shadow_run_execute", soft_time_limit=settings.SHADOW_RUN_TIMEOUT_SECONDS)
def shadow_run_execute(run_id: int) -> str | None:
    run = services.shadow_run_execute(run_id=run_id)
    return run.status if run else None


@job("shadow.shadow_runs_sweep")
def shadow_runs_sweep() -> dict[str, int]:
    return services.shadow_runs_sweep(actor=Actor.system("shadow_runs_sweep"))
