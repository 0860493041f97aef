"""Trial jobs: thin wrappers that take ids; the services claim the calls."""

from console.core.jobs import job
from console.trials import services

# A job stops claiming calls after services.JOB_BUDGET_SECONDS and queues its successor; the limit
# leaves room for the last call (at most the candidate's timeout, 120 s).


@job("trials.trial_advance", soft_time_limit=services.JOB_BUDGET_SECONDS + 150)
def trial_advance(trial_id: int) -> int:
    return services.trial_advance(trial_id=trial_id)


@job("trials.trials_sweep")
def trials_sweep() -> dict[str, int]:
    return services.trials_sweep()
