"""Memory and CPU at rest: `make run` (web, worker, beat) idle over 100,000 decisions.

Starts `python -m console.run` (console/run.py: gunicorn and two Celery workers, one with beat, as
`make run` does, with its default pool sizes unless WEB_WORKERS, WEB_THREADS or CELERY_CONCURRENCY
are set) against a database of its own holding 100,000 decisions (loaded once with COPY, as
bench/stats.py loads them, in a database beside the other benchmarks' so their data is not work for
this console's sweepers). The background work a console does on new decisions (span checks, pool
entry) is done first, in this process, with the same services the sweepers call; then it asks each
page kind once so the processes have served a request, waits until they are at rest (the broker's
queues empty and the processes together under 5% of a core for 2 s), and measures over the idle
window:

- memory: PSS (proportional set size: each shared page counted once across the processes that
  share it) summed over every process console/run.py started, from /proc/<pid>/smaps_rollup; RSS
  beside it. The embedded PostgreSQL and Redis are on their own line: `make run` starts them too,
  but their size is PostgreSQL's own configuration, not the console's. Target: <= 700 MB PSS.
- CPU: user and system time over the window of the same processes plus PostgreSQL and Redis, as a
  share of one core. Target: <= 2% in total (an idle console should not keep a fan running).

    .venv/bin/python bench/memory.py [--decisions 100000] [--idle 60] [--quick] [--data-dir DIR]

`--quick` loads 5,000 decisions and idles 10 s, and every wait is bounded in seconds: a console
that does not come to rest is reported and the benchmark exits 1 instead of waiting.

`--after-work` measures memory after the console has done the work itself (issue 36): console/run.py
starts on a fresh data folder (`<data folder>/after-work`, removed first), N decisions of
bench/storage.py's workload (a question of ~80 characters, an answer of ~200, 5 passages of ~500)
go in through `POST /api/v1/decisions` (2 clients, batches of 500), and the console's own workers
do everything that ingest sets off (span checks, pool entry, question vectors, the embedder fit and
the re-embedding behind it). Once every queue is empty and the processes are quiet for
SETTLE seconds, it waits `--idle` seconds and sums the PSS of every process console/run.py started
(gunicorn, the workers, beat, Redis) plus the embedded PostgreSQL and all its backends: one total,
target <= 750 MB (Label Studio's 803 MB, measured the same way, less a margin).

    .venv/bin/python bench/memory.py --after-work [--decisions 100000] [--idle 60]
"""

from __future__ import annotations

import argparse
import json
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
IDLE, QUICK_IDLE = 60.0, 10.0
TARGET_MB = 700
# Idle CPU target: every process of the console, PostgreSQL and Redis together, as a share of a core.
TARGET_IDLE_SHARE = 0.02
# At rest: the broker's queues are empty and every process console/run.py started, together, used
# under this share of one core for this long. Bounded: REST_TIMEOUT seconds (QUICK_REST_TIMEOUT with
# --quick), after which the benchmark reports that it never came to rest and exits 1.
REST_SHARE, REST_WINDOW, REST_TIMEOUT, QUICK_REST_TIMEOUT = 0.05, 2.0, 600.0, 60.0
# Seconds for console/run.py to migrate, start its processes and answer (QUICK_ with --quick).
START_TIMEOUT, QUICK_START_TIMEOUT = 300.0, 90.0
# Its own database in the data folder's server: the other benchmarks' decisions stay out of it.
DATABASE_NAME = "console_bench_memory"
# --after-work: the total (console, PostgreSQL with its backends, Redis) once idle after the ingest.
AFTER_WORK_TARGET_MB = 750
# At rest after work: the queues empty and the processes quiet over this many seconds in a row (a
# beat sweeper may find more a little after the last job ends), within AFTER_WORK_TIMEOUT seconds.
SETTLE, AFTER_WORK_TIMEOUT, QUICK_AFTER_WORK_TIMEOUT = 20.0, 3600.0, 300.0
POST_SLICE = 10_000  # decisions made and posted at a time, so the benchmark never holds 100,000


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


def queued_messages(folder: Path, *, embedded_broker: bool | None = None) -> int:
    """Messages waiting in the broker's queues or held unacknowledged by a worker (0 when the broker
    is not the embedded Redis of `folder`, whose state this cannot read)."""
    if embedded_broker is None:
        embedded_broker = not os.environ.get("CELERY_BROKER_URL")
    if not embedded_broker:
        return 0
    import redis

    from console import embedded
    from console.core.queues import QUEUES

    client = redis.Redis(unix_socket_path=str(embedded.redis_socket(folder)), socket_timeout=2)
    try:
        return sum(client.llen(queue) for queue in QUEUES) + client.hlen("unacked")
    finally:
        client.close()


