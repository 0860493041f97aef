"""docker compose's database set-up, replayed on a fresh PostgreSQL: the init script creates the two
roles, `migrate` runs as the owner through DATABASE_OWNER_URL, and the app role that web, worker
and beat use may then only add and read audit events."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from audit.chain import event_hash_jcs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_cluster():
    """A new PostgreSQL cluster beside the embedded one (pytest's temporary folders are not always
    reachable by the system user the embedded server runs PostgreSQL as when tests run as root)."""
    from django.conf import settings

    from console import embedded

    folder = Path(settings.DATA_DIR) / f"roles-test-{os.getpid()}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    server = embedded.postgres_server(folder / "pg")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def _url(server, role: str) -> str:
    return server.get_uri("console").replace("postgres:@", f"{role}:@", 1)


@pytest.mark.slow  # a PostgreSQL cluster of its own, and `migrate` in a subprocess
def test_the_init_script_and_migrate_leave_the_app_role_append_only_on_the_audit_trail(fresh_cluster, tmp_path):
    from console import embedded

    socket_dir = psycopg.conninfo.conninfo_to_dict(fresh_cluster.get_uri("postgres"))["host"]
    bin_dir = embedded.postgres_bin_dir()
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        PGHOST=socket_dir,
        POSTGRES_USER="postgres",
        CONSOLE_OWNER_PASSWORD="owner-pw",
        CONSOLE_APP_PASSWORD="app-pw",
    )
    subprocess.run(
        ["sh", str(ROOT / "docker" / "initdb" / "10-console-roles.sh")], env=env, check=True, capture_output=True
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DATABASE_", "TEST_DATABASE"))}
    env.update(
        DATABASE_URL=_url(fresh_cluster, "console_app"),
        DATABASE_OWNER_URL=_url(fresh_cluster, "console_owner"),
        CONSOLE_DATA_DIR=str(tmp_path / "data"),
        DJANGO_SETTINGS_MODULE="console.settings",
    )
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    with psycopg.connect(_url(fresh_cluster, "console_app"), autocommit=True) as app:
        owner = app.execute("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'audit_auditevent'")
        assert owner.fetchone()[0] == "console_owner"
        insert = (
            "INSERT INTO audit_auditevent (seq, at, actor, action, object_type, object_id, payload, payload_text, "
            "hash_scheme, route, prev_hash, hash) VALUES (1, %s, 'system:t', 'route_created', 'route', '1', '{}', "
            "'{}', 2, '', repeat('0', 64), %s)"
        )
        at = datetime.now(UTC)
        with pytest.raises(psycopg.errors.CheckViolation):  # a row that is not the hash of its content
            app.execute(insert, [at, "a" * 64])
        fields = dict(seq=1, at=at, actor="system:t", action="route_created", object_type="route", object_id="1")
        app.execute(insert, [at, event_hash_jcs(payload_text="{}", prev_hash="0" * 64, route="", **fields)])
        assert app.execute("SELECT count(*) FROM audit_auditevent").fetchone()[0] == 1
        for statement in (
            "UPDATE audit_auditevent SET actor = 'x'",
            "DELETE FROM audit_auditevent",
            "TRUNCATE audit_auditevent",
            "ALTER TABLE audit_auditevent DISABLE TRIGGER ALL",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(statement)
        assert app.execute("SELECT has_table_privilege('ledger_decision', 'INSERT')").fetchone()[0] is True
