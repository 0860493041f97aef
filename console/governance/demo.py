"""Demo policies, added by `load_demo`: HR policy's v1 is signed early (disputes and trials of the demo
run under it), and once everything else is loaded its v2 waits for the lead's signature, the draft
the README's policy tour signs. IT support's policy is signed by the monitoring demo
(console/review/monitoring_demo.py), which goes on to show a release recheck on it.

Every draft the demo leaves is newer than the version in force on its route, so the tour signs it
on the first attempt: an older one would be a roll-back, which signing refuses unless asked."""

from __future__ import annotations

from typing import Any

from audit.services import Actor
from console.governance import services
from console.governance.models import PolicyStatus, PolicyVersion
from console.governance.validation import parse_draft

_ESCALATION = {
    "hr-policy": {"contact": "HR service desk lead", "channel": "mailto:hr-desk@demo.invalid", "response_hours": 24},
    "it-support": {
        "contact": "IT service desk, second line",
        "channel": "https://tickets.demo.invalid/queue/it",
        "response_hours": 8,
    },
}


def policy_draft_body(slug: str, cutoff: float, owner: str, rationale: str, message: str) -> dict[str, Any]:
    """A demo route's policy draft, as the proposal form would post it (the monitoring demo signs
    its releases' policies from the same draft)."""
    return {
        "cutoff": cutoff,
        "band_lower": 0.4,
        "owner": owner,
        "rationale": rationale,
        "escalation": _ESCALATION[slug],
        "refusal_message": message,
        "costs": {"c_w": 20, "c_a": 0.5, "q": 0.6, "c_v": 0.2},
        "exchange_answers": [{"rate": 10, "accept": True}, {"rate": 100, "accept": False}],
        "exchange_rate": 31.6,
    }


def demo_policies(*, actor: Actor, routes: dict, users: dict, **_: Any) -> None:
    lead, reviewer = users.get("lead"), users.get("reviewer")
    if lead is None or reviewer is None:
        return
    hr = routes.get("hr-policy")
    if hr is not None and not PolicyVersion.objects.filter(route=hr).exists():
        draft = parse_draft(
            policy_draft_body(
                "hr-policy",
                0.85,
                lead.username,
                "The imported graded set shows the false-abstention rate at 0.85 is acceptable for HR questions, "
                "and the middle band shows evidence for borderline answers.",
                "I can't answer this reliably from the HR handbook. **A person from HR will reply within a day.**",
            ),
            route=hr,
        )
        policy = services.policy_draft(actor=actor, user=reviewer, route=hr, draft=draft)
        services.policy_sign(actor=actor, user=lead, policy=policy, evidence_sha256=policy.evidence_sha256)


def demo_policy_waiting(*, actor: Actor, routes: dict, users: dict, **_: Any) -> PolicyVersion | None:
    """HR policy's v2, drafted by the reviewer after v1 was signed, waiting for the lead. Drafted last,
    so its evidence reads the demo's data as loaded."""
    lead, reviewer, hr = users.get("lead"), users.get("reviewer"), routes.get("hr-policy")
    if lead is None or reviewer is None or hr is None:
        return None
    versions = list(PolicyVersion.objects.filter(route=hr).values_list("status", flat=True))
    if versions != [PolicyStatus.ACTIVE]:  # only on top of the demo's own v1, once
        return None
    draft = parse_draft(
        policy_draft_body(
            "hr-policy",
            0.8,
            lead.username,
            "Proposed after v1: a lower cutoff withholds fewer correct answers. Read the table at 0.8 and its "
            "false-abstention interval before signing.",
            "I can't answer this reliably from the HR handbook. **A person from HR will reply within a day.**",
        ),
        route=hr,
    )
    return services.policy_draft(actor=actor, user=reviewer, route=hr, draft=draft)
