"""`make run`: the whole console on one machine, stopped together on Ctrl-C.

Starts (or joins) the embedded PostgreSQL, starts the embedded Redis broker, applies migrations,
loads the demo workspace on first start (unless CONSOLE_DEMO=0), then runs three Celery workers (the
gradable path; everything else, with beat; candidate gate trials), each leading its own process
group, and gunicorn as child processes. DATABASE_URL and
CELERY_BROKER_URL switch either service to an external one, in which case it is neither started
nor stopped here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from console import embedded
from console.core.queues import BACKGROUND_QUEUES, GRADABLE_PATH_QUEUES, REFIT_QUEUES, TRIAL_QUEUES
from console.env import env_bool, env_console_url, env_int, env_path, env_str

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def main() -> int:
    data_dir = env_path("CONSOLE_DATA_DIR", ROOT / ".console")
    port = env_int("PORT", 8000, minimum=1, maximum=65535)
    host = env_str("HOST", "127.0.0.1")
    env = dict(os.environ, CONSOLE_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="console.settings")
    # glibc gives each thread that allocates its own heap arena (up to 8 a core), and freed memory
    # stays in the arena that held it; gunicorn's threads and the workers' Django held on to memory
    # after work that two arenas share instead (issue 36). Set it to change it.
    env.setdefault("MALLOC_ARENA_MAX", "2")

    # Only `migrate` connects as the owner role; the web server and the workers never get its URL.
    owner_env = {"DATABASE_OWNER_URL": env.pop("DATABASE_OWNER_URL")} if env.get("DATABASE_OWNER_URL") else {}
    if not env.get("DATABASE_URL"):
        print("Starting embedded PostgreSQL ...", flush=True)
        env["DATABASE_URL"] = embedded.postgres_url(data_dir)
        owner_env = {"DATABASE_OWNER_URL": embedded.postgres_owner_url(data_dir)}
    children: list[subprocess.Popen] = []
    redis_process = None
    if not env.get("CELERY_BROKER_URL"):
        print("Starting embedded Redis broker ...", flush=True)
        redis_process = embedded.start_redis(data_dir)
        env["CELERY_BROKER_URL"] = embedded.redis_url(data_dir)

    def manage(*args: str, extra_env: dict[str, str] | None = None) -> None:
        subprocess.run(
            [str(BIN / "python"), str(ROOT / "manage.py"), *args],
            env={**env, **(extra_env or {})},
            cwd=ROOT,
            check=True,
        )

    try:
        manage("migrate", "--noinput", "-v", "0", extra_env=owner_env)
        marker = data_dir / "demo-loaded"
        if env_bool("CONSOLE_DEMO", True) and not marker.exists():
            print("Loading the demo workspace (first start) ...", flush=True)
            manage(*DEMO_COMMAND)
            marker.write_text("loaded\n")
        # Each worker leads a process group of its own (its pool and, on the background worker, beat),
        # so stopping it reaches whatever it started even when it was killed first (stop_group).
        children += [
            subprocess.Popen(command, env={**env, **extra}, cwd=ROOT, process_group=0)
            for command, extra in zip(worker_commands(data_dir), worker_environments(), strict=True)
        ]
        # Its own session: Ctrl-C reaches only this script, which stops gunicorn with one SIGTERM.
        # A preloaded gunicorn worker that gets the terminal's SIGINT and its master's signal at
        # once can hang in its nested signal handlers and outlive the master.
        children.append(subprocess.Popen(web_command(host, port), env=env, cwd=ROOT, start_new_session=True))
        print(_banner(host, port, data_dir), flush=True)
        wait_for_stop(children)
    finally:
        print("Stopping ...", flush=True)
        for child in reversed(children):
            stop_group(child, timeout=20)
        embedded.stop_process(redis_process)
    return 0


def stop_group(child: subprocess.Popen, *, timeout: float) -> None:
    """Stop a child (SIGTERM, then SIGKILL after `timeout`), then SIGKILL anything left in its process
    group: a worker killed with SIGKILL leaves its pool and beat behind, and a beat left running
    would schedule beside the next start's (console/beat_guard.py keeps a second one waiting)."""
    embedded.stop_process(child, timeout=timeout)
    try:
        os.getpgid(child.pid)
        return  # the child is reaped, so a process with its pid is a new one (its group, if any, too)
    except ProcessLookupError:
        pass
    try:
        # Linux reuses no pid while a group of that id has members, so these are the child's leftovers.
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# Signals that end the wait: a stop request, or a child that exited.
_WAKING_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGCHLD}


