"""Monitoring jobs: thin wrappers around the services."""

from audit.services import Actor
from console.core.jobs import job
from console.monitoring.services import alarms, rechecks


@job("monitoring.rechecks_open")
def rechecks_open(decision_ids: list[int]) -> int:
    return len(rechecks.rechecks_open(actor=Actor.system("rechecks_open"), decision_ids=decision_ids))


@job("monitoring.monitor_run", soft_time_limit=900)
def monitor_run(route_slug: str | None = None) -> list[dict]:
    return alarms.monitor_run(actor=Actor.system("monitor_run"), route_slug=route_slug)
