"""The demo's disputes: a support agent disputes an HR refusal with a quote from its top passage,
and the person refused on another HR question appeals through its link."""

from __future__ import annotations

from typing import Any

from audit.services import Actor
from console.disputes import services
from console.disputes.models import Dispute
from console.disputes.validation import DisputeInput
from console.ledger.models import Decision, Outcome


def demo_disputes(*, actor: Actor, routes: dict, users: dict, **_: Any) -> None:
    agent, hr = users.get("agent"), routes.get("hr-policy")
    if agent is None or hr is None or Dispute.objects.filter(route=hr).exists():
        return
    refused = list(Decision.objects.filter(route=hr, outcome=Outcome.REFUSED).order_by("-gate_score")[:2])
    if len(refused) < 2:
        return
    first = refused[0]
    link = next(iter(first.ranked_passages), None)  # the top-ranked passage
    if link is not None:
        quote = " ".join(link.passage.text.split()[:6])
        services.dispute_open(
            actor=Actor.user(agent),
            user=agent,
            decision=first,
            data=DisputeInput(
                kind="answerable_from_passages",
                reason="The top passage answers this; the employee waited for nothing.",
                passage_id=link.passage_id,
                quote=quote,
            ),
        )
    services.appeal_open(
        route=hr, request_id=refused[1].request_id, message="I still need to know how many days of leave I have left."
    )
