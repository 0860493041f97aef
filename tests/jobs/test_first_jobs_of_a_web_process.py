"""The first jobs a web process queues: its threads may queue them at the same moment.

A gunicorn worker has not imported the apps' tasks modules when it starts; `enqueue` imports them
on first need. Two threads of one worker once did that together and the second found its task
missing (NotRegistered), failing that ingest batch. Each case runs in a fresh interpreter, where
nothing has imported the tasks yet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Eight threads queue the dictionary build at once. The import of the tasks modules is slowed down
# so that every thread reaches it before the first is done, and its concurrency is recorded.
SCRIPT = textwrap.dedent(
    """
    import json, os, threading, time
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django
    django.setup()
    from celery import current_app
    from console.core import jobs

    assert "ledger.passage_dictionary_build" not in current_app.tasks
    jobs._embedded_broker_absent = lambda: True  # nothing is published: only the look-up runs
    loader = current_app.loader
    real = loader.import_default_modules
    lock, inside, most = threading.Lock(), [0], [0]

    def slow_import():
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.2)
        try:
            return real()
        finally:
            with lock:
                inside[0] -= 1

    loader.import_default_modules = slow_import
    errors, barrier = [], threading.Barrier(8)

    def first_job():
        barrier.wait()
        try:
            jobs.enqueue("ledger.passage_dictionary_build")
        except Exception as error:
            errors.append(repr(error))

    threads = [threading.Thread(target=first_job) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"errors": errors, "at_once": most[0]}))
    """
)


def test_threads_queueing_their_first_jobs_together_all_find_their_task():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"errors": [], "at_once": 1}
