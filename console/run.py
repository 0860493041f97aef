"""`make run`: the whole console on one machine, stopped together on Ctrl-C.

Starts (or joins) the embedded PostgreSQL, starts the embedded Redis broker, applies migrations,
loads the demo workspace on first start (unless CONSOLE_DEMO=0), then runs a Celery worker with
beat and gunicorn as child processes. DATABASE_URL and CELERY_BROKER_URL switch either service
to an external one, in which case it is neither started nor stopped here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from console import embedded
from console.core.queues import QUEUES
from console.env import env_bool, env_int, env_path, env_str

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def main() -> int:
    data_dir = env_path("CONSOLE_DATA_DIR", ROOT / ".console")
    port = env_int("PORT", 8000, minimum=1, maximum=65535)
    host = env_str("HOST", "127.0.0.1")
    env = dict(os.environ, CONSOLE_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="console.settings")

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
        children.append(subprocess.Popen(worker_command(data_dir), env=env, cwd=ROOT))
        # Its own session: Ctrl-C reaches only this script, which stops gunicorn with one SIGTERM.
        # A preloaded gunicorn worker that gets the terminal's SIGINT and its master's signal at
        # once can hang in its nested signal handlers and outlive the master.
        children.append(subprocess.Popen(web_command(host, port), env=env, cwd=ROOT, start_new_session=True))
        print(_banner(host, port, data_dir), flush=True)
        stop = {"now": False}

        def request_stop(signum, frame):
            stop["now"] = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        while not stop["now"]:
            for child in children:
                if child.poll() is not None:
                    print(f"{child.args[0]} exited with {child.returncode}; stopping.", flush=True)
                    stop["now"] = True
            time.sleep(0.5)
    finally:
        print("Stopping ...", flush=True)
        for child in reversed(children):
            embedded.stop_process(child, timeout=20)
        embedded.stop_process(redis_process)
    return 0


# The banner prints the logins at the end of start-up; the command must not print them first.
DEMO_COMMAND = ("load_demo", "--no-logins")


def worker_command(data_dir: Path) -> list[str]:
    """One Celery worker with beat that consumes every queue (console/core/queues.py).

    CELERY_CONCURRENCY (WORKER_CONCURRENCY is the older name) sizes its pool; each child is replaced
    after CELERY_MAX_TASKS_PER_CHILD tasks or once it passes CELERY_MAX_MEMORY_PER_CHILD_KB (settings),
    so a child that grew on one large job does not keep that memory at rest.
    """
    concurrency = env_int(
        "CELERY_CONCURRENCY", env_int("WORKER_CONCURRENCY", 2, minimum=1, maximum=64), minimum=1, maximum=64
    )
    return [
        str(BIN / "celery"),
        "-A",
        "console",
        "worker",
        "--beat",
        "--loglevel",
        "INFO",
        "--concurrency",
        str(concurrency),
        "-Q",
        ",".join(QUEUES),
        "--schedule",
        str(data_dir / "celerybeat-schedule"),
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
        "--no-control-socket",
        "--access-logfile",
        "-",
    ]


def _banner(host: str, port: int, data_dir: Path) -> str:
    logins = data_dir / "demo-logins.txt"
    lines = [
        "",
        f"  Console:  http://{host}:{port}/",
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
