"""Background jobs of disputes: the escalation clock (beat) and attaching appeals after ingest."""

from __future__ import annotations

from audit.services import Actor
from console.core.jobs import job
from console.disputes import services


@job("disputes.disputes_escalate", soft_time_limit=120)
def disputes_escalate() -> int:
    return len(services.disputes_escalate(actor=Actor.system("disputes_escalate")))


@job("disputes.appeals_attach", soft_time_limit=60)
def appeals_attach(decision_ids: list[int]) -> int:
    return services.appeals_attach(decision_ids)
