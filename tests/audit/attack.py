"""What an attacker who owns the database can do: disable the append-only trigger, edit or delete
events, and recompute the chain. Runs on its own connection as the cluster superuser (the app's
role can do none of this), so tests using it need `django_db(transaction=True)` to see committed rows.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection

from audit.chain import SCHEME_JCS, canonical_payload, event_hash, event_hash_jcs

TRIGGER = "audit_event_no_update_delete"


def superuser_conninfo() -> str:
    """The test database as the cluster superuser: embedded mode's `postgres`, or for an external
    server TEST_DATABASE_SUPERUSER_URL (its database name is replaced by the test database's)."""
    from console import embedded

    name = connection.settings_dict["NAME"]
    url = os.environ.get("TEST_DATABASE_SUPERUSER_URL")
    if url:
        return psycopg.conninfo.make_conninfo(url, dbname=name)
    if not os.environ.get("DATABASE_URL"):
        settings = connection.settings_dict
        return psycopg.conninfo.make_conninfo(
            host=settings["HOST"], port=settings["PORT"] or None, user=embedded.SUPERUSER, dbname=name
        )
    pytest.skip("an external database needs TEST_DATABASE_SUPERUSER_URL to play the attacker")


def owner_conninfo() -> str:
    """The test database as the owner role (which migrations run as), from the settings."""
    from django.conf import settings

    params = connection.settings_dict
    owner = settings.DATABASE_OWNER or {"USER": params["USER"], "PASSWORD": params["PASSWORD"]}
    return psycopg.conninfo.make_conninfo(
        host=params["HOST"] or None,
        port=params["PORT"] or None,
        user=owner["USER"],
        password=owner["PASSWORD"] or None,
        dbname=params["NAME"],
    )


@contextmanager
def owner_cursor():
    with psycopg.connect(owner_conninfo(), autocommit=True) as conn, conn.cursor() as cursor:
        yield cursor


@contextmanager
def superuser_cursor():
    with psycopg.connect(superuser_conninfo(), autocommit=True) as conn, conn.cursor() as cursor:
        yield cursor


def rechain_after_edit(seq: int, payload: str) -> None:
    """Edit one event's payload (and its canonical text, for scheme 2 events), then recompute every
    hash from it to the head with each event's own scheme, so every link holds."""
    with superuser_cursor() as cursor:
        cursor.execute(f"ALTER TABLE audit_auditevent DISABLE TRIGGER {TRIGGER}")
        try:
            text = canonical_payload(json.loads(payload))
            cursor.execute(
                "UPDATE audit_auditevent SET payload = %s::jsonb, "
                "payload_text = CASE WHEN hash_scheme = %s THEN %s END WHERE seq = %s",
                [text, SCHEME_JCS, text, seq],
            )
            cursor.execute("SELECT hash FROM audit_auditevent WHERE seq = %s", [seq - 1])
            row = cursor.fetchone()
            prev_hash = row[0] if row else "0" * 64
            cursor.execute(
                "SELECT seq, at, actor, action, object_type, object_id, payload, route, hash_scheme, payload_text "
                "FROM audit_auditevent WHERE seq >= %s ORDER BY seq",
                [seq],
            )
            for s, at, actor, action, object_type, object_id, doc, route, scheme, doc_text in cursor.fetchall():
                fields = dict(
                    seq=s,
                    at=at,
                    actor=actor,
                    action=action,
                    object_type=object_type,
                    object_id=object_id,
                    prev_hash=prev_hash,
                    route=route,
                )
                if scheme == SCHEME_JCS:
                    new_hash = event_hash_jcs(payload_text=doc_text, **fields)
                else:
                    new_hash = event_hash(payload=doc, **fields)
                cursor.execute(
                    "UPDATE audit_auditevent SET prev_hash = %s, hash = %s WHERE seq = %s", [prev_hash, new_hash, s]
                )
                prev_hash = new_hash
        finally:
            cursor.execute(f"ALTER TABLE audit_auditevent ENABLE TRIGGER {TRIGGER}")


def delete_newest(count: int) -> None:
    with superuser_cursor() as cursor:
        cursor.execute(f"ALTER TABLE audit_auditevent DISABLE TRIGGER {TRIGGER}")
        try:
            cursor.execute(
                "DELETE FROM audit_auditevent WHERE seq > (SELECT max(seq) FROM audit_auditevent) - %s", [count]
            )
        finally:
            cursor.execute(f"ALTER TABLE audit_auditevent ENABLE TRIGGER {TRIGGER}")
