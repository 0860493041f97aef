"""gunicorn's hooks for `make run` (console/run.py passes `--config python:console.gunicorn_config`).

A worker is forked from the preloaded master, so at start it shares nearly every page with it and
costs little. Serving grows it: an ingest batch of 500 decisions parses a 2 MB body, and the freed
memory stays in the worker's heap. After a 20,000-decision ingest each worker held about 145 MB
PSS at rest, the largest part of the console's memory after work (issue 36). So a worker that has
grown is replaced by a fresh fork, gracefully (it finishes its requests first, as after
--max-requests):

- once it has served nothing for WEB_IDLE_RECYCLE_SECONDS (default 20) and has grown by more than
  WEB_IDLE_RECYCLE_MB (default 16) since it started: the work is over, its memory need not stay;
- after any request that leaves it more than WEB_MAX_GROWTH_MB (default 300) above its start, so a
  worker never keeps a runaway size while traffic goes on.

Growth is the worker's resident size (/proc/self/statm) less its size when it started serving. A
daemon thread per worker looks every few seconds; the look is one small read, so it costs no
measurable CPU at rest. Setting either size to 0 turns that rule off.
"""

from __future__ import annotations

import gc
import os
import threading
import time

from console.env import env_int

_PAGE = os.sysconf("SC_PAGE_SIZE")
IDLE_SECONDS = env_int("WEB_IDLE_RECYCLE_SECONDS", 20, minimum=1, maximum=86_400)
IDLE_GROWTH_MB = env_int("WEB_IDLE_RECYCLE_MB", 16, minimum=0, maximum=1_000_000)
MAX_GROWTH_MB = env_int("WEB_MAX_GROWTH_MB", 300, minimum=0, maximum=1_000_000)
CHECK_EVERY = min(5.0, IDLE_SECONDS / 2)


def resident_mb() -> float:
    """This process's resident size in MB (the second field of /proc/self/statm, in pages)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE / 2**20


class _Growth:
    def __init__(self) -> None:
        self.start = resident_mb()
        self.last_request = time.monotonic()
        self.in_flight = 0
        self.lock = threading.Lock()

    def grown(self) -> float:
        return resident_mb() - self.start


def _retire(worker, reason: str) -> None:
    if worker.alive:
        worker.log.info("Worker %s grew (%s); replacing it with a fresh fork", worker.pid, reason)
        worker.alive = False  # the worker's loop ends gracefully, and the master forks a new one


def _watch_idle(worker, growth: _Growth) -> None:
    while worker.alive:
        time.sleep(CHECK_EVERY)
        with growth.lock:
            idle = growth.in_flight == 0 and time.monotonic() - growth.last_request >= IDLE_SECONDS
        if idle and (grown := growth.grown()) > IDLE_GROWTH_MB:
            _retire(worker, f"{grown:.0f} MB, idle {IDLE_SECONDS} s")
            return


def when_ready(server) -> None:
    """The application is loaded (--preload) and no worker is forked yet: its objects are moved out
    of the garbage collector's reach, so a worker's collections never write to them and their pages
    stay shared with the master (console/celery.py does the same for the Celery pools)."""
    gc.freeze()


def post_worker_init(worker) -> None:
    worker.console_growth = growth = _Growth()
    if IDLE_GROWTH_MB:
        threading.Thread(target=_watch_idle, args=(worker, growth), name="idle-recycle", daemon=True).start()


def pre_request(worker, req) -> None:
    growth = getattr(worker, "console_growth", None)
    if growth is not None:
        with growth.lock:
            growth.in_flight += 1


def post_request(worker, req, environ, resp) -> None:
    growth = getattr(worker, "console_growth", None)
    if growth is None:
        return
    with growth.lock:
        growth.in_flight -= 1
        growth.last_request = time.monotonic()
    if MAX_GROWTH_MB and (grown := growth.grown()) > MAX_GROWTH_MB:
        _retire(worker, f"{grown:.0f} MB after a request")
