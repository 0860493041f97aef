"""Two database roles: the app's, which serves requests and runs jobs, and the owner's, which
migrates.

The app role (DATABASE_URL) owns nothing. It may read and write the console's tables, but only
SELECT and INSERT on the audit trail: it cannot UPDATE, DELETE or TRUNCATE an event, ALTER the
table or disable its append-only trigger, because only a table's owner (or a superuser) may do
that. The owner role (DATABASE_OWNER_URL: same server and database, another user) owns the
tables and the trigger; `manage.py migrate` and the test runner's create, flush and drop switch to
it for their duration, then `migrate` grants the app role its privileges again (new tables
included). Without DATABASE_OWNER_URL there is one role and nothing switches (the single-role
setup of earlier versions).

The switch changes only the current thread's connection, between transactions: it closes the
connection, connects as the owner, and on the way out closes that one and restores the app's
credentials, so the owner's connection never outlives the command.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connections, transaction

_CREDENTIALS = ("USER", "PASSWORD")


def append_only_tables() -> list[str]:
    """Tables whose rows the app role may add and read but never change or remove, as their apps
    declare them: an AppConfig lists such models in `append_only_models` (the audit trail; the
    passage dictionaries that stored passages name)."""
    from django.apps import apps

    return sorted(
        config.get_model(name)._meta.db_table
        for config in apps.get_app_configs()
        for name in getattr(config, "append_only_models", ())
    )


def owner_credentials() -> dict[str, str] | None:
    owner = getattr(settings, "DATABASE_OWNER", None)
    return dict(owner) if owner else None


@contextmanager
def as_owner(alias: str = "default") -> Iterator[str | None]:
    """Run the body connected as the owner role; yields the app role's name (None with one role)."""
    connection = connections[alias]
    switched_from = getattr(connection, "console_app_role", None)
    if switched_from is not None:  # nested: already the owner
        yield switched_from
        return
    owner = owner_credentials()
    app_role = connection.settings_dict.get("USER") or ""
    if not owner or owner["USER"] == app_role:
        yield None
        return
    if connection.in_atomic_block:
        raise RuntimeError("the database role cannot change inside a transaction")
    shared = connection.settings_dict
    connection.close()
    # A copy for this thread's connection only: other threads keep connecting as the app.
    connection.settings_dict = {**shared, **{key: owner.get(key, "") for key in _CREDENTIALS}}
    connection.console_app_role = app_role
    try:
        yield app_role
    finally:
        connection.close()
        # Keep what the body changed (the test runner renames the database), not the credentials.
        shared.update({k: v for k, v in connection.settings_dict.items() if k not in _CREDENTIALS})
        connection.settings_dict = shared
        del connection.console_app_role


def app_privileges_grant(*, alias: str, app_role: str) -> None:
    """As the owner: give the app role what it needs on every table and sequence of the schema,
    and only SELECT and INSERT on the append-only tables. Idempotent; `migrate` runs it each time."""
    connection = connections[alias]
    role = connection.ops.quote_name(app_role)
    # One transaction: the app never holds the broad grant on an append-only table, even briefly.
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
        cursor.execute(f"GRANT SELECT, USAGE, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}")
        for table in append_only_tables():
            cursor.execute("SELECT to_regclass(%s)", [table])
            if cursor.fetchone()[0] is None:  # migrated back to before the table
                continue
            name = connection.ops.quote_name(table)
            cursor.execute(f"REVOKE ALL ON {name} FROM {role}")
            cursor.execute(f"GRANT SELECT, INSERT ON {name} TO {role}")
