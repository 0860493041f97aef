import threading

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from audit.models import Action, AuditEvent
from audit.selectors import audit_chain_verify
from audit.services import Actor, audit_record
from tests.audit.attack import owner_cursor, superuser_cursor
from tests.factories import ingest, record


def _append(n: int = 3) -> None:
    with transaction.atomic():
        for i in range(n):
            audit_record(
                actor=Actor.system("test"),
                action=Action.ROUTE_UPDATED,
                object_type="route",
                object_id=i,
                payload={"i": i, "text": "naïve ünïcode"},
            )


def test_a_fresh_chain_verifies(db):
    _append(5)
    result = audit_chain_verify()
    assert result["ok"] is True
    assert result["events"] == AuditEvent.objects.count()
    assert result["head"] == AuditEvent.objects.order_by("-seq").first().hash


def test_each_event_links_to_the_previous_hash(db):
    _append(3)
    events = list(AuditEvent.objects.order_by("seq"))
    for before, after in zip(events, events[1:], strict=False):
        assert after.prev_hash == before.hash
        assert after.seq == before.seq + 1


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_auditevent SET actor = 'user:mallory'",
        "DELETE FROM audit_auditevent",
    ],
)
@pytest.mark.django_db(transaction=True)
def test_the_trigger_refuses_even_the_table_owner_to_update_or_delete_audit_rows(statement):
    # The app role may not even try (tests/audit/test_least_privilege.py); the owner hits the trigger.
    _append(1)
    with pytest.raises(psycopg.Error, match="append-only"), owner_cursor() as cursor:
        cursor.execute(statement)
    assert AuditEvent.objects.filter(actor="user:mallory").count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_row_altered_with_the_trigger_disabled_is_found_by_verify(auditor):
    _append(4)
    target = AuditEvent.objects.order_by("seq")[2]
    with superuser_cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER audit_event_no_update_delete")
        cursor.execute("UPDATE audit_auditevent SET payload = '{\"i\": 99}' WHERE seq = %s", [target.seq])
        cursor.execute("ALTER TABLE audit_auditevent ENABLE TRIGGER audit_event_no_update_delete")
    result = audit_chain_verify()
    assert result["ok"] is False
    assert result["first_bad_seq"] == target.seq
    response = auditor.get("/api/v1/audit/verify")
    assert response.status_code == 200
    assert response.json()["ok"] is False and response.json()["first_bad_seq"] == target.seq
    with pytest.raises(CommandError, match=f"seq {target.seq}"):
        call_command("audit_verify")


@pytest.mark.django_db(transaction=True)
def test_a_deleted_row_is_found_as_a_gap():
    _append(4)
    with superuser_cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER audit_event_no_update_delete")
        cursor.execute("DELETE FROM audit_auditevent WHERE seq = 2")
        cursor.execute("ALTER TABLE audit_auditevent ENABLE TRIGGER audit_event_no_update_delete")
    assert audit_chain_verify()["first_bad_seq"] == 2


def test_audit_verify_command_reports_ok(db, capsys):
    _append(2)
    call_command("audit_verify")
    assert capsys.readouterr().out.startswith("ok: ")


def test_writing_an_event_outside_a_transaction_is_refused(db):
    # pytest-django wraps tests in a transaction, so leave it deliberately with a savepoint-free check.
    from audit import services

    original = connection.in_atomic_block
    try:
        connection.in_atomic_block = False
        with pytest.raises(RuntimeError, match="transaction"):
            services.audit_record_many(
                actor=Actor.system("t"), events=[services.EventSpec(Action.ROUTE_UPDATED, "route", "1", {})]
            )
    finally:
        connection.in_atomic_block = original


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_do_not_fork_the_chain():
    errors = []

    def writer():
        try:
            for _ in range(10):
                _append(2)
        except Exception as exc:  # pragma: no cover - surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert AuditEvent.objects.count() == 80
    assert audit_chain_verify()["ok"] is True


def test_events_api_lists_the_history_of_one_decision(route, reviewer, auditor):
    [decision_id] = ingest([record()])
    ingest([record()])
    for client in (reviewer, auditor):
        response = client.get(f"/api/v1/audit/events?object=decision:{decision_id}")
        assert response.status_code == 200
        events = response.json()["events"]
        assert [e["action"] for e in events] == ["decisions_ingested", "pool_entered"]  # newest first
        assert decision_id in events[0]["payload"]["objects"]["decision"]


def test_only_auditors_read_the_whole_trail(route, reviewer, auditor, grader):
    assert auditor.get("/api/v1/audit/events").status_code == 200
    assert reviewer.get("/api/v1/audit/events").status_code == 403
    assert grader.get("/api/v1/audit/verify").status_code == 403


def test_a_grader_cannot_read_a_decisions_history(route, grader):
    [decision_id] = ingest([record()])
    assert grader.get(f"/api/v1/audit/events?object=decision:{decision_id}").status_code == 403


def test_a_reader_cannot_read_a_decisions_grades_through_the_history(route, reviewer):
    from tests.factories import make_user
    from tests.grading.helpers import api_client

    reader = api_client(make_user("support-agent", "reader", route))
    [decision_id] = ingest([record()])
    assert reader.get(f"/api/v1/decisions/{decision_id}").status_code == 200  # the refusal itself: yes
    response = reader.get(f"/api/v1/audit/events?object=decision:{decision_id}")
    assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
    assert reviewer.get(f"/api/v1/audit/events?object=decision:{decision_id}").status_code == 200


def test_the_export_streams_every_event_as_json_lines(route, auditor):
    import json

    ingest([record()])
    response = auditor.get("/api/v1/audit/export")
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert len(lines) == AuditEvent.objects.count()
    assert json.loads(lines[0])["seq"] == 1


def test_a_bad_object_filter_is_400(auditor):
    assert auditor.get("/api/v1/audit/events?object=nonsense").status_code == 400
