"""The escalation clock: each dispute past its due time is escalated exactly once (two workers
racing, a re-run, a worker that dies mid-way), through the signed escalation channel."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connections
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import Actor
from console.core.errors import InvalidInput
from console.disputes import services
from console.disputes.models import Dispute
from console.notify.models import Notification
from tests.disputes.conftest import open_dispute, sign_policy

ACTOR = Actor.system("tests")


def _later(hours: float) -> datetime:
    return timezone.now() + timedelta(hours=hours)


def test_nothing_is_escalated_before_its_due_time(decisions, reader, signed_policy):
    open_dispute(reader, decisions[0])
    assert services.disputes_escalate(actor=ACTOR, as_of=_later(23.9)) == []
    assert services.disputes_escalate(actor=ACTOR) == []


def test_the_drill_escalates_once_and_notifies_the_signed_channel(decisions, reader, signed_policy):
    dispute = open_dispute(reader, decisions[0]).json()
    out = StringIO()
    call_command("disputes_escalate", "--as-of", _later(25).isoformat(), stdout=out)
    assert f"escalated 1 dispute: #{dispute['id']}" in out.getvalue()
    escalated = reader.get(f"/api/v1/disputes/{dispute['id']}").json()
    assert escalated["escalated_at"] is not None
    notification = Notification.objects.get(subject__contains=f"Dispute #{dispute['id']}")
    assert notification.channel == "email" and notification.recipient == "desk@example.org"
    assert notification.route == "it-support"
    event = AuditEvent.objects.get(action="dispute_escalated")
    assert event.object_id == str(dispute["id"]) and event.payload["notified"] == ["email:desk@example.org"]
    # A re-run, and the beat job, find nothing more to do.
    call_command("disputes_escalate", "--as-of", _later(48).isoformat(), stdout=StringIO())
    from console.disputes.tasks import disputes_escalate

    assert disputes_escalate() == 0
    assert AuditEvent.objects.filter(action="dispute_escalated").count() == 1
    assert Notification.objects.filter(subject__contains="past its response time").count() == 1


def test_a_bad_as_of_is_an_error(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("disputes_escalate", "--as-of", "tomorrow")


def test_a_resolved_dispute_is_not_escalated(decisions, reader, reviewer, signed_policy):
    dispute = open_dispute(reader, decisions[0]).json()
    reviewer.post(
        f"/api/v1/disputes/{dispute['id']}/resolve", {"resolution": "upheld", "note": "Right call."}, format="json"
    )
    assert services.disputes_escalate(actor=ACTOR, as_of=_later(100)) == []


def test_without_a_signed_path_the_route_owners_are_emailed(decisions, reader, owner_client):
    dispute = open_dispute(reader, decisions[0]).json()
    assert services.disputes_escalate(actor=ACTOR, as_of=_later(73)) == [dispute["id"]]
    notification = Notification.objects.get(subject__contains="past its response time")
    assert notification.recipient == "owner@example.org"


def test_a_webhook_channel_is_sent_a_webhook(route, decisions, reader, owner_client):
    channel = "https://hooks.example.org/desk"
    sign_policy(route, owner_client.user, channel=channel)
    open_dispute(reader, decisions[0])
    services.disputes_escalate(actor=ACTOR, as_of=_later(25))
    notification = Notification.objects.get(subject__contains="past its response time")
    assert notification.channel == "webhook" and notification.recipient == channel


@pytest.mark.parametrize("channel", ["pager:it-desk", "it desk", "a@example.org, b@example.org", "mailto:@"])
def test_a_channel_no_message_can_reach_is_refused_when_drafted(route, owner_client, channel):
    with pytest.raises(InvalidInput) as refused:
        sign_policy(route, owner_client.user, channel=channel)
    assert [(d["field"], d["code"]) for d in refused.value.details] == [("escalation.channel", "invalid_channel")]


def test_a_worker_that_dies_before_commit_leaves_the_dispute_for_the_next_run(
    decisions, reader, signed_policy, monkeypatch
):
    dispute = open_dispute(reader, decisions[0]).json()

    def die(*args, **kwargs):
        raise SystemExit("worker killed")

    with monkeypatch.context() as patch:
        patch.setattr(services, "dispute_escalated_notify", die)
        with pytest.raises(SystemExit):
            services.disputes_escalate(actor=ACTOR, as_of=_later(25))
    assert Dispute.objects.get(pk=dispute["id"]).escalated_at is None
    assert services.disputes_escalate(actor=ACTOR, as_of=_later(25)) == [dispute["id"]]
    assert Notification.objects.filter(subject__contains="past its response time").count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_escalate_each_dispute_once(decisions, reader, reviewer, signed_policy):
    ids = [open_dispute(reader, decisions[0]).json()["id"], open_dispute(reviewer, decisions[0]).json()["id"]]
    as_of = _later(30)
    barrier = threading.Barrier(2)
    results: list = [None, None]

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = services.disputes_escalate(actor=Actor.system(f"worker-{index}"), as_of=as_of)
        except Exception as exc:  # noqa: BLE001 -- the test inspects what each worker got
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert all(isinstance(r, list) for r in results), results
    assert sorted(results[0] + results[1]) == sorted(ids)
    assert AuditEvent.objects.filter(action="dispute_escalated").count() == 2
    assert Notification.objects.filter(subject__contains="past its response time").count() == 2
    assert datetime.now(UTC) > Dispute.objects.get(pk=ids[0]).escalated_at
