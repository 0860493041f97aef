"""Emails go out as text and HTML from one pair of templates; a person may choose one daily digest
instead of an email per message; webhooks carry a one-line summary; links use CONSOLE_URL."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from audit.models import AuditEvent
from console.notify import services, tasks
from console.notify.emails import EmailPart
from console.notify.models import DigestItem, Notification
from tests import factories


@pytest.fixture
def person(db):
    user = factories.make_user("pat")
    user.email = "pat@example.org"
    user.save()
    return user


def _part(n: int) -> EmailPart:
    return EmailPart(
        title=f"Item {n} <b>bold?</b>",
        paragraphs=[f"Paragraph of item {n}."],
        facts=[("Due by", "2026-12-04 10:00 UTC")],
        url=f"https://console.example.org/disputes/{n}/",
        link_label="Open the dispute",
    )


def test_an_email_is_delivered_with_a_text_and_an_html_part(person, mailoutbox):
    notification = services.user_notify(user=person, subject="Something happened", part=_part(1))
    assert isinstance(notification, Notification) and notification.recipient == "pat@example.org"
    services.notification_deliver(notification_id=notification.pk)
    (message,) = mailoutbox
    assert message.subject == "Something happened" and message.to == ["pat@example.org"]
    assert "Paragraph of item 1." in message.body and "https://console.example.org/disputes/1/" in message.body
    assert "<b>" in message.body  # the text part is not HTML-escaped
    ((html, mimetype),) = message.alternatives
    assert mimetype == "text/html"
    assert '<a href="https://console.example.org/disputes/1/">Open the dispute</a>' in html
    assert "&lt;b&gt;bold?&lt;/b&gt;" in html  # the HTML part escapes what it was given


def test_a_person_who_chose_the_daily_digest_gets_one_email_with_everything(person, mailoutbox):
    page = Client()
    page.force_login(person)
    assert "Each message as it happens" in page.get("/notifications/").content.decode()
    assert page.post("/notifications/", {"digest": "daily"}).status_code == 302
    event = AuditEvent.objects.get(action="notify_preference_changed")
    assert event.payload == {"digest": {"old": "immediately", "new": "daily"}}
    for n in (1, 2, 3):
        held = services.user_notify(user=person, subject=f"Message {n}", part=_part(n))
        assert isinstance(held, DigestItem)
    assert not Notification.objects.exists()
    assert "3 messages wait for your next daily digest" in page.get("/notifications/").content.decode()

    assert tasks.digests_send() == 1
    (digest,) = Notification.objects.all()
    assert digest.recipient == "pat@example.org" and digest.subject == "Your daily digest: 3 messages"
    for n in (1, 2, 3):
        assert f"Paragraph of item {n}." in digest.body and f"/disputes/{n}/" in digest.html_body
    assert not DigestItem.objects.filter(notification__isnull=True).exists()
    assert tasks.digests_send() == 0  # nothing is sent twice
    services.notification_deliver(notification_id=digest.pk)
    assert len(mailoutbox) == 1 and mailoutbox[0].alternatives

    # Back to one email per message: the next one goes out at once.
    page.post("/notifications/", {"digest": "immediately"})
    assert isinstance(services.user_notify(user=person, subject="Now", part=_part(4)), Notification)


def test_an_unknown_digest_choice_is_refused(person):
    page = Client()
    page.force_login(person)
    assert page.post("/notifications/", {"digest": "hourly"}).status_code == 400


def test_the_daily_digest_is_a_beat_job(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["notify-digests"]
    assert entry["task"] == "notify.digests_send"
    assert entry["schedule"].hour == {settings.NOTIFY_DIGEST_HOUR_UTC}


def test_a_webhook_carries_a_summary_and_its_facts(db):
    notification = services.notification_send(
        channel="webhook",
        recipient="https://hooks.example.org/desk",
        subject="Dispute #3",
        body="long text",
        summary="Dispute #3 on IT support: the refusal stands.",
        data={"event": "dispute.resolved", "dispute": 3},
        html_body="<p>never sent to a webhook</p>",
    )
    body = json.loads(services.webhook_body(notification))
    assert body["summary"] == "Dispute #3 on IT support: the refusal stands."
    assert body["data"] == {"event": "dispute.resolved", "dispute": 3}
    assert notification.html_body == ""


def test_console_url_is_read_strictly_from_the_environment(monkeypatch):
    from console.env import ConfigError, env_console_url

    monkeypatch.delenv("CONSOLE_URL", raising=False)
    monkeypatch.setenv("HOST", "0.0.0.0")
    monkeypatch.setenv("PORT", "8123")
    assert env_console_url() == "http://localhost:8123"
    monkeypatch.setenv("CONSOLE_URL", "https://review.example.org/console/")
    assert env_console_url() == "https://review.example.org/console"
    for bad in ("review.example.org", "ftp://review.example.org", "https://x.org/?a=1"):
        monkeypatch.setenv("CONSOLE_URL", bad)
        with pytest.raises(ConfigError, match="CONSOLE_URL"):
            env_console_url()


def test_make_run_prints_the_address_links_use(monkeypatch, tmp_path):
    from console import run

    monkeypatch.setenv("CONSOLE_URL", "https://review.example.org")
    assert "https://review.example.org/ (CONSOLE_URL)" in run._banner("127.0.0.1", 8000, tmp_path)
