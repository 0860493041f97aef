"""The app's database role may only add and read audit events: every way to change, remove or
unprotect them is refused by PostgreSQL itself, from the very connection the console serves with."""

from __future__ import annotations

import os

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction
from django.db.utils import DatabaseError

from audit.models import Action, AuditEvent
from audit.services import Actor, audit_record
from console import embedded
from tests.audit.attack import superuser_cursor

pytestmark = pytest.mark.skipif(
    settings.DATABASE_OWNER is None, reason="one database role (DATABASE_OWNER_URL unset): no least privilege to test"
)

ATTACKS = [
    "UPDATE audit_auditevent SET actor = 'user:mallory'",
    "DELETE FROM audit_auditevent",
    "TRUNCATE audit_auditevent",
    "ALTER TABLE audit_auditevent DISABLE TRIGGER audit_event_no_update_delete",
    "ALTER TABLE audit_auditevent DISABLE TRIGGER ALL",
    "ALTER TABLE audit_auditevent ADD COLUMN note text",
    "ALTER TABLE audit_auditevent OWNER TO CURRENT_USER",
    "DROP TRIGGER audit_event_no_update_delete ON audit_auditevent",
    "DROP TABLE audit_auditevent",
    "ALTER TABLE audit_auditevent RENAME TO audit_old",
    "CREATE OR REPLACE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
    "SET ROLE console_owner",
    "SET session_replication_role = replica",  # would skip ordinary triggers
    "ALTER ROLE CURRENT_USER SUPERUSER",
    "CREATE TABLE public.audit_shadow (seq bigint)",
    "DROP SCHEMA public CASCADE",
]


def _event() -> AuditEvent:
    with transaction.atomic():
        return audit_record(
            actor=Actor.system("test"), action=Action.ROUTE_UPDATED, object_type="route", object_id=1, payload={"x": 1}
        )


def test_the_app_connects_as_a_role_that_owns_nothing(db):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user"
        )
        assert cursor.fetchone() == (settings.DATABASES["default"]["USER"], False, False, False)
        cursor.execute("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'audit_auditevent'")
        assert cursor.fetchone()[0] == settings.DATABASE_OWNER["USER"] != connection.settings_dict["USER"]
        cursor.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relowner = "
            "(SELECT oid FROM pg_roles WHERE rolname = current_user)"
        )
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            "SELECT privilege_type FROM information_schema.role_table_grants "
            "WHERE table_name = 'audit_auditevent' AND grantee = current_user ORDER BY 1"
        )
        assert [row[0] for row in cursor.fetchall()] == ["INSERT", "SELECT"]


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="embedded mode only")
def test_in_embedded_mode_the_roles_are_the_console_s():
    assert settings.DATABASES["default"]["USER"] == embedded.APP_ROLE
    assert settings.DATABASE_OWNER["USER"] == embedded.OWNER_ROLE


@pytest.mark.parametrize("statement", ATTACKS)
def test_the_app_role_cannot_change_or_unprotect_the_audit_trail(db, statement):
    event = _event()
    with (
        pytest.raises(DatabaseError, match="permission denied|must be owner|must be superuser|insufficient"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement)
    event.refresh_from_db()
    assert event.actor == "system:test"
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgenabled FROM pg_trigger WHERE tgname = 'audit_event_no_update_delete'")
        assert cursor.fetchone()[0] == "O"  # enabled


def test_the_app_role_cannot_grant_itself_more(db):
    # A GRANT without the grant option is only a warning in PostgreSQL; what counts is that nothing changed.
    with connection.cursor() as cursor:
        cursor.execute("GRANT UPDATE, DELETE, TRUNCATE ON audit_auditevent TO CURRENT_USER")
        cursor.execute(
            "SELECT has_table_privilege('audit_auditevent', 'UPDATE'), "
            "has_table_privilege('audit_auditevent', 'DELETE'), "
            "has_table_privilege('audit_auditevent', 'TRUNCATE')"
        )
        assert cursor.fetchone() == (False, False, False)


def test_the_app_role_still_writes_and_reads_everything_else(route, integrator):
    from tests.factories import record

    response = integrator.post("/api/v1/decisions", {"decisions": [record()]}, format="json")
    assert response.status_code == 201
    assert AuditEvent.objects.filter(action="decisions_ingested").exists()


@pytest.mark.django_db(transaction=True)
def test_migrate_runs_as_the_owner_and_grants_the_app_its_privileges_again():
    with superuser_cursor() as cursor:  # as if someone had granted too much by hand
        cursor.execute(f"GRANT UPDATE, DELETE, TRUNCATE ON audit_auditevent TO {connection.settings_dict['USER']}")
    call_command("migrate", verbosity=0)
    assert connection.settings_dict["USER"] == settings.DATABASES["default"]["USER"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone()[0] == connection.settings_dict["USER"]
        cursor.execute(
            "SELECT has_table_privilege('audit_auditevent', 'UPDATE'), "
            "has_table_privilege('audit_auditevent', 'INSERT'), "
            "has_table_privilege('ledger_decision', 'UPDATE')"
        )
        assert cursor.fetchone() == (False, True, True)
