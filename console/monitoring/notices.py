"""Where monitoring messages go: the owner's email, or the policy's escalation channel."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from console.governance.models import PolicyVersion
from console.notify.services import notification_send


def escalation_target(policy: PolicyVersion) -> tuple[str, str]:
    """(channel, recipient) for the policy's escalation channel: `mailto:` and bare addresses are
    email, http(s) URLs are webhooks; anything else (a pager name, a ticket queue) reaches the owner
    by email, so an alarm is never silently dropped."""
    channel = policy.escalation_channel.strip()
    scheme = urlsplit(channel).scheme.lower()
    if scheme == "mailto":
        return "email", unquote(channel[len("mailto:") :].split("?", 1)[0])
    if scheme in ("http", "https"):
        return "webhook", channel
    if "@" in channel and " " not in channel:
        return "email", channel
    return "email", policy.owner.email


def notify_owner(*, policy: PolicyVersion, subject: str, body: str) -> None:
    notification_send(
        channel="email", recipient=policy.owner.email, subject=subject, body=body, route=policy.route.slug
    )


def notify_escalation(*, policy: PolicyVersion, subject: str, body: str) -> None:
    channel, recipient = escalation_target(policy)
    notification_send(channel=channel, recipient=recipient, subject=subject, body=body, route=policy.route.slug)
