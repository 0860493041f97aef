"""Demo policies, added at the end of `load_demo` (registered in apps.py): HR policy has a signed
version in force, IT support a draft waiting for its owner's signature."""

from __future__ import annotations

from typing import Any

from audit.services import Actor
from console.governance import services
from console.governance.models import PolicyVersion
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
    hr, it = routes.get("hr-policy"), routes.get("it-support")
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
    if it is not None and not PolicyVersion.objects.filter(route=it).exists():
        draft = parse_draft(
            policy_draft_body(
                "it-support",
                0.7,
                lead.username,
                "Start at the cutoff the gate uses today; revisit once the blind grades are in.",
                "I can't answer this reliably. The IT service desk will pick it up within 8 hours.",
            ),
            route=it,
        )
        services.policy_draft(actor=actor, user=reviewer, route=it, draft=draft)
