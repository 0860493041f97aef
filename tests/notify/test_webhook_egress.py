"""Webhooks go through the one outbound client: the egress policy and the refusal of redirects
apply to them as to every integration, and a refused delivery is a recorded failure."""

from __future__ import annotations

import ipaddress

import pytest
from django.db import transaction
from django.test import TestCase

from console.notify.services import notification_send
from tests.standin import StandInPipeline

pytestmark = pytest.mark.django_db


def _deliver(url: str):
    with TestCase.captureOnCommitCallbacks(execute=True), transaction.atomic():
        notification = notification_send(channel="webhook", recipient=url, subject="Alarm", body="Drift.")
    notification.refresh_from_db()
    return notification


def test_a_webhook_to_a_loopback_address_is_refused_unless_its_network_is_listed(settings):
    settings.NOTIFY_MAX_ATTEMPTS = 1
    settings.OUTBOUND_ALLOWED_NETWORKS = ()
    with StandInPipeline() as receiver:
        refused = _deliver(receiver.url)
        assert receiver.requests == []
        settings.OUTBOUND_ALLOWED_NETWORKS = (ipaddress.ip_network("127.0.0.1/32"),)
        sent = _deliver(receiver.url)
    assert refused.status == "failed" and "refused to call the webhook" in refused.error
    assert "127.0.0.1 (a loopback address)" in refused.error
    assert sent.status == "sent" and len(receiver.requests) == 1


@pytest.mark.parametrize(
    "url, problem",
    [("ftp://hooks.example.org/x", "must be http(s)"), ("https://u:p@hooks.example.org/", "credentials")],
)
def test_a_webhook_url_the_client_will_not_call_is_a_failure_when_recorded(url, problem):
    notification = notification_send(channel="webhook", recipient=url, subject="Alarm", body="Drift.")
    assert notification.status == "failed" and problem in notification.error


def test_the_outbox_does_not_tell_a_closed_port_from_a_silent_one(settings):
    import socket

    settings.NOTIFY_MAX_ATTEMPTS = 1
    settings.NOTIFY_WEBHOOK_TIMEOUT_S = 0.5
    with socket.socket() as closed, socket.socket() as silent:
        closed.bind(("127.0.0.1", 0))
        closed_port = closed.getsockname()[1]
        closed.close()
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        errors = {_deliver(f"http://127.0.0.1:{port}/hook").error for port in (closed_port, silent.getsockname()[1])}
    assert errors == {"WebhookFailed: the webhook could not be reached, or did not answer in time"}
