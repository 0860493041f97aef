"""What disputes tell people, and in which words: a new dispute or appeal to the route's reviewers
and policy owners, an outcome to the opener and to an appellant who left an address, an escalation
to the signed escalation path; each also to the route's webhook.

Outcomes are said as what happened to the refusal (models.OUTCOME_WORDS), never as the bare
status. Links are absolute (CONSOLE_URL). Nothing here names the appellant or quotes their message:
emails and webhooks leave the console, and only the route's reviewers and policy owners may read
those, in the console.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.urls import reverse

from console.accounts import permissions
from console.accounts.models import RoleGrant
from console.disputes.models import Dispute, Kind
from console.notify.emails import EmailPart, absolute_url
from console.notify.services import email_send, notification_send, user_notify


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _when(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def handlers_of(route) -> list:
    """The route's reviewers and policy owners (grants on it or on every route), active ones."""
    grants = RoleGrant.objects.filter(role__in=permissions.DISPUTE_HANDLERS).filter(
        Q(route=route) | Q(route__isnull=True)
    )
    return list(get_user_model().objects.filter(pk__in=grants.values("user_id"), is_active=True).order_by("username"))


def route_webhook(dispute: Dispute) -> str:
    """The route's webhook: the signed escalation path's channel when it is an http(s) URL."""
    if dispute.policy_id is None:
        return ""
    channel = dispute.policy.escalation_channel.strip()
    return channel if channel.lower().startswith(("http://", "https://")) else ""


def _data(dispute: Dispute, event: str, url: str) -> dict[str, Any]:
    return {
        "event": event,
        "dispute": dispute.pk,
        "route": dispute.route.slug,
        "request_id": dispute.request_id,
        "kind": dispute.kind,
        "status": dispute.status,
        "outcome": dispute.outcome_words or None,
        "due_by": dispute.due_by.isoformat(),
        "url": url,
    }


def _webhook(dispute: Dispute, *, event: str, subject: str, summary: str, body: str, url: str) -> None:
    hook = route_webhook(dispute)
    if hook:
        notification_send(
            channel="webhook",
            recipient=hook,
            subject=subject,
            body=body,
            summary=summary,
            data=_data(dispute, event, url),
            route=dispute.route.slug,
        )


def _what(dispute: Dispute) -> str:
    if dispute.kind == Kind.APPEAL:
        return f"an appeal by the person refused ({dispute.request_id})"
    return f"a dispute of the refusal {dispute.request_id}"


def dispute_opened_notify(dispute: Dispute) -> None:
    """To the route's reviewers and policy owners (the opener aside), each by email now or in their
    daily digest, and to the route's webhook: what was opened and when a reply is due."""
    url = absolute_url(reverse("dispute-detail", args=[dispute.pk]))
    what = _what(dispute)
    noun, due = ("appeal" if dispute.kind == Kind.APPEAL else "dispute"), _when(dispute.due_by)
    subject = f"New {noun} #{dispute.pk} on {dispute.route.name}: reply due by {due}"
    summary = f"{_capital(what)} was opened on {dispute.route.name} (#{dispute.pk}); a reply is due by {due}."
    clock = (
        f"{dispute.response_hours} h, the escalation path of policy version {dispute.policy.version}"
        if dispute.policy_id
        else f"{dispute.response_hours} h: the route has no signed escalation path, so the default applies"
    )
    part = EmailPart(
        title=summary,
        paragraphs=[
            "Take it in the console's Disputes inbox and resolve it before it is due; past its due time it is "
            "escalated."
        ],
        facts=[
            ("Kind", dispute.get_kind_display()),
            ("Refusal", f"{dispute.request_id} on {dispute.route.name}"),
            ("Opened", _when(dispute.opened_at)),
            ("Reply due by", f"{_when(dispute.due_by)} ({clock})"),
        ],
        url=url,
        link_label="Open the dispute",
    )
    for person in handlers_of(dispute.route):
        if person.pk != dispute.opened_by_id:
            user_notify(user=person, subject=subject, part=part, route=dispute.route.slug)
    _webhook(dispute, event="dispute.opened", subject=subject, summary=summary, body=summary + f"\n{url}\n", url=url)


def dispute_resolved_notify(dispute: Dispute, *, appeal_url: str) -> None:
    """The outcome, in plain words with the reason, to whoever opened it and to the route's webhook."""
    words, note = dispute.outcome_words, dispute.resolution_note
    url = absolute_url(reverse("dispute-detail", args=[dispute.pk]))
    if dispute.opened_by_id and dispute.opened_by_id != dispute.resolved_by_id:
        title = f"Your dispute of {dispute.request_id}: {words}"
        user_notify(
            user=dispute.opened_by,
            subject=title,
            part=EmailPart(
                title=_capital(title),
                paragraphs=[f"Reason given by {dispute.resolved_by.get_username()}:", note],
                facts=[
                    ("Refusal", f"{dispute.request_id} on {dispute.route.name}"),
                    ("Decided", _when(dispute.resolved_at)),
                ],
                url=url,
                link_label="Open the dispute",
            ),
            route=dispute.route.slug,
        )
    if dispute.appellant_email:
        outcome = _capital(words) + "."
        email_send(
            recipient=dispute.appellant_email,
            subject=f"An answer to your appeal: {words}",
            heading="An answer to your appeal",
            parts=[
                EmailPart(
                    title=outcome,
                    paragraphs=["The reason:", note],
                    url=appeal_url,
                    link_label="See your appeal",
                )
            ],
            route=dispute.route.slug,
            footer="You receive this because you left this address with your appeal.",
        )
    summary = f"Dispute #{dispute.pk} ({_what(dispute)}) on {dispute.route.name}: {words}. Reason: {note}"
    _webhook(
        dispute,
        event="dispute.resolved",
        subject=f"Dispute #{dispute.pk} on {dispute.route.name}: {words}",
        summary=summary,
        body=summary + f"\n{url}\n",
        url=url,
    )


def dispute_escalated_notify(dispute: Dispute, targets: list[tuple[str, str]]) -> None:
    """To the signed escalation path (or the route's policy owners): past its due time, still open."""
    url = absolute_url(reverse("dispute-detail", args=[dispute.pk]))
    subject = f"Dispute #{dispute.pk} of {dispute.request_id} is past its response time"
    summary = (
        f"{_capital(_what(dispute))} on {dispute.route.name} (#{dispute.pk}) was due by "
        f"{_when(dispute.due_by)} ({dispute.response_hours} h) and is still open."
    )
    part = EmailPart(
        title=summary,
        facts=[("Opened", _when(dispute.opened_at)), ("Due by", _when(dispute.due_by))],
        url=url,
        link_label="Open the dispute",
    )
    for channel, recipient in targets:
        if channel == "email":
            email_send(recipient=recipient, subject=subject, heading=subject, parts=[part], route=dispute.route.slug)
        else:
            notification_send(
                channel=channel,
                recipient=recipient,
                subject=subject,
                body=summary + f"\n{url}\n",
                summary=summary,
                data=_data(dispute, "dispute.escalated", url),
                route=dispute.route.slug,
            )
