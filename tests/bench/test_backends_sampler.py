"""bench/backends.py counts what PostgreSQL's client backends are doing, read from pg_stat_activity."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import backends  # noqa: E402  (bench/ is not a package)

from tests.audit.attack import owner_conninfo  # noqa: E402


@pytest.mark.django_db
def test_a_backend_sleeping_in_a_statement_is_counted_with_its_wait_and_its_statement():
    stop = threading.Event()
    with psycopg.connect(owner_conninfo(), autocommit=True) as sleeper:
        started = threading.Event()

        def sleep():
            started.set()
            sleeper.execute("SELECT pg_sleep(1.5) /* the sleeper */")

        thread = threading.Thread(target=sleep)
        thread.start()
        started.wait()
        with backends.connect(owner_conninfo(), stop=stop) as sampler:
            samples = backends.sample(sampler, seconds=1.0, interval=0.05, stop=stop)
        thread.join()

    assert samples.taken >= 5
    [(key, times)] = [(key, times) for key, times in samples.seen.items() if "the sleeper" in key[2]]
    assert key[:2] == ("Timeout/PgSleep", "active")
    assert key[2].startswith("SELECT pg_sleep(1.5)")
    assert times >= samples.taken // 2  # seen in most samples, not only once
    lines = backends.Samples(samples.taken, samples.seen).lines(top=5)
    assert lines[0] == f"{samples.taken:,} samples; share = times seen / samples"
    assert any("Timeout/PgSleep" in line and "the sleeper" in line for line in lines[1:])


def test_samples_stop_when_the_server_goes_away_and_keep_what_was_seen():
    class Gone:
        calls = 0

        def execute(self, *args):
            self.calls += 1
            if self.calls > 2:
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return self

        def fetchall(self):
            return [("CPU", "active", "COPY ledger_decision (id, route_id")]

    samples = backends.sample(Gone(), seconds=60, interval=0.0, stop=threading.Event())
    assert samples.taken == 2
    assert samples.seen == {("CPU", "active", "COPY ledger_decision (id, route_id"): 2}
    assert backends.Samples().lines(top=3) == ["no sample was taken"]
