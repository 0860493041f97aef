"""An idle `make run` does no work of its own: the supervisor sleeps on signals, the workers wait on
the broker with long blocking pops and send nothing to each other, the broker's timer ticks once a
second. bench/memory.py measures the result (idle CPU over a minute, target 2% of a core)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from kombu import Connection

from console import embedded
from console.run import IDLE_QUIET_WORKER_FLAGS, web_command, worker_commands

ROOT = Path(__file__).resolve().parents[2]


def test_both_workers_start_without_gossip_mingle_or_the_event_heartbeat(tmp_path):
    for command in worker_commands(tmp_path):
        assert set(IDLE_QUIET_WORKER_FLAGS) <= set(command)
    assert set(IDLE_QUIET_WORKER_FLAGS) == {"--without-gossip", "--without-mingle", "--without-heartbeat"}


def test_an_idle_worker_blocks_on_the_broker_for_many_seconds_a_poll(settings):
    # kombu's Redis transport turns polling_interval into the BRPOP timeout; its default is 1 s.
    connection = Connection(settings.CELERY_BROKER_URL, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS)
    assert connection.transport.brpop_timeout == settings.BROKER_POLL_SECONDS >= 10
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["unacked_restore_interval"] >= 60


def test_the_embedded_broker_ticks_once_a_second(tmp_path):
    process = embedded.start_redis(tmp_path)
    try:
        assert "hz 1" in (tmp_path / "redis.conf").read_text().splitlines()
        import redis

        client = redis.Redis(unix_socket_path=str(embedded.redis_socket(tmp_path)))
        assert client.config_get("hz") == {"hz": "1"}
        client.close()
    finally:
        embedded.stop_process(process)


def test_gunicorn_workers_beat_in_memory_when_dev_shm_exists():
    command = web_command("127.0.0.1", 8000)
    if Path("/dev/shm").is_dir():
        assert command[command.index("--worker-tmp-dir") + 1] == "/dev/shm"


_SUPERVISOR = textwrap.dedent(
    """
    import subprocess, sys, time
    from console.run import wait_for_stop
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(float(%r))"])
    print("waiting", flush=True)
    started = time.monotonic()
    wait_for_stop([child], check_every=float(%r))
    print(f"returned {time.monotonic() - started:.1f} child {child.poll()}", flush=True)
    child.kill()
    """
)


def _supervisor(child_seconds: float, check_every: float) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", _SUPERVISOR % (str(child_seconds), str(check_every))],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "waiting"
    return process


def _wait_until_taken_by_wait(pid: int, signum: int, timeout: float = 30.0) -> None:
    """Wait until the supervisor blocks `signum` or sleeps in sigtimedwait (which unblocks the signals it
    waits for while it sleeps, so /proc shows an empty mask there). A signal sent earlier takes its
    default action: a fixed sleep before sending left that to chance on a loaded machine."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        blocked = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
        if blocked & (1 << (signum - 1)) or "sigtimedwait" in Path(f"/proc/{pid}/wchan").read_text():
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never blocked signal {signum}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_supervisor_wakes_when_told_to_stop(signum):
    process = _supervisor(child_seconds=120, check_every=120)
    _wait_until_taken_by_wait(process.pid, signum)
    process.send_signal(signum)
    output = process.communicate(timeout=60)[0]
    assert output.startswith("returned") and output.strip().endswith("child None"), output


def test_the_supervisor_wakes_when_a_child_exits_not_at_its_safety_timeout():
    process = _supervisor(child_seconds=1, check_every=120)
    output = process.communicate(timeout=60)[0]
    said, returned = output.strip().splitlines()
    assert said.endswith("exited with 0; stopping.")
    # SIGCHLD ends the wait: well before the 120 s safety timeout (a wide margin, not a timing test).
    assert float(returned.split()[1]) < 60 and returned.endswith("child 0"), output