def wait_at_rest(process: subprocess.Popen, folder: Path, timeout: float) -> float | None:
    """Seconds until the broker holds no message and the console's processes use under REST_SHARE of
    a core for REST_WINDOW seconds: the work on the loaded decisions is done. None if that does not
    happen within `timeout` (the caller reports it and stops)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        pids = [process.pid, *descendants(process.pid)]
        before = cpu_seconds(pids)
        time.sleep(REST_WINDOW)
        if cpu_seconds(pids) - before <= REST_SHARE * REST_WINDOW and queued_messages(folder) == 0:
            return time.monotonic() - started
    return None


def idle_cpu(pids: list[int], seconds: float) -> dict[str, float]:
    """CPU time over `seconds` of idling, as a share of one core, per kind of process (celery,
    gunicorn, postgres, ...)."""
    before = {pid: cpu_seconds([pid]) for pid in pids}
    time.sleep(seconds)
    shares: dict[str, float] = {}
    for pid in pids:
        name = command_name(pid)
        shares[name] = shares.get(name, 0.0) + (cpu_seconds([pid]) - before[pid]) / seconds
    return shares


def own_database(folder: Path) -> tuple[str, str]:
    """The owner's and the app role's URLs of this benchmark's database in the folder's embedded
    server, created on first use (from template1, which has pgvector)."""
    import psycopg
    from psycopg import sql

    from console import embedded

    owner = embedded.postgres_owner_url(folder)
    with psycopg.connect(owner, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE_NAME)))
    return (
        embedded._with_database(owner, DATABASE_NAME),
        embedded._with_database(embedded.postgres_url(folder), DATABASE_NAME),
    )


def catch_up() -> tuple[int, int]:
    """The after-ingest work on decisions loaded by COPY, done here with the services the sweepers
    call (span checks, then pool entry), so the console starts with nothing owed: (verified, entered)."""
    from django.utils import timezone

    from audit.services import Actor
    from console.verification import selectors as verification_selectors
    from console.verification import services as verification
    from grading.services import pool

    actor = Actor.system("bench")
    verified = entered = 0
    previous: list[int] = []
    while ids := verification_selectors.decisions_awaiting_verification(
        ingested_before=timezone.now(), limit=2_000, newest=None
    ):
        if ids == previous:  # the verifier left them without a result: the sweepers would too
            break
        verification.decisions_verify(actor=actor, decision_ids=ids)
        verified, previous = verified + len(ids), ids
    while True:
        result = pool.grading_pool_enter(actor=actor)
        handled = result.entered + result.not_sampled
        entered += handled
        if handled < pool.POOL_BATCH:
            return verified, entered


def command_name(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    # Redis and PostgreSQL rewrite their process titles ("redis-server unixsocket:...", "postgres:
    # checkpointer"), so the known names are looked for anywhere in the command line.
    whole = b" ".join(argv).decode(errors="replace")
    for known in ("gunicorn", "celery", "postgres", "redis-server"):
        if known in whole:
            return known
    words = [Path(a.decode(errors="replace")).name for a in argv if a]
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


def wait_ready(url: str, process: subprocess.Popen, timeout: float) -> None:
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
    # The embedded Redis writes no pid file; its process title names the folder's socket.
    title = f"unixsocket:{folder / 'redis.sock'}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"redis-server" in cmdline and title in cmdline:
                pids.append(int(entry.name))
    return pids


def settled(process: subprocess.Popen, folder: Path, timeout: float, settle: float) -> float | None:
    """Seconds until the queues are empty and the console's processes quiet (under REST_SHARE of a
    core) for `settle` seconds in a row, checked every REST_WINDOW; None past `timeout`."""
    started = time.monotonic()
    quiet_since = None
    while time.monotonic() - started < timeout:
        pids = [process.pid, *descendants(process.pid), *server_pids(folder)]
        before = cpu_seconds(pids)
        time.sleep(REST_WINDOW)
        quiet = cpu_seconds(pids) - before <= REST_SHARE * REST_WINDOW
        if quiet and queued_messages(folder, embedded_broker=True) == 0:
            quiet_since = quiet_since or time.monotonic() - REST_WINDOW
            if time.monotonic() - quiet_since >= settle:
                return quiet_since - started
        else:
            quiet_since = None
    return None


def work_done(route_id: int) -> dict[str, int]:
    """What the console's workers did with the run's decisions, read from the database."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT (SELECT count(*) FROM ledger_decision WHERE route_id = %(route)s),
                   (SELECT count(*) FROM verification_decisionsupport),
                   (SELECT count(*) FROM grading_gradingitem WHERE NOT is_gold),
                   (SELECT count(*) FROM similarity_questionvector),
                   (SELECT count(*) FROM similarity_embedderversion)
            """,
            {"route": route_id},
        )
        decisions, checked, pooled, vectors, fits = cursor.fetchone()
    connection.close()  # its backend would otherwise be counted with PostgreSQL's
    return {
        "decisions": decisions,
        "span-checked": checked,
        "pool items": pooled,
        "question vectors": vectors,
        "embedder versions": fits,
    }


def after_work(args: argparse.Namespace) -> int:
    """--after-work: ingest through the API into a fresh folder, let the console's own workers finish,
    idle, then sum the PSS of everything (see the module's docstring)."""
    import shutil

    from ingest import post_all
    from storage import workload

    count = args.decisions or (QUICK_DECISIONS if args.quick else DECISIONS)
    idle = args.idle if args.idle is not None else (QUICK_IDLE if args.quick else IDLE)
    folder = data_dir(args) / "after-work"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    port = free_port()
    env = dict(os.environ, CONSOLE_DATA_DIR=str(folder), CONSOLE_DEMO="0", PORT=str(port), HOST="127.0.0.1")
    env.setdefault("API_TOKEN_RATE_PER_MINUTE", "0")  # the benchmark's token posts 200 batches a minute
    for key in ("DATABASE_URL", "DATABASE_OWNER_URL", "CELERY_BROKER_URL", "BENCH_DATABASE_URL"):
        env.pop(key, None)  # make run's own embedded services, in the fresh folder
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
        wait_ready(url, process, timeout=QUICK_START_TIMEOUT if args.quick else START_TIMEOUT)
        # This process joins the same server and broker (no Redis of its own) to set up the
        # integrator and read what was done; it holds no connection while memory is measured.
        from console import embedded

        os.environ.update(CONSOLE_DATA_DIR=str(folder), DJANGO_SETTINGS_MODULE="console.settings")
        os.environ["DATABASE_URL"] = embedded.postgres_owner_url(folder)
        os.environ["CELERY_BROKER_URL"] = embedded.redis_url(folder)
        import django

        django.setup()
        from django.db import connection

        from audit.services import Actor
        from console.accounts import services as accounts

        actor = Actor.system("bench")
        route = accounts.route_create(actor=actor, slug="bench-storage", name="Memory after work")
        user = accounts.user_ensure(actor=actor, username="bench-integrator")
        accounts.role_grant(actor=actor, user=user, role="integrator")
        token = accounts.token_issue(actor=actor, user=user).key
        connection.close()
        run, seconds, raw = "mem", 0.0, 0
        for first in range(0, count, POST_SLICE):
            records = workload(min(POST_SLICE, count - first), run, first=first, total=count)
            raw += sum(len(json.dumps(record).encode()) for record in records)
            took, failures = post_all(url, token, records)
            if failures:
                raise RuntimeError(f"API refused batches: {failures[:2]}")
            seconds += took
        timeout = args.timeout or (QUICK_AFTER_WORK_TIMEOUT if args.quick else AFTER_WORK_TIMEOUT)
        settle = QUICK_IDLE if args.quick else SETTLE
        rested = settled(process, folder, timeout, settle)
        done = work_done(route.pk)
        cpu = idle_cpu([process.pid, *descendants(process.pid), *server_pids(folder)], idle) if rested else {}
        console_pids = {process.pid, *descendants(process.pid)}
        servers = set(server_pids(folder)) - console_pids
        pss, rss, kinds = summed(sorted(console_pids))
        server_pss, server_rss, server_kinds = summed(sorted(servers))
        backends = len(servers)
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, 9)
        except ProcessLookupError:
            pass
    total = pss + server_pss
    processes = ", ".join(
        f"{n} {name} ({kind_pss:.0f} MB)" for name, (n, kind_pss) in sorted({**kinds, **server_kinds}.items())
    )
    lines = [
        f"decisions: {count:,} through POST /api/v1/decisions in {seconds:.0f} s ({count / seconds:,.0f}/s, "
        f"{raw / count:,.0f} bytes each as JSON), into a fresh folder; make run's own workers did the rest",
        "work done: " + ", ".join(f"{key} {value:,}" for key, value in done.items()),
    ]
    if rested is None:
        lines.append(
            f"NOT at rest within {timeout:.0f} s of the last batch (queued: "
            f"{queued_messages(folder, embedded_broker=True)}); see {log}"
        )
    else:
        lines += [
            f"at rest {rested:.0f} s after the last "
            f"batch (queues empty, under {REST_SHARE:.0%} of a core for {settle:g} s), then {idle:g} s idle",
            f"idle CPU over {idle:g} s           : {sum(cpu.values()):.2%} of a core ("
            + ", ".join(f"{name} {share:.2%}" for name, share in sorted(cpu.items(), key=lambda kv: -kv[1]))
            + ")",
        ]
    lines += [
        f"processes: {processes} ({backends} PostgreSQL processes)",
        f"console (make run's tree), PSS (RSS): {pss:7.0f} MB ({rss:,.0f} MB)",
        f"PostgreSQL, PSS (RSS)               : {server_pss:7.0f} MB ({server_rss:,.0f} MB)",
        f"total after work, PSS               : {total:7.0f} MB  (target <= {AFTER_WORK_TARGET_MB} MB) "
        f"{'PASS' if total <= AFTER_WORK_TARGET_MB else 'FAIL'}",
        f"load average                        : {os.getloadavg()[0]:.2f}",
    ]
    report("memory after work", lines)
    return 0 if rested is not None else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, help=f"default {DECISIONS:,} ({QUICK_DECISIONS:,} with --quick)")
    parser.add_argument(
        "--idle",
        type=float,
        help=f"seconds of idling measured (default {IDLE:g}; {QUICK_IDLE:g} with --quick)",
    )
    parser.add_argument(
        "--after-work",
        action="store_true",
        help="ingest --decisions through the API into a fresh folder, let the console's workers finish "
        "(the embedder fit included), idle, and sum the PSS of every process with PostgreSQL's backends",
    )
    parser.add_argument("--timeout", type=float, help="--after-work: seconds to wait for the console to go idle")
    add_arguments(parser)
    args = parser.parse_args()
    if args.after_work:
        return after_work(args)
    data = DataSet(args.decisions or (QUICK_DECISIONS if args.quick else DECISIONS))
    idle = args.idle if args.idle is not None else (QUICK_IDLE if args.quick else IDLE)
    rest_timeout = QUICK_REST_TIMEOUT if args.quick else REST_TIMEOUT
    folder = data_dir(args)
    if os.environ.get("BENCH_DATABASE_URL"):
        owner_url = app_url = os.environ["BENCH_DATABASE_URL"]
    else:
        owner_url, app_url = own_database(folder)
        os.environ["BENCH_DATABASE_URL"] = owner_url
    database_url = setup_django(folder)
    ensure_loaded(database_url, data, folder)
    verified, entered = catch_up()

    from audit.services import Actor
    from console.accounts import services as accounts

    token = accounts.token_issue(actor=Actor.system("bench"), user=bench_reviewer()).key
    port = free_port()
    env = dict(
        os.environ,
        CONSOLE_DATA_DIR=str(folder),
        CONSOLE_DEMO="0",
        PORT=str(port),
        HOST="127.0.0.1",
        DATABASE_URL=app_url,  # the app role, as make run's own processes use
        DATABASE_OWNER_URL=owner_url,  # for its `migrate` only
    )
    env.pop("BENCH_DATABASE_URL", None)
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
        wait_ready(url, process, timeout=QUICK_START_TIMEOUT if args.quick else START_TIMEOUT)
        warm(url, token, data.route)
        rested = wait_at_rest(process, folder, rest_timeout)
        console_pids = [process.pid, *descendants(process.pid)]
        cpu = idle_cpu([*console_pids, *server_pids(folder)], idle) if rested is not None else {}
        pss, rss, kinds = summed([process.pid, *descendants(process.pid)])
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
    lines = [
        f"decisions: {data.decisions:,}, idle {idle:g} s after one request of each kind; pools: {settings}",
        f"caught up before start: {verified:,} decisions span-checked, {entered:,} through pool entry",
    ]
    if rested is None:
        lines.append(
            f"NOT at rest within {rest_timeout:.0f} s (queued messages: {queued_messages(folder)}); "
            f"stopped instead of waiting: see {log}"
        )
    else:
        total = sum(cpu.values())
        servers = cpu.get("postgres", 0.0) + cpu.get("redis-server", 0.0)
        kinds_cpu = ", ".join(f"{name} {share:.2%}" for name, share in sorted(cpu.items(), key=lambda kv: -kv[1]))
        lines += [
            f"at rest after {rested:.0f} s (queues empty, under {REST_SHARE:.0%} of a core for {REST_WINDOW:g} s)",
            f"idle CPU over {idle:g} s           : {total:.2%} of a core "
            f"(console {total - servers:.2%}, PostgreSQL + Redis {servers:.2%})",
            f"idle CPU by process          : {kinds_cpu}",
            f"idle CPU <= {TARGET_IDLE_SHARE:.0%} of a core    : {'PASS' if total <= TARGET_IDLE_SHARE else 'FAIL'}",
        ]
    lines += [
        f"processes started by console/run.py: {processes}",
        f"console, PSS (RSS)           : {pss:7.0f} MB ({rss:,.0f} MB)",
        f"PostgreSQL + Redis, PSS (RSS): {server_pss:7.0f} MB ({server_rss:,.0f} MB)",
        f"console PSS <= {TARGET_MB} MB       : {'PASS' if pss <= TARGET_MB else 'FAIL'}",
        f"load average                 : {os.getloadavg()[0]:.2f}",
    ]
    report("memory", lines)
    return 0 if rested is not None else 1


if __name__ == "__main__":
    sys.exit(main())
