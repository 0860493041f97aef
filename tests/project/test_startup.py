"""`make run` (console/run.py): the logins printed once, gunicorn's files kept out of the home
directory, and /healthz answering as soon as gunicorn listens."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.core.management import call_command

from console import run

ROOT = Path(__file__).resolve().parents[2]


def test_the_first_start_prints_the_logins_once_in_the_banner(db, settings, tmp_path, capsys):
    settings.DATA_DIR = tmp_path
    call_command(*run.DEMO_COMMAND, "--decisions", "5")
    loaded = capsys.readouterr().out
    logins = (tmp_path / "demo-logins.txt").read_text().splitlines()
    assert logins and "imported labels" in loaded
    assert not any(line in loaded for line in logins)
    banner = run._banner("127.0.0.1", 8000, tmp_path)
    assert all(banner.count(line) == 1 for line in logins)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_gunicorn_answers_health_right_after_listening_and_leaves_home_alone(tmp_path):
    port = _free_port()
    home = tmp_path / "home"
    home.mkdir()
    log = tmp_path / "gunicorn.log"
    env = dict(os.environ, HOME=str(home), DJANGO_SETTINGS_MODULE="console.settings", WEB_WORKERS="2")
    with log.open("w") as out:
        process = subprocess.Popen(
            run.web_command("127.0.0.1", port), env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 120
        while "Listening at" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        listening = time.monotonic()
        while True:
            try:
                # 200 or 503 (no broker here): either way the application answered.
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30)
            except urllib.error.HTTPError:
                pass
            except urllib.error.URLError:
                time.sleep(0.05)
                continue
            break
        answered_after = time.monotonic() - listening
        long_url = f"http://127.0.0.1:{port}/api/v1/routes/x/decisions?q=" + "a" * 20_000
        with pytest.raises(urllib.error.HTTPError) as too_long:
            urllib.request.urlopen(long_url, timeout=30)
        # The application's 414 in the API's envelope, not gunicorn's HTML page.
        assert too_long.value.code == 414
        assert json.loads(too_long.value.read())["error"]["code"] == "uri_too_long"
    finally:
        process.terminate()
        process.wait(timeout=30)
    # Without --preload the first request imported SciPy and statsmodels: about 6 s on an idle machine.
    assert answered_after < 2.0, f"/healthz answered {answered_after:.1f} s after gunicorn listened"
    assert list(home.iterdir()) == []  # no ~/.gunicorn control socket


def _answers(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False
    return True


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_ctrl_c_on_make_run_stops_every_gunicorn_process(tmp_path):
    """Ctrl-C signals the terminal's whole process group; a gunicorn worker that got it from the
    terminal and from its master at once used to hang and outlive everything (about one start in
    two: the test starts and stops twice)."""
    for _ in range(2):
        _start_and_interrupt(tmp_path)


def _start_and_interrupt(tmp_path) -> None:
    import signal

    port = _free_port()
    env = dict(
        os.environ, HOME=str(tmp_path), CONSOLE_DEMO="0", PORT=str(port), WEB_WORKERS="2", WORKER_CONCURRENCY="1"
    )
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    process = subprocess.Popen(
        [os.sys.executable, "-m", "console.run"],
        env=env,
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    marker = f"--bind 127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not _answers(port):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
        deadline = time.monotonic() + 30  # the second worker may still be forking on a loaded machine
        while len(_processes_mentioning(marker)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_processes_mentioning(marker)) == 3  # master and two workers
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        process.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _processes_mentioning(marker) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _processes_mentioning(marker) == []
    finally:
        for pid in _processes_mentioning(marker):
            os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def test_stopping_a_killed_worker_ends_what_it_left_in_its_group():
    # A stand-in worker: its shell leads a group and starts a child that would outlive it.
    worker = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE, process_group=0)
    orphan_pid = int(worker.stdout.readline())
    os.kill(worker.pid, signal.SIGKILL)  # the leader alone, as the OOM killer would
    worker.wait(10)
    assert _alive(orphan_pid)
    run.stop_group(worker, timeout=5)
    deadline = time.monotonic() + 10
    while _alive(orphan_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(orphan_pid)


# A stand-in worker in Python: it leads its own group (as `make run` starts each worker), starts a
# child that ignores SIGTERM and has a sleeping child of its own, prints both pids, and exits on
# SIGTERM without stopping them, as a worker whose pool or beat did not go down with it would.
_LEADER = """
import os, signal, subprocess, sys, time
grandchild = subprocess.Popen(
    [sys.executable, "-c",
     "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
     "p = subprocess.Popen(['sleep', '300']); print(p.pid, flush=True); time.sleep(300)"],
    stdout=subprocess.PIPE, text=True,
)
# The handler goes in before the pids are printed: the test sends SIGTERM as soon as it reads them.
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
print(grandchild.pid, grandchild.stdout.readline().strip(), flush=True)
time.sleep(300)
"""


def _group_members(pgid: int) -> list[int]:
    """The live processes of a process group, read from /proc (zombies are not alive)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def test_stopping_a_running_worker_leaves_no_process_of_its_group_alive():
    worker = subprocess.Popen([os.sys.executable, "-c", _LEADER], stdout=subprocess.PIPE, text=True, process_group=0)
    try:
        child_pid, grandchild_pid = map(int, worker.stdout.readline().split())
        assert set(_group_members(worker.pid)) == {worker.pid, child_pid, grandchild_pid}
        run.stop_group(worker, timeout=5)
        assert worker.returncode == 0  # it took the SIGTERM and left its descendants behind
        deadline = time.monotonic() + 10
        while _group_members(worker.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _group_members(worker.pid) == []
    finally:
        for pid in _group_members(worker.pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False
