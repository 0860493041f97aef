"""One scheduler at a time: beat dies with the worker that started it, and holds a lock while it runs.

`make run` embeds beat in the background worker (`celery worker --beat`), where it is a child
process of the worker. A worker killed with SIGKILL cannot stop it: the orphan kept scheduling with
parent 1, and the next start ran a second scheduler beside it (every periodic job sent twice).
Two guards, both taken when beat starts (the `beat_init` signal, console/celery.py):

- the kernel sends beat SIGTERM when its parent dies (Linux `PR_SET_PDEATHSIG`);
- beat takes an exclusive lock on a file beside its schedule file before its first send, and
  waits for it while another scheduler holds it; the kernel releases the lock when the holder's
  process ends, however it ends.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import logging
import signal
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_held: list = []  # the open lock file, kept for the life of the process


def die_with_parent() -> bool:
    """Ask the kernel for SIGTERM when the parent process ends; False where that is not offered."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0


def lock_path(schedule_filename: str) -> Path:
    return Path(f"{schedule_filename}.lock")


def hold_scheduler_lock(schedule_filename: str) -> Path:
    """Take the scheduler's lock, waiting while another beat holds it. Returns the lock's path."""
    path = lock_path(schedule_filename)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        logger.warning("Another scheduler holds %s; this beat waits for it to end before sending.", path)
        fcntl.flock(handle, fcntl.LOCK_EX)
        logger.warning("The scheduler lock %s is free: this beat takes over.", path)
    _held.append(handle)
    return path
