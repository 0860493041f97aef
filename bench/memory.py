"""Memory at rest: `make run` (web, worker, beat) idle over 100,000 decisions, summed PSS.

Starts `python -m console.run` (console/run.py: gunicorn and a Celery worker with beat, as `make
run` does, with its default pool sizes unless WEB_WORKERS, WEB_THREADS or CELERY_CONCURRENCY are
set) against the benchmark database holding 100,000 decisions (loaded once with COPY, as
bench/stats.py loads them), asks each page kind once so the processes have served a request, waits
until they are at rest (together under 5% of a core for 2 s: the background work on the loaded
decisions is done), lets them idle, then sums PSS (proportional set size: each shared page counted
once across the processes that share it) over every process console/run.py started, read from
/proc/<pid>/smaps_rollup. RSS is printed beside it (it counts shared pages once per process). The
embedded PostgreSQL and Redis are reported on their own line: `make run` starts them too, but their
size is PostgreSQL's own configuration, not the console's. Target: the console's processes <= 700
MB PSS.

    .venv/bin/python bench/memory.py [--decisions 100000] [--idle 20] [--quick] [--data-dir DIR]

`--quick` loads 5,000 decisions and idles 3 s: seconds, same code paths.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from common import ROOT, add_arguments, bench_reviewer, data_dir, free_port, report, setup_django
from stats import DataSet, ensure_loaded

DECISIONS, QUICK_DECISIONS = 100_000, 5_000
IDLE, QUICK_IDLE = 20.0, 3.0
TARGET_MB = 700
# At rest: every process console/run.py started, together, used under this share of one core for
# this long (the minute sweepers' short passes aside, an idle console uses next to nothing).
REST_SHARE, REST_WINDOW, REST_TIMEOUT = 0.05, 2.0, 600.0


def children_of() -> dict[int, list[int]]:
    """Every process's children, from /proc/<pid>/stat (the parent pid is the 4th field)."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, found, todo = children_of(), [], [pid]
    while todo:
        current = todo.pop()
        for child in tree.get(current, []):
            found.append(child)
            todo.append(child)
    return found


def memory_kb(pid: int) -> tuple[int, int]:
    """(PSS, RSS) in kB from /proc/<pid>/smaps_rollup; (0, 0) for a process that has gone."""
    values = {"Pss:": 0, "Rss:": 0}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, *rest = line.split()
            if key in values:
                values[key] = int(rest[0])
    except OSError:
        pass
    return values["Pss:"], values["Rss:"]


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of the processes (fields 14 and 15 of /proc/<pid>/stat)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15, counted from 1
    return ticks / os.sysconf("SC_CLK_TCK")


