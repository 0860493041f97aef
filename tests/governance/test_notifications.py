"""Notifications: the owner hears of a draft by email, webhooks are signed and retried."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import transaction

from console.notify.models import Notification
from console.notify.services import notification_send
from tests.governance.conftest import draft_body

pytestmark = pytest.mark.django_db


class WebhookReceiver:
    """A loopback stand-in for a webhook endpoint: answers 500 to the first `fail_first` requests."""

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.requests: list[tuple[bytes, dict]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((body, dict(self.headers)))
                failing = len(receiver.requests) <= receiver.fail_first
                self.send_response(500 if failing else 204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def _send_webhook(url: str) -> Notification:
    from django.test import TestCase

    # Delivery is queued when the caller's transaction commits; run those callbacks here.
    with TestCase.captureOnCommitCallbacks(execute=True), transaction.atomic():
        notification = notification_send(
            channel="webhook", recipient=url, subject="Recheck opened", body="The HR gate moved.", route="hr-policy"
        )
    notification.refresh_from_db()
    return notification


def test_a_webhook_carries_an_hmac_of_its_body_under_the_shared_secret(settings):
    settings.NOTIFY_WEBHOOK_SECRET = "s3cret"
    with WebhookReceiver() as receiver:
        notification = _send_webhook(receiver.url)
    assert notification.status == "sent" and notification.attempts == 1
    body, headers = receiver.requests[0]
    expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Console-Signature"] == expected
    assert json.loads(body)["subject"] == "Recheck opened" and headers["Content-Type"] == "application/json"


def test_a_failing_webhook_is_retried_and_its_status_recorded(settings):
    settings.NOTIFY_BACKOFF_SECONDS = 0
    with WebhookReceiver(fail_first=2) as receiver:
        notification = _send_webhook(receiver.url)
    assert notification.status == "sent" and notification.attempts == 3 and len(receiver.requests) == 3
    settings.NOTIFY_MAX_ATTEMPTS = 2
    with WebhookReceiver(fail_first=10) as receiver:
        notification = _send_webhook(receiver.url)
    assert notification.status == "failed" and notification.attempts == 2
    assert "500" in notification.error


def test_an_unreachable_webhook_fails_without_failing_the_caller(settings):
    settings.NOTIFY_BACKOFF_SECONDS = 0
    settings.NOTIFY_MAX_ATTEMPTS = 1
    notification = _send_webhook("http://127.0.0.1:9/nothing-listens-here")
    assert notification.status == "failed" and notification.error


def test_the_owner_is_emailed_into_the_outbox_folder_when_a_draft_waits(
    settings, tmp_path, reviewer, owner, graded, django_capture_on_commit_callbacks
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = tmp_path / "outbox"
    owner.user.email = "owner@example.org"
    owner.user.save()
    with django_capture_on_commit_callbacks(execute=True):
        response = reviewer.post("/api/v1/routes/it-support/policies", draft_body(), format="json")
    assert response.status_code == 201
    notification = Notification.objects.get()
    assert notification.status == "sent" and notification.recipient == "owner@example.org"
    files = list((tmp_path / "outbox").iterdir())
    assert len(files) == 1
    message = files[0].read_text()
    assert "owner@example.org" in message and "waits for your signature" in message
    assert f"/policies/{response.json()['id']}/sign/" in message


def test_an_owner_without_email_gets_a_recorded_failure_and_the_draft_is_saved(reviewer, owner, graded):
    response = reviewer.post("/api/v1/routes/it-support/policies", draft_body(), format="json")
    assert response.status_code == 201
    notification = Notification.objects.get()
    assert notification.status == "failed" and "no email" in notification.error


def test_the_outbox_page_lists_notifications_for_admins_only(admin, reviewer, owner, graded, client):
    reviewer.post("/api/v1/routes/it-support/policies", draft_body(), format="json")
    client.force_login(admin.user)
    page = client.get("/outbox/")
    assert page.status_code == 200 and b"waits for your signature" in page.content
    client.force_login(reviewer.user)
    assert client.get("/outbox/").status_code == 403


def test_the_sweeper_delivers_messages_whose_job_was_lost(settings):
    settings.JOBS_REQUEUE_AFTER_SECONDS = 0
    with WebhookReceiver() as receiver:
        notification = Notification.objects.create(channel="webhook", recipient=receiver.url, subject="s", body="b")
        from console.notify.tasks import notifications_sweep

        assert notifications_sweep() == 1
        notification.refresh_from_db()
        assert notification.status == "sent" and len(receiver.requests) == 1
        assert notifications_sweep() == 0  # nothing is sent twice
