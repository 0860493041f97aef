"""What keeps `make run` small at rest: heavy libraries load only where used, pools are sized from
the environment, and workers that grow are replaced (bench/memory.py measures the result)."""

import os
import subprocess
import sys
from pathlib import Path

from console.run import web_command, worker_commands

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
    assert trials[trials.index("--concurrency") + 1] == "1"
