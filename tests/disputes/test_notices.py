"""What people outside the review team read (emails, webhook summaries) says what happened to the
refusal, with the reason and an absolute link; a new dispute or appeal reaches the route's
reviewers and policy owners with its due time. The outbox after each dispute action."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from console.disputes.models import Dispute
from console.notify.models import Notification
from tests import factories
from tests.disputes.conftest import open_dispute, sign_policy

HOOK = "https://hooks.example.org/it-desk"
BASE = "https://console.example.org"


@pytest.fixture(autouse=True)
def _absolute_links(settings, db):
    settings.CONSOLE_URL = BASE
    cache.clear()


@pytest.fixture
def with_webhook(route, decisions, owner_client, reviewer):
    reviewer.user.email = "rev@example.org"
    reviewer.user.save()
    policy = sign_policy(route, owner_client.user, channel=HOOK, hours=24)
    Notification.objects.all().delete()  # the draft's "waits for your signature": not a dispute's message
    return policy


def outbox() -> list[Notification]:
    return list(Notification.objects.order_by("pk"))


def appeal_url(integrator, request_id: str = "req-refused") -> str:
    return integrator.get(f"/api/v1/routes/it-support/decisions/{request_id}/appeal-link").json()["url"]


def test_opening_a_dispute_tells_the_routes_reviewers_and_owners_when_it_is_due(
    decisions, reader, reviewer, with_webhook
):
    dispute = open_dispute(reader, decisions[0]).json()
    due = Dispute.objects.get(pk=dispute["id"]).due_by.strftime("%Y-%m-%d %H:%M UTC")
    sent = outbox()
    emails = {n.recipient: n for n in sent if n.channel == "email"}
    assert set(emails) == {"owner@example.org", "rev@example.org"}  # not the opener, agent@example.org
    for email in emails.values():
        assert f"New dispute #{dispute['id']} on IT support: reply due by {due}" == email.subject
        assert f"Reply due by: {due} (24 h" in email.body
        assert f"{BASE}/disputes/{dispute['id']}/" in email.body
        assert f'href="{BASE}/disputes/{dispute["id"]}/"' in email.html_body
    (hook,) = [n for n in sent if n.channel == "webhook"]
    assert hook.recipient == HOOK
    assert hook.summary == (
        f"A dispute of the refusal req-refused was opened on IT support (#{dispute['id']}); a reply is due by {due}."
    )
    assert hook.data["event"] == "dispute.opened" and hook.data["url"] == f"{BASE}/disputes/{dispute['id']}/"


def test_an_appeal_tells_them_too_without_the_appellants_words(decisions, integrator, with_webhook):
    url = appeal_url(integrator)
    Client().post(url, {"message": "MY-OWN-WORDS about my leave", "email": "asker@example.org"})
    sent = outbox()
    assert {n.recipient for n in sent} == {"owner@example.org", "rev@example.org", HOOK}
    appeal = Dispute.objects.get(kind="appeal")
    for notification in sent:
        assert f"#{appeal.pk}" in notification.subject and "due by" in notification.subject
        for text in (notification.body, notification.html_body, notification.summary, str(notification.data)):
            assert "MY-OWN-WORDS" not in text and "asker@example.org" not in text


@pytest.mark.parametrize(
    ("resolution", "words"),
    [
        ("upheld", "the refusal stands"),
        ("overturned", "the refusal was overturned: the answer should have been given"),
    ],
)
def test_the_appellant_reads_what_happened_with_the_reason_and_a_link_back(
    decisions, integrator, reviewer, with_webhook, resolution, words
):
    url = appeal_url(integrator)
    Client().post(url, {"message": "I needed my leave balance.", "email": "asker@example.org"})
    appeal = Dispute.objects.get(kind="appeal")
    before = Notification.objects.count()
    reviewer.post(
        f"/api/v1/disputes/{appeal.pk}/resolve",
        {"resolution": resolution, "note": "HR answers this by phone."},
        format="json",
    )
    sent = outbox()[before:]
    (email,) = [n for n in sent if n.recipient == "asker@example.org"]
    assert email.subject == f"An answer to your appeal: {words}"
    assert f"{words[0].upper()}{words[1:]}." in email.body and "HR answers this by phone." in email.body
    assert f"{BASE}{url}" in email.body and f'href="{BASE}{url}"' in email.html_body
    assert "upheld" not in email.body.lower() and "reviewer" not in email.body  # no bare status, no names
    (hook,) = [n for n in sent if n.channel == "webhook"]
    assert hook.summary.endswith(f": {words}. Reason: HR answers this by phone.")
    assert hook.data["outcome"] == words and hook.data["status"] == resolution


def test_the_opener_reads_the_outcome_in_plain_words_with_an_absolute_link(decisions, reader, reviewer):
    dispute = open_dispute(reader, decisions[0]).json()
    reviewer.post(
        f"/api/v1/disputes/{dispute['id']}/resolve",
        {"resolution": "upheld", "note": "The passage is outdated."},
        format="json",
    )
    email = Notification.objects.get(recipient="agent@example.org")
    assert email.subject == "Your dispute of req-refused: the refusal stands"
    assert "The passage is outdated." in email.body and "upheld" not in email.body.lower()
    assert f"{BASE}/disputes/{dispute['id']}/" in email.body and email.html_body


def test_a_withdrawal_tells_the_webhook_and_not_the_person_who_withdrew(decisions, reader, with_webhook):
    dispute = open_dispute(reader, decisions[0]).json()
    before = Notification.objects.count()
    reader.post(
        f"/api/v1/disputes/{dispute['id']}/resolve", {"resolution": "withdrawn", "note": "Found it."}, format="json"
    )
    (hook,) = outbox()[before:]
    assert hook.channel == "webhook" and hook.summary.endswith(": withdrawn. Reason: Found it.")


def test_a_person_on_the_daily_digest_gets_new_disputes_in_it(decisions, reader, owner_client, reviewer):
    from audit.services import Actor
    from console.notify import services as notify_services
    from console.notify.models import DigestItem

    notify_services.preference_set(actor=Actor.user(owner_client.user), user=owner_client.user, digest="daily")
    first = open_dispute(reader, decisions[0]).json()
    second = open_dispute(reviewer, decisions[0], kind="other", evidence=None).json()
    assert not Notification.objects.filter(recipient="owner@example.org").exists()
    assert DigestItem.objects.filter(user=owner_client.user).count() == 2
    from console.notify.tasks import digests_send

    assert digests_send() == 1
    digest = Notification.objects.get(recipient="owner@example.org")
    assert f"/disputes/{first['id']}/" in digest.body and f"/disputes/{second['id']}/" in digest.body


def test_an_escalation_links_absolutely(decisions, reader, owner_client):
    from datetime import timedelta

    from django.utils import timezone

    from audit.services import Actor
    from console.disputes import services

    sign_policy(factories.make_route("it-support"), owner_client.user, channel="mailto:desk@example.org")
    dispute = open_dispute(reader, decisions[0]).json()
    services.disputes_escalate(actor=Actor.system("tests"), as_of=timezone.now() + timedelta(hours=25))
    email = Notification.objects.get(recipient="desk@example.org")
    assert f"{BASE}/disputes/{dispute['id']}/" in email.body and email.html_body
