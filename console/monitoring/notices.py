"""Where monitoring messages go: the owner's email, or the policy's escalation channel."""

from __future__ import annotations

from console.governance.escalation import channel_target
from console.governance.models import PolicyVersion
from console.notify.services import notification_send


def escalation_target(policy: PolicyVersion) -> tuple[str, str]:
    """(channel, recipient) for the policy's escalation channel (console/governance/escalation.py);
    a channel of no documented form (signed before channels were checked) reaches the owner by
    email, so an alarm is never silently dropped."""
    return channel_target(policy.escalation_channel) or ("email", policy.owner.email)


def notify_owner(*, policy: PolicyVersion, subject: str, body: str) -> None:
    notification_send(
        channel="email", recipient=policy.owner.email, subject=subject, body=body, route=policy.route.slug
    )


def notify_escalation(*, policy: PolicyVersion, subject: str, body: str) -> None:
    channel, recipient = escalation_target(policy)
    notification_send(channel=channel, recipient=recipient, subject=subject, body=body, route=policy.route.slug)
