"""Real Celery workers for the job tests: separate processes on the embedded Redis and the test
database, started and killed by the tests. Data must be committed for a worker to see it, so
these tests are transactional."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
import redis
from django.conf import settings

from console.celery import app
from console.core.queues import QUEUES

CELERY = Path(sys.executable).parent / "celery"
ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate: Callable[[], object], *, timeout: float = 30, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def _test_database_url() -> str:
    db = settings.DATABASES["default"]
    auth = quote(db["USER"] or "")
    if db["PASSWORD"]:
        auth += ":" + quote(db["PASSWORD"])
    host = db["HOST"] or ""
    if host.startswith("/"):  # a unix socket directory (the embedded server)
        return f"postgresql://{auth}@/{quote(db['NAME'])}?host={quote(host)}"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgresql://{auth}@{host}{port}/{quote(db['NAME'])}"


class Broker:
    def __init__(self, url: str) -> None:
        self.url = url
        self.client = redis.Redis(unix_socket_path=unquote(url.removeprefix("redis+socket://")))

    def queued(self) -> int:
        """Messages waiting on every queue (one per kind of work, console/core/queues.py)."""
        return sum(self.client.llen(queue) for queue in (*QUEUES, "celery"))


@pytest.fixture
def live_broker(embedded_broker):
    """Publish jobs from this process to the embedded Redis instead of running them inline."""
    broker = Broker(embedded_broker)
    broker.client.flushdb()  # nothing left over from an earlier test
    previous = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = embedded_broker, False
    app._pool = None  # connection pools are made lazily from broker_url; drop any made before
    app.amqp._producer_pool = None
    yield broker
    app.conf.broker_url, app.conf.task_always_eager = previous
    app._pool = None
    app.amqp._producer_pool = None


class Worker:
    def __init__(self, process: subprocess.Popen, log: Path) -> None:
        self.process = process
        self.log = log

    def kill(self) -> None:
        """SIGKILL the worker and every process it started, mid-job: nothing gets to clean up."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def start_worker(transactional_db, live_broker, tmp_path):
    """start_worker(beat=False, pool="solo", queues=QUEUES, **env) -> Worker, ready to take jobs from `queues`.

    `beat` may be the path of a schedule file to share between workers (as two starts of `make run`
    share the data folder's)."""
    workers: list[Worker] = []

    def start(
        *,
        beat: bool | Path = False,
        pool: str = "solo",
        concurrency: int = 1,
        queues: tuple[str, ...] = QUEUES,
        **extra_env: str,
    ) -> Worker:
        name = f"w{len(workers)}-{uuid.uuid4().hex[:6]}"
        env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="console.settings",
            DATABASE_URL=_test_database_url(),
            CELERY_BROKER_URL=live_broker.url,
            CELERY_TASK_ALWAYS_EAGER="0",
            SECRET_KEY="jobs-tests",
            CONSOLE_DATA_DIR=str(tmp_path / "data"),
            CONN_MAX_AGE="0",
        )
        env.update({key: str(value) for key, value in extra_env.items()})
        command = [
            str(CELERY),
            "-A",
            "console",
            "worker",
            "--loglevel",
            "INFO",
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
            "-Q",
            ",".join(queues),
            "--hostname",
            f"{name}@localhost",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        if beat:
            schedule = beat if isinstance(beat, Path) else tmp_path / f"{name}-beat"
            command += ["--beat", "--schedule", str(schedule)]
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        worker = Worker(process, log)
        workers.append(worker)

        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"worker exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            return b" ready." in log.read_bytes()

        wait_for(ready, timeout=45, what=f"worker {name} to start")
        return worker

    yield start
    for worker in workers:
        worker.stop()