def wait_at_rest(process: subprocess.Popen, timeout: float = REST_TIMEOUT) -> float | None:
    """Seconds until the console's processes use under REST_SHARE of a core for REST_WINDOW seconds:
    the after-ingest and sweeping work on the loaded decisions is done. None if that never happens
    within `timeout` (the figure is then not a figure at rest, and the report says so)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        pids = [process.pid, *descendants(process.pid)]
        before = cpu_seconds(pids)
        time.sleep(REST_WINDOW)
        if cpu_seconds(pids) - before <= REST_SHARE * REST_WINDOW:
            return time.monotonic() - started
    return None


def command_name(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [Path(a.decode(errors="replace")).name for a in argv if a]
    for known in ("gunicorn", "celery", "postgres", "redis-server"):
        if any(known in w for w in words):
            return known
    return words[0] if words else "?"


def summed(pids: list[int]) -> tuple[float, float, dict[str, tuple[int, float]]]:
    """Total PSS and RSS in MB, and per kind of process (gunicorn, celery, ...) its count and PSS."""
    pss = rss = 0
    kinds: dict[str, tuple[int, float]] = {}
    for pid in pids:
        p, r = memory_kb(pid)
        if not p and not r:
            continue
        pss, rss = pss + p, rss + r
        name = command_name(pid)
        count, kind_pss = kinds.get(name, (0, 0.0))
        kinds[name] = (count + 1, kind_pss + p / 1024)
    return pss / 1024, rss / 1024, kinds


def wait_ready(url: str, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=2)
            return
        except urllib.error.HTTPError:
            return  # an answer, even 503, means gunicorn serves
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("console/run.py did not start serving") from None
            time.sleep(0.5)


def warm(url: str, token: str, route: str) -> None:
    """One request of each kind a reviewer makes, so the processes are at rest after serving."""
    for path in (
        "/healthz",
        f"/api/v1/routes/{route}/operating-points?cutoffs=0.5,0.9",
        f"/api/v1/routes/{route}/calibration?bins=10",
        "/api/v1/routes",
        "/api/v1/decisions/1",
    ):
        request = urllib.request.Request(url + path, headers={"Authorization": f"Token {token}"})
        try:
            urllib.request.urlopen(request, timeout=120).read()
        except urllib.error.HTTPError:
            pass  # a 4xx still exercised the stack


def server_pids(folder: Path) -> list[int]:
    """The embedded PostgreSQL (postmaster and its backends) and Redis of the data folder."""
    pids = []
    postmaster = folder / "pg" / "postmaster.pid"
    if postmaster.exists():
        pid = int(postmaster.read_text().split()[0])
        pids += [pid, *descendants(pid)]
    redis_pid = folder / "redis.pid"
    if redis_pid.exists():
        pids.append(int(redis_pid.read_text().split()[0]))
    return pids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, help=f"default {DECISIONS:,} ({QUICK_DECISIONS:,} with --quick)")
    parser.add_argument(
        "--idle", type=float, help=f"seconds idle before reading (default {IDLE:g}; {QUICK_IDLE:g} with --quick)"
    )
    add_arguments(parser)
    args = parser.parse_args()
    data = DataSet(args.decisions or (QUICK_DECISIONS if args.quick else DECISIONS))
    idle = args.idle if args.idle is not None else (QUICK_IDLE if args.quick else IDLE)
    folder = data_dir(args)
    database_url = setup_django(folder)
    ensure_loaded(database_url, data, folder)

    from audit.services import Actor
    from console import embedded
    from console.accounts import services as accounts

    token = accounts.token_issue(actor=Actor.system("bench"), user=bench_reviewer()).key
    port = free_port()
    env = dict(
        os.environ,
        CONSOLE_DATA_DIR=str(folder),
        CONSOLE_DEMO="0",
        PORT=str(port),
        HOST="127.0.0.1",
        DATABASE_URL=embedded.postgres_url(folder),  # the app role, as make run's own processes use
        DATABASE_OWNER_URL=embedded.postgres_owner_url(folder),
    )  # for its `migrate` only
    log = folder / "memory-run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "console.run"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process)
        warm(url, token, data.route)
        rested = wait_at_rest(process)
        time.sleep(idle)
        pids = [process.pid, *descendants(process.pid)]
        pss, rss, kinds = summed(pids)
        server_pss, server_rss, _ = summed(server_pids(folder))
    finally:
        process.terminate()  # console/run.py stops its children on SIGTERM
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            pass
        try:  # anything of its session still there (a worker slow to stop) goes too
            os.killpg(process.pid, 9)
        except ProcessLookupError:
            pass
    processes = ", ".join(f"{count} {name} ({kind_pss:.0f} MB)" for name, (count, kind_pss) in sorted(kinds.items()))
    settings = (
        ", ".join(
            f"{key}={os.environ[key]}"
            for key in ("WEB_WORKERS", "WEB_THREADS", "CELERY_CONCURRENCY")
            if os.environ.get(key)
        )
        or "defaults"
    )
    report(
        "memory",
        [
            f"decisions: {data.decisions:,}, idle {idle:g} s after one request of each kind; pools: {settings}",
            (
                f"at rest after {rested:.0f} s (under {REST_SHARE:.0%} of a core for {REST_WINDOW:g} s)"
                if rested is not None
                else f"NOT at rest within {REST_TIMEOUT:.0f} s: the figure includes work in progress"
            ),
            f"processes started by console/run.py: {processes}",
            f"console, PSS (RSS)           : {pss:7.0f} MB ({rss:,.0f} MB)",
            f"PostgreSQL + Redis, PSS (RSS): {server_pss:7.0f} MB ({server_rss:,.0f} MB)",
            f"console PSS <= {TARGET_MB} MB       : {'PASS' if pss <= TARGET_MB else 'FAIL'}",
            f"load average                 : {os.getloadavg()[0]:.2f}",
        ],
    )


if __name__ == "__main__":
    main()
