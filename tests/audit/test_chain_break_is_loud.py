"""A broken chain is loud: the checkpoint job records the break, the health API reports it, and the
admins get one email per break (not one per run); the console keeps serving."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client

from audit import tasks
from audit.models import Action, AuditEvent, ChainBreak
from audit.services import Actor, audit_record
from console.notify.models import Notification
from tests import factories
from tests.audit.attack import TRIGGER, delete_newest, superuser_cursor


def _append(n: int) -> None:
    for i in range(n):
        with transaction.atomic():
            audit_record(actor=Actor.system("t"), action=Action.ROUTE_UPDATED, object_type="r", object_id=i)


def _edit_payload(seq: int) -> None:
    with superuser_cursor() as cursor:
        cursor.execute(f"ALTER TABLE audit_auditevent DISABLE TRIGGER {TRIGGER}")
        cursor.execute(
            "UPDATE audit_auditevent SET payload = '{\"i\": 1}', payload_text = '{\"i\":1}' WHERE seq = %s", [seq]
        )
        cursor.execute(f"ALTER TABLE audit_auditevent ENABLE TRIGGER {TRIGGER}")


@pytest.fixture
def admins(route):
    boss = factories.make_user("boss", "admin")
    boss.email = "boss@example.org"
    boss.save()
    root = factories.make_user("root")
    root.is_superuser, root.email = True, "root@example.org"
    root.save()
    factories.make_user("it-admin", "admin", route)  # an admin of one route, without an address
    reviewer = factories.make_user("plain", "reviewer")  # not an admin: not told
    reviewer.email = "reviewer@example.org"
    reviewer.save()
    return ["boss@example.org", "root@example.org"]


def _health() -> tuple[int, dict]:
    response = Client().get("/healthz")
    return response.status_code, response.json()


@pytest.mark.django_db(transaction=True)
def test_a_broken_chain_is_in_the_health_api_and_emailed_to_admins_once(admins, settings):
    settings.CELERY_BROKER_URL = "memory://"
    _append(3)
    assert tasks.audit_checkpoint()["signed"] is True
    assert _health()[1]["checks"]["audit_chain"] is True
    _append(2)
    bad = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True)[1]
    _edit_payload(bad)

    first = tasks.audit_checkpoint()
    assert first["signed"] is False and f"seq {bad}" in first["reason"]
    status, health = _health()
    assert status == 200  # still serving: restarting would not mend the chain
    assert health["ok"] is False and health["checks"]["audit_chain"] is False
    assert health["audit_chain"]["first_bad_seq"] == bad
    assert health["audit_chain"]["reason"] == "stored hash does not match the event's content"
    emails = Notification.objects.filter(subject="Audit chain broken")
    assert sorted(e.recipient for e in emails if e.recipient) == admins
    assert emails.filter(recipient="").count() == 1  # the admin without an address shows as a failed message
    assert f"seq {bad}" in emails.first().body

    _append(1)  # the console goes on writing; later runs find the same break
    tasks.audit_checkpoint()
    tasks.audit_checkpoint()
    assert Notification.objects.filter(subject="Audit chain broken").count() == emails.count() == 3
    assert ChainBreak.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_earlier_break_found_later_is_announced_as_a_new_one(admins, settings):
    settings.CELERY_BROKER_URL = "memory://"
    _append(6)
    _edit_payload(5)
    tasks.audit_checkpoint()
    _edit_payload(2)
    tasks.audit_checkpoint()
    breaks = {b.first_bad_seq: b for b in ChainBreak.objects.all()}
    assert set(breaks) == {5, 2}
    assert breaks[5].resolved_at is not None and breaks[2].resolved_at is None
    assert Notification.objects.filter(subject="Audit chain broken").count() == 6
    assert _health()[1]["audit_chain"]["first_bad_seq"] == 2


def test_a_sound_chain_is_reported_healthy(db, settings):
    settings.CELERY_BROKER_URL = "memory://"
    _append(2)
    tasks.audit_checkpoint()
    health = _health()[1]
    assert health["checks"]["audit_chain"] is True and "audit_chain" not in health


@pytest.mark.django_db(transaction=True)
def test_a_truncated_tail_stays_one_break_while_the_console_goes_on_writing(admins, settings):
    settings.CELERY_BROKER_URL = "memory://"
    _append(5)
    signed = tasks.audit_checkpoint()["seq"]
    delete_newest(3)
    for _ in range(3):  # each run finds the head one event further on, still short of the checkpoint
        assert tasks.audit_checkpoint()["signed"] is False
        _append(1)
    assert ChainBreak.objects.count() == 1
    assert ChainBreak.objects.get().key == f"checkpoint:{signed}"
    assert Notification.objects.filter(subject="Audit chain broken").count() == 3  # one per admin, once
