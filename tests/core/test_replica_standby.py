"""Heavy reads on a streaming replica (console/core/replica.py, README "Scale").

The slow tests make a real standby of the test session's embedded PostgreSQL with the wheel's own
`pg_basebackup -R`, start it beside the primary with `pg_ctl`, and point the "replica" alias at it for
each test: the test database is on the standby too, and every commit of a test streams to it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from console import backup, embedded
from console.accounts.models import Route
from console.analysis.params import OperatingPointsQuery, Window
from console.analysis.reports import operating_points_report
from console.core import replica
from console.monitoring.selectors import route_health
from console.similarity.selectors import latest_gap_run
from tests import factories

PORT = "5432"  # the socket's name; each cluster has a folder of its own


def _wait(condition, *, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def standby(django_db_setup):
    """A hot standby of the session's cluster, streaming from it. Its folder is under /tmp, not
    pytest's: as root the cluster runs as pgserver's user, and a pytest session starting elsewhere
    on the machine makes /tmp/pytest-of-root private again (tests/project/test_backup_restore.py)."""
    folder = Path(tempfile.mkdtemp(prefix="console-replica-"))
    pgdata, sockets = folder / "pg", folder / "sockets"
    superuser = f"postgresql://postgres:@/postgres?host={sockets}&port={PORT}"
    try:
        sockets.mkdir()
        sockets.chmod(0o777)  # the server's user makes its socket here
        taken = subprocess.run(
            [
                str(embedded.postgres_bin_dir() / "pg_basebackup"),
                f"--dbname={embedded.postgres_superuser_url(settings.DATA_DIR, 'postgres')}",
                f"--pgdata={pgdata}",
                "--wal-method=stream",
                "--write-recovery-conf",  # standby.signal and primary_conninfo: it follows the primary
                "--checkpoint=fast",
                "--no-password",
            ],
            capture_output=True,
            text=True,
        )
        assert taken.returncode == 0, taken.stderr
        backup._hand_to_server_user(pgdata)
        options = f"-c listen_addresses='' -c port={PORT} -k {sockets} -c archive_mode=off -c hot_standby=on"
        backup._pg_ctl(pgdata, "-w", "-t", "120", "-l", str(pgdata / "log"), "-o", options, "start")
        with psycopg.connect(superuser, autocommit=True) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
        # The alias DATABASE_REPLICA_URL would make, present before the tests' database setup reads
        # their `databases`. A mirror of the test database, so no test's teardown flushes it.
        connections.settings[replica.REPLICA] = {
            **connections[DEFAULT_DB_ALIAS].settings_dict,
            "HOST": str(sockets),
            "PORT": PORT,
            "OPTIONS": {"connect_timeout": 2},
            "TEST": {"MIRROR": DEFAULT_DB_ALIAS},
        }
        yield {"sockets": sockets, "superuser": superuser}
    finally:
        if replica.REPLICA in connections.settings:
            connections[replica.REPLICA].close()
            del connections.settings[replica.REPLICA]
            if hasattr(connections._connections, replica.REPLICA):
                delattr(connections._connections, replica.REPLICA)
        backup._stop_quietly(pgdata)
        shutil.rmtree(folder, ignore_errors=True)


def _standby_sql(standby, sql: str, params=()):
    with psycopg.connect(standby["superuser"], autocommit=True) as conn:
        return conn.execute(sql, params).fetchone()


def _primary_lsn() -> str:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        return cursor.fetchone()[0]


def _replayed(standby) -> None:
    """Wait until the standby has replayed every commit made on the primary so far."""
    lsn = _primary_lsn()
    _wait(lambda: _standby_sql(standby, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn])[0], what="replay")


def _received(standby) -> None:
    lsn = _primary_lsn()
    _wait(lambda: _standby_sql(standby, "SELECT pg_last_wal_receive_lsn() >= %s::pg_lsn", [lsn])[0], what="receipt")


@pytest.fixture
def replica_alias(standby, settings):
    """The standby as the replica, with the lag measured afresh at every scope. Each test commits
    (the standby sees nothing else) and resumes replay when it ends."""
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 10.0
    settings.DATABASE_REPLICA_LAG_CHECK_SECONDS = 0.0
    default = connections[DEFAULT_DB_ALIAS]
    default.close()  # the next connection is watched for writes, as every connection is with a replica
    replica.forget_status()
    try:
        yield
    finally:
        if replica._note_writes in default.execute_wrappers:
            default.execute_wrappers.remove(replica._note_writes)
        replica.forget_status()
        _standby_sql(standby, "SELECT pg_wal_replay_resume()")


# Every test here commits, and may read the replica's alias.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, replica.REPLICA])]


def _in_recovery(alias: str) -> bool:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery()")
        return cursor.fetchone()[0]


def _world(size: int = 12) -> Route:
    route = factories.make_route("it-support")
    factories.ingest([factories.record(occurred_at=factories.recent()) for _ in range(size)])
    return route


def test_a_statistics_document_and_the_export_are_read_on_the_standby(standby, replica_alias, client):
    route = _world()
    owner = factories.make_user("owner", "policy_owner", route)
    api = factories.make_token(owner)
    client.force_login(owner)
    _replayed(standby)

    with CaptureQueriesContext(connections[replica.REPLICA]) as on_replica:
        response = client.get(
            f"/api/v1/routes/{route.slug}/operating-points?cutoffs=0.5,0.9", HTTP_AUTHORIZATION=f"Token {api}"
        )
    assert response.status_code == 200, response.content
    assert response.json()["population"] == 12  # what the standby holds, replayed from the primary
    assert any("ledger_" in query["sql"] for query in on_replica.captured_queries)

    with CaptureQueriesContext(connections[replica.REPLICA]) as on_replica:
        exported = client.get(reverse("refusal-list") + "?format=csv")
        rows = b"".join(exported.streaming_content).decode().splitlines()
    assert len(rows) == 13
    assert any("ledger_decision" in query["sql"] for query in on_replica.captured_queries)

    replica.forget_writes()  # as a new request or job starts
    with replica.replica_reads():
        assert replica.read_alias() == replica.REPLICA
        assert _in_recovery(replica.read_alias())  # the chosen connection is the standby's
        with CaptureQueriesContext(connections[replica.REPLICA]) as on_replica:
            health = route_health(route)
            assert latest_gap_run(route) is None
    assert health["route"] == route.slug
    assert any("similarity_gaprun" in query["sql"] for query in on_replica.captured_queries)
    assert any("ledger_decision" in query["sql"] for query in on_replica.captured_queries)


def test_an_eager_job_inside_a_request_keeps_the_requests_write_and_a_worker_job_starts_afresh(replica_alias):
    from types import SimpleNamespace

    from celery.signals import task_prerun

    def job_starts(*, eager: bool) -> None:  # what Celery sends as a task begins, eager or on a worker
        task_prerun.send(sender=None, task=SimpleNamespace(request=SimpleNamespace(is_eager=eager)))

    replica.forget_writes()
    factories.make_route("hr-policy")
    with replica.replica_reads():
        job_starts(eager=True)
        assert replica.read_alias() == DEFAULT_DB_ALIAS
        job_starts(eager=False)
        assert replica.read_alias() == replica.REPLICA


def test_writes_and_reads_in_a_transaction_stay_on_the_primary(standby, replica_alias):
    route = _world(3)
    _replayed(standby)
    replica.forget_writes()
    with replica.replica_reads():
        with CaptureQueriesContext(connections[replica.REPLICA]) as on_replica:
            with transaction.atomic():
                assert replica.read_alias() == DEFAULT_DB_ALIAS
                assert Route.objects.filter(pk=route.pk).exists()
                assert not _in_recovery(replica.read_alias())
        assert on_replica.captured_queries == []
        with (
            CaptureQueriesContext(connections[replica.REPLICA]) as on_replica,
            CaptureQueriesContext(connections[DEFAULT_DB_ALIAS]) as on_primary,
        ):
            factories.make_route("hr-policy")  # its look-up before the write may read the standby
        assert all(query["sql"].startswith("SELECT") for query in on_replica.captured_queries)
        assert any(query["sql"].startswith('INSERT INTO "ledger_route"') for query in on_primary.captured_queries)
    assert replica.ReplicaRouter().db_for_write(Route) == DEFAULT_DB_ALIAS
    assert Route.objects.filter(slug="hr-policy").exists()


def test_a_read_after_the_requests_own_write_goes_to_the_primary(standby, replica_alias):
    route = _world(3)
    _replayed(standby)
    replica.forget_writes()
    with replica.replica_reads():
        assert replica.read_alias() == replica.REPLICA
        _standby_sql(standby, "SELECT pg_wal_replay_pause()")
        factories.make_route("hr-policy")  # a write of this request, which the standby has not replayed
        assert replica.read_alias() == DEFAULT_DB_ALIAS
        assert Route.objects.filter(slug="hr-policy").exists()
        assert not Route.objects.using(replica.REPLICA).filter(slug="hr-policy").exists()
        report = operating_points_report(route, OperatingPointsQuery(window=Window(), cutoffs=(0.5,)))
    assert report.data["population"] == 3


def test_a_standby_paused_past_the_max_lag_is_skipped_and_health_shows_the_lag(
    standby, replica_alias, settings, client
):
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 1.0
    route = _world(3)
    _replayed(standby)
    _standby_sql(standby, "SELECT pg_wal_replay_pause()")
    factories.ingest([factories.record(occurred_at=factories.recent())])  # received, never replayed
    _received(standby)
    time.sleep(1.5)

    status = replica.replica_status(refresh=True)
    assert status.in_recovery and status.lag_seconds > 1.0 and not status.used
    replica.forget_writes()
    with replica.replica_reads(), CaptureQueriesContext(connections[replica.REPLICA]) as on_replica:
        assert replica.read_alias() == DEFAULT_DB_ALIAS
        report = operating_points_report(route, OperatingPointsQuery(window=Window(), cutoffs=(0.5,)))
    assert report.data["population"] == 4  # the primary's count, with the decision the standby lacks
    assert on_replica.captured_queries == []

    shown = client.get("/healthz").json()
    assert shown["replica"]["used"] is False and shown["replica"]["lag_seconds"] > 1.0
    assert set(shown) >= {"ok", "checks"}
