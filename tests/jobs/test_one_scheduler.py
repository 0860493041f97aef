"""One scheduler at a time (console/beat_guard.py): beat dies with a worker killed by SIGKILL, and a
second beat on the same schedule file sends nothing while the first runs."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from console.core.queues import BACKGROUND_QUEUES
from tests.jobs.conftest import wait_for

pytestmark = pytest.mark.slow

SENT = b"Scheduler: Sending due task"


def _sends(worker) -> int:
    return worker.log.read_bytes().count(SENT)


def _beat_of(worker) -> psutil.Process:
    def found():
        children = psutil.Process(worker.process.pid).children(recursive=True)
        return next((c for c in children if "beat" in " ".join(c.cmdline())), None)

    return wait_for(found, timeout=30, what="the embedded beat process")


def test_beat_ends_with_a_worker_killed_by_sigkill(start_worker, tmp_path):
    worker = start_worker(beat=True, queues=BACKGROUND_QUEUES, JOBS_SWEEP_SECONDS="1")
    beat = _beat_of(worker)
    wait_for(lambda: _sends(worker) >= 3, timeout=30, what="beat to send its sweeps")
    os.kill(worker.process.pid, signal.SIGKILL)  # the worker alone, as the kernel's OOM killer would
    worker.process.wait(10)
    wait_for(lambda: not beat.is_running() or beat.status() == psutil.STATUS_ZOMBIE, timeout=15, what="beat to end")
    after = _sends(worker)
    time.sleep(3)  # three sweep intervals: an orphan beat would have sent again by now
    assert _sends(worker) == after


def test_a_second_beat_on_the_same_schedule_waits_for_the_first(start_worker, tmp_path):
    schedule = tmp_path / "data" / "celerybeat-schedule"
    first = start_worker(beat=schedule, queues=BACKGROUND_QUEUES, JOBS_SWEEP_SECONDS="1")
    wait_for(lambda: _sends(first) >= 2, timeout=30, what="the first beat to send")
    second = start_worker(beat=schedule, queues=BACKGROUND_QUEUES, JOBS_SWEEP_SECONDS="1")
    wait_for(lambda: b"Another scheduler holds" in second.log.read_bytes(), timeout=30, what="the second to wait")
    time.sleep(3)
    assert _sends(second) == 0  # three intervals in which two schedulers would have sent twice
    first.kill()  # SIGKILL to the whole group: the kernel frees the lock with its holder
    wait_for(lambda: _sends(second) >= 2, timeout=30, what="the second beat to take over")
    assert b"takes over" in second.log.read_bytes()
