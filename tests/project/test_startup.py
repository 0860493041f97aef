"""`make run` (console/run.py): the logins printed once, gunicorn's files kept out of the home
directory, and /healthz answering as soon as gunicorn listens."""

import os
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
        process = subprocess.Popen(run.gunicorn_command("127.0.0.1", port), env=env, cwd=ROOT,
                                   stdout=out, stderr=subprocess.STDOUT)
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
    finally:
        process.terminate()
        process.wait(timeout=30)
    # Without --preload the first request imported SciPy and statsmodels: about 6 s on an idle machine.
    assert answered_after < 2.0, f"/healthz answered {answered_after:.1f} s after gunicorn listened"
    assert list(home.iterdir()) == []  # no ~/.gunicorn control socket
