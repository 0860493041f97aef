"""What keeps `make run` small at rest: heavy libraries load only where used, pools are sized from
the environment, and workers that grow are replaced (bench/memory.py measures the result)."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from console.run import web_command, worker_commands, worker_environments

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scipy", "statsmodels", "sklearn", "pandas")


def test_web_and_worker_processes_start_without_the_heavy_libraries(tmp_path):
    # A fresh interpreter: this test session has long imported them for the statistics tests.
    code = (
        "import django, sys; django.setup(); import console.wsgi; from console.celery import app; "
        "app.loader.import_default_modules(); "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="console.settings",
        CONSOLE_DATA_DIR=str(tmp_path),
        DATABASE_URL="postgresql://nobody@/nothing",
        CELERY_BROKER_URL="redis://localhost:1/0",
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_the_statistics_still_load_them_when_used():
    from console.stats.intervals import proportion_interval

    assert round(proportion_interval(5, 10, method="clopper_pearson").low, 4) == 0.1871


def test_pools_are_sized_from_the_environment_and_grown_workers_recycled(monkeypatch, tmp_path):
    monkeypatch.setenv("WEB_WORKERS", "3")
    monkeypatch.setenv("WEB_THREADS", "2")
    monkeypatch.setenv("CELERY_CONCURRENCY", "5")
    monkeypatch.setenv("WEB_MAX_REQUESTS", "500")
    web = web_command("127.0.0.1", 8000)
    assert web[web.index("--workers") + 1] == "3" and web[web.index("--threads") + 1] == "2"
    assert web[web.index("--max-requests") + 1] == "500" and web[web.index("--max-requests-jitter") + 1] == "50"
    assert "--preload" in web
    monkeypatch.setenv("CELERY_BACKGROUND_CONCURRENCY", "3")
    monkeypatch.setenv("CELERY_TRIALS_CONCURRENCY", "2")
    gradable, background, trials = worker_commands(tmp_path)
    assert gradable[gradable.index("--concurrency") + 1] == "5"
    assert background[background.index("--concurrency") + 1] == "3"
    assert trials[trials.index("--concurrency") + 1] == "2"

    from django.conf import settings

    assert settings.CELERY_WORKER_MAX_TASKS_PER_CHILD > 0 and settings.CELERY_WORKER_MAX_MEMORY_PER_CHILD > 0


def test_pool_defaults(monkeypatch, tmp_path):
    for name in (
        "WEB_WORKERS",
        "WEB_THREADS",
        "CELERY_CONCURRENCY",
        "WORKER_CONCURRENCY",
        "CELERY_BACKGROUND_CONCURRENCY",
        "CELERY_TRIALS_CONCURRENCY",
        "WEB_MAX_REQUESTS",
    ):
        monkeypatch.delenv(name, raising=False)
    web = web_command("127.0.0.1", 8000)
    assert (web[web.index("--workers") + 1], web[web.index("--threads") + 1]) == ("2", "4")
    gradable, background, trials = worker_commands(tmp_path)
    assert gradable[gradable.index("--concurrency") + 1] == "2"
    assert background[background.index("--concurrency") + 1] == "1"
    # two: a trial and an embedder refit, which share that worker, never wait for each other
    assert trials[trials.index("--concurrency") + 1] == "2"


def test_make_run_pools_shrink_to_nothing_when_idle_and_grow_on_demand(monkeypatch, tmp_path):
    for name in ("CELERY_CONCURRENCY", "WORKER_CONCURRENCY", "CELERY_IDLE_PROCESSES", "CELERY_IDLE_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    gradable, background, trials = worker_commands(tmp_path)
    assert gradable[gradable.index("--autoscale") + 1] == "2,0"
    assert background[background.index("--autoscale") + 1] == "1,0"
    assert trials[trials.index("--autoscale") + 1] == "2,0"
    assert all(environment["AUTOSCALE_KEEPALIVE"] == "10" for environment in worker_environments())
    monkeypatch.setenv("CELERY_IDLE_PROCESSES", "1")
    monkeypatch.setenv("CELERY_IDLE_SECONDS", "45")
    gradable, _, _ = worker_commands(tmp_path)
    assert gradable[gradable.index("--autoscale") + 1] == "2,1"
    assert all(environment["AUTOSCALE_KEEPALIVE"] == "45" for environment in worker_environments())


class _Worker:
    def __init__(self):
        self.alive, self.pid, self.log = True, 1, SimpleNamespace(info=lambda *args: None)


def test_a_web_worker_that_grew_is_replaced_once_it_idles_and_not_while_it_serves(monkeypatch):
    from console import gunicorn_config

    worker = _Worker()
    gunicorn_config.post_worker_init(worker)
    growth = worker.console_growth
    growth.start -= 500  # as if it had grown by 500 MB since it started
    gunicorn_config.pre_request(worker, None)
    growth.last_request -= 3600
    monkeypatch.setattr(gunicorn_config, "CHECK_EVERY", 0.01)
    thread = threading.Thread(target=gunicorn_config._watch_idle, args=(worker, growth), daemon=True)
    thread.start()
    time.sleep(0.1)
    assert worker.alive  # a request in flight: not idle, however long ago the last one ended
    monkeypatch.setattr(gunicorn_config, "MAX_GROWTH_MB", 0)
    gunicorn_config.post_request(worker, None, {}, None)
    growth.last_request -= 3600
    thread.join(5)
    assert not worker.alive


def test_a_web_worker_that_grows_past_the_most_is_replaced_after_its_request(monkeypatch):
    from console import gunicorn_config

    monkeypatch.setattr(gunicorn_config, "IDLE_GROWTH_MB", 0)  # no idle watcher here
    worker = _Worker()
    gunicorn_config.post_worker_init(worker)
    gunicorn_config.pre_request(worker, None)
    gunicorn_config.post_request(worker, None, {}, None)
    assert worker.alive  # a request that grew nothing
    worker.console_growth.start -= gunicorn_config.MAX_GROWTH_MB + 1
    gunicorn_config.pre_request(worker, None)
    gunicorn_config.post_request(worker, None, {}, None)
    assert not worker.alive


def test_make_run_loads_the_hooks_that_replace_grown_web_workers():
    web = web_command("127.0.0.1", 8000)
    assert web[web.index("--config") + 1] == "python:console.gunicorn_config"


_SHOW_BUFFERS = """
import sys
from pathlib import Path
import psycopg
from console import embedded
with psycopg.connect(embedded.postgres_superuser_url(Path(sys.argv[1]))) as conn:
    print(conn.execute("SHOW shared_buffers").fetchone()[0], conn.execute("SHOW work_mem").fetchone()[0])
"""


def test_the_embedded_cluster_is_sized_for_a_shared_machine_from_its_first_start(tmp_path):
    env = dict(os.environ, CONSOLE_PG_SHARED_BUFFERS="24MB", CONSOLE_PG_WORK_MEM="2MB")
    result = subprocess.run(
        [sys.executable, "-c", _SHOW_BUFFERS, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["24MB", "2MB"]  # shared_buffers needed a restart, done on the first start


def test_the_embedded_cluster_defaults_to_small_buffers(monkeypatch):
    from console import embedded

    monkeypatch.delenv("CONSOLE_PG_SHARED_BUFFERS", raising=False)
    monkeypatch.delenv("CONSOLE_PG_WORK_MEM", raising=False)
    assert embedded.memory_settings() == {"shared_buffers": "32MB", "work_mem": "4MB"}


def test_what_the_web_master_and_the_worker_main_processes_loaded_is_frozen_before_they_fork():
    import gc

    from celery.signals import worker_ready

    from console import gunicorn_config
    from console.celery import _freeze_the_loaded_code

    assert _freeze_the_loaded_code in [receiver() for _, receiver in worker_ready.receivers]
    try:
        gunicorn_config.when_ready(None)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