def wait_for_stop(children: list[subprocess.Popen], *, check_every: float = 60.0) -> None:
    """Sleep until Ctrl-C, SIGTERM or a child's exit, without waking in between.

    The signals are blocked and taken with sigtimedwait, so the supervisor uses no CPU while the
    console idles (a loop that looked at its children twice a second cost about 1% of a core).
    Blocking happens after every child has started, since children inherit the signal mask. The
    timeout is only a safety net for a SIGCHLD lost to a child reaped elsewhere."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAKING_SIGNALS)
    try:
        while True:
            exited = [child for child in children if child.poll() is not None]
            if exited:
                for child in exited:
                    print(f"{child.args[0]} exited with {child.returncode}; stopping.", flush=True)
                return
            received = signal.sigtimedwait(_WAKING_SIGNALS, check_every)
            if received is not None and received.si_signo in (signal.SIGINT, signal.SIGTERM):
                return
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WAKING_SIGNALS)
        # A second Ctrl-C while the children stop is ignored: they are stopped in order regardless.
        signal.signal(signal.SIGINT, signal.SIG_IGN)


# The banner prints the logins at the end of start-up; the command must not print them first.
DEMO_COMMAND = ("load_demo", "--no-logins")


def worker_commands(data_dir: Path) -> list[list[str]]:
    """Three Celery workers that together consume every queue (console/core/queues.py).

    The first takes only the gradable path (span checks, pool entry), sized by CELERY_CONCURRENCY
    (WORKER_CONCURRENCY is the older name; default 2): on one worker for every queue, a 13-second
    embedder refit or a statistics recompute held the processes ingest's follow-up work needed, and
    decisions became gradable at 0.38x the rate they arrived. The second takes every other queue
    but trials and refits and runs beat, sized by CELERY_BACKGROUND_CONCURRENCY (default 1). The third
    takes the work that holds a process for minutes, candidate gate trials and embedder refits
    (CELERY_TRIALS_CONCURRENCY, default 2, so that neither waits for the other): a trial calls a URL a
    reviewer chose, and a gate that dripped one byte a second once held the shared worker while an
    escalation waited; a refit re-embeds every question of its route, and on the background worker
    the fresh vectors and every other queue waited behind it (70-85 s under a stream, issue 36).
    Each child is replaced after
    CELERY_MAX_TASKS_PER_CHILD tasks or once it passes CELERY_MAX_MEMORY_PER_CHILD_KB (settings),
    so a child that grew on one large job does not keep that memory at rest.

    The concurrency is each pool's most: the pools grow on demand and shrink to
    CELERY_IDLE_PROCESSES (default 0) once no task has arrived for CELERY_IDLE_SECONDS (default 10,
    checked that often), so an idle console keeps only the workers' main processes (and beat): after
    a 20,000-decision ingest the four pool children held about 200 MB between them at rest (issue 36).
    A task that arrives at an empty pool waits for one fork of the main process (milliseconds: the
    code is already loaded there).
    """
    gradable = env_int(
        "CELERY_CONCURRENCY", env_int("WORKER_CONCURRENCY", 2, minimum=1, maximum=64), minimum=1, maximum=64
    )
    background = env_int("CELERY_BACKGROUND_CONCURRENCY", 1, minimum=1, maximum=64)
    trials = env_int("CELERY_TRIALS_CONCURRENCY", 2, minimum=1, maximum=64)
    return [
        _worker("gradable", GRADABLE_PATH_QUEUES, gradable),
        [
            *_worker("background", BACKGROUND_QUEUES, background),
            "--beat",
            "--schedule",
            str(data_dir / "celerybeat-schedule"),
        ],
        _worker("trials", (*TRIAL_QUEUES, *REFIT_QUEUES), trials),
    ]


def worker_environments() -> list[dict[str, str]]:
    """What each of `worker_commands` adds to the environment, the CPU priority of the background and
    trial workers (console/celery.py applies it; 0 leaves it as it is).

    The worker of trials and embedder refits runs lower (CELERY_TRIALS_NICE, default 10): on the
    2-core machine a 20-second refit during a burst of ingest took a core from the span checks, and
    decisions became gradable a second after the last batch instead of at once. The background
    worker runs as high as the rest (CELERY_BACKGROUND_NICE, default 0) since refits left it: at 10,
    under a stream at the HTTP rate it got what gunicorn, PostgreSQL and the gradable path left, was
    busy nine tenths of the time, took four times a quiet core's time per job, and the question
    vectors fell behind by 300 decisions a second (bench/README.md, issue 36)."""
    background = env_int("CELERY_BACKGROUND_NICE", 0, minimum=0, maximum=19)
    trials = env_int("CELERY_TRIALS_NICE", 10, minimum=0, maximum=19)
    # Celery's autoscaler reads its keep-alive (seconds without a task before a pool shrinks, and
    # how often it looks) from the environment.
    idle = {"AUTOSCALE_KEEPALIVE": str(env_int("CELERY_IDLE_SECONDS", 10, minimum=1, maximum=3600))}
    return [dict(idle), {**_niceness(background), **idle}, {**_niceness(trials), **idle}]


def _niceness(value: int) -> dict[str, str]:
    return {"CELERY_WORKER_NICE": str(value)} if value else {}


IDLE_QUIET_WORKER_FLAGS = ("--without-gossip", "--without-mingle", "--without-heartbeat")


def _worker(name: str, queues: tuple[str, ...], concurrency: int) -> list[str]:
    idle = min(env_int("CELERY_IDLE_PROCESSES", 0, minimum=0, maximum=64), concurrency)
    return [
        str(BIN / "celery"),
        "-A",
        "console",
        "worker",
        "--loglevel",
        "INFO",
        "--hostname",
        f"{name}@%h",
        "--concurrency",
        str(concurrency),
        "--autoscale",
        f"{concurrency},{idle}",
        "-Q",
        ",".join(queues),
        # Gossip, mingle and the event heartbeat keep workers of a cluster aware of each other, a
        # message every two seconds each; the two workers here never ask, and nothing reads them.
        *IDLE_QUIET_WORKER_FLAGS,
    ]


def web_command(host: str, port: int) -> list[str]:
    """gunicorn, sized by WEB_WORKERS x WEB_THREADS. The application is loaded once in the master
    before forking (--preload), so workers share its pages instead of each holding a copy and none
    imports the views on its first request (which once answered /healthz seconds after gunicorn
    said it was listening); a worker is replaced after WEB_MAX_REQUESTS requests (with jitter, so
    they do not all restart at once). The control socket (gunicorn 24+) would default to
    ~/.gunicorn; nothing here uses it, so it is off."""
    max_requests = env_int("WEB_MAX_REQUESTS", 2000, minimum=0, maximum=10_000_000)
    return [
        str(BIN / "gunicorn"),
        "console.wsgi",
        "--bind",
        f"{host}:{port}",
        "--workers",
        str(env_int("WEB_WORKERS", 2, minimum=1, maximum=64)),
        "--threads",
        str(env_int("WEB_THREADS", 4, minimum=1, maximum=64)),
        "--max-requests",
        str(max_requests),
        "--max-requests-jitter",
        str(max_requests // 10),
        "--preload",
        # Hooks that replace a worker which grew, once it idles (console/gunicorn_config.py).
        "--config",
        "python:console.gunicorn_config",
        "--no-control-socket",
        # No request-line limit of gunicorn's own (its 414 is an HTML page): the application answers
        # a URL past MAX_URL_LENGTH with its own 414 (console/core/middleware.py).
        "--limit-request-line",
        "0",
        *_tmpfs_heartbeat(),
        "--access-logfile",
        "-",
    ]


def _tmpfs_heartbeat() -> list[str]:
    """Each gunicorn worker tells the master it is alive by changing a temporary file every second;
    on a disk-backed /tmp that is a metadata write each time, on /dev/shm a change in memory."""
    shm = Path("/dev/shm")
    return ["--worker-tmp-dir", str(shm)] if shm.is_dir() and os.access(shm, os.W_OK) else []


def _banner(host: str, port: int, data_dir: Path) -> str:
    logins = data_dir / "demo-logins.txt"
    lines = [
        "",
        f"  Console:  http://{host}:{port}/",
        f"  Links in emails and webhooks: {env_console_url(host, port)}/ (CONSOLE_URL)",
        f"  API docs: http://{host}:{port}/api/docs/",
        f"  Data:     {data_dir}",
    ]
    if logins.exists():
        lines += ["", "  Demo logins (username / password):"]
        lines += [f"    {line}" for line in logins.read_text().splitlines()]
    lines += ["", "  Ctrl-C stops everything started here.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
