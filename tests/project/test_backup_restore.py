"""`manage.py backup DIR` and `manage.py restore DIR [--until TIME]` (console/backup.py).

The slow tests run real consoles: each on a data folder of its own with its own embedded PostgreSQL,
as subprocesses (tests/project/backup_console.py ingests and dumps). The others check the refusals
that come before any database is touched.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from console import backup

ROOT = Path(__file__).resolve().parents[2]


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "DATABASE_OWNER_URL", "CELERY_BROKER_URL", "CONSOLE_WAL_ARCHIVE"}
        and not key.startswith("AUDIT_")
    }
    env.update(
        CONSOLE_DATA_DIR=str(data_dir),
        DJANGO_SETTINGS_MODULE="console.settings",
        CELERY_TASK_ALWAYS_EAGER="1",  # follow-up jobs run inline: no broker in these consoles
        PYTHONPATH=str(ROOT),
        **extra,
    )
    return env


def _run(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return _run(env, "manage.py", *args)


def _console(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = _run(env, "-m", "tests.project.backup_console", *args)
    assert result.returncode == 0, result.stderr
    return result


def _dump(env: dict[str, str], out: Path) -> dict:
    _console(env, "dump", str(out))
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def source():
    """A console with the demo workspace (decisions, imported labels, signed policies, an audit
    trail) whose cluster archives its WAL.

    Not under pytest's tmp_path: as root the clusters run as pgserver's own user, and every pytest
    session that starts on the machine makes /tmp/pytest-of-root private again (mode 0700), which
    took the folder from under a running server."""
    folder = Path(tempfile.mkdtemp(prefix="console-backups-"))
    env = _env(folder / "source", CONSOLE_WAL_ARCHIVE=str(folder / "wal"))
    try:
        for args in (("migrate", "-v", "0"), ("load_demo", "--decisions", "5", "--no-logins")):
            result = _manage(env, *args)
            assert result.returncode == 0, result.stderr
        yield {"folder": folder, "env": env}
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # every console here has exited, and its server with it


@pytest.mark.slow
def test_a_backup_taken_during_ingest_restores_to_a_console_holding_the_same_records(source):
    folder, env = source["folder"], source["env"]
    stop, progress = folder / "stop-ingest", folder / "ingested"
    ingest = subprocess.Popen(
        [sys.executable, "-m", "tests.project.backup_console", "ingest", str(stop), str(progress)],
        env=env,
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not (progress.exists() and int(progress.read_text() or 0) >= 10):
            assert ingest.poll() is None, ingest.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.2)
        taken = _manage(env, "backup", str(folder / "under-load"))
        during = int(progress.read_text())
    finally:
        stop.touch()
        ingest.wait(timeout=120)
    assert taken.returncode == 0, taken.stderr
    assert ingest.returncode == 0, ingest.stderr.read()
    assert int(progress.read_text()) > during  # ingest went on while the backup was written

    restored_env = _env(folder / "restored")
    restored = _manage(restored_env, "restore", str(folder / "under-load"))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "audit chain: ok" in restored.stdout and "signature valid" in restored.stdout
    assert restored.stdout.rstrip().endswith("verified")

    original, copy = _dump(env, folder / "original.json"), _dump(restored_env, folder / "copy.json")
    manifest = json.loads((folder / "under-load" / "manifest.json").read_text())
    restore_event = copy["events"].pop()
    assert restore_event["action"] == "console_restored" and restore_event["actor"] == "system:restore"
    head = len(copy["events"])
    assert restore_event["payload"]["verified_head"]["new"]["seq"] == head
    # The copy is the original as it stood at one moment: a prefix of its audit trail, with the
    # head the backup began at and no more than it ended at, and exactly the decisions written by then.
    assert manifest["audit"]["head_before"]["seq"] <= head <= manifest["audit"]["head_after"]["seq"]
    assert copy["events"] == original["events"][:head]
    assert copy["decisions"] == original["decisions"][: len(copy["decisions"])]
    ingested_by_then = [d for d in copy["decisions"] if d["request_id"].startswith("load-")]
    assert 10 <= len(ingested_by_then) < sum(d["request_id"].startswith("load-") for d in original["decisions"])
    assert copy["labels"] == original["labels"] and copy["labels"]
    assert copy["policies"] == original["policies"] and copy["policies"]

    # The restored console's own verification agrees: the chain verifies against its checkpoints.
    verified = _manage(restored_env, "audit_verify")
    assert verified.returncode == 0 and verified.stdout.startswith(f"ok: {head + 1} events")
    assert f"latest at seq {head + 1}" in verified.stdout  # the restore's own event is signed too


@pytest.mark.slow
def test_a_tampered_backup_is_refused_and_nothing_is_laid_down(source):
    folder, env = source["folder"], source["env"]
    taken = _manage(env, "backup", str(folder / "to-tamper"))
    assert taken.returncode == 0, taken.stderr
    base = folder / "to-tamper" / "pg" / "base.tar"
    with base.open("r+b") as handle:
        handle.seek(base.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))

    target = folder / "from-tampered"
    refused = _manage(_env(target), "restore", str(folder / "to-tamper"))
    assert refused.returncode == 1
    assert "pg/base.tar: SHA-256 differs from the manifest's" in refused.stderr
    assert not target.exists()


@pytest.mark.slow
def test_restore_until_a_moment_keeps_the_writes_before_it_and_none_after(source):
    folder, env = source["folder"], source["env"]
    taken = _manage(env, "backup", str(folder / "base-for-pitr"))
    assert taken.returncode == 0, taken.stderr
    _console(env, "write", "before", "3", "--switch-wal")
    time.sleep(1.5)
    moment = datetime.now(UTC)
    time.sleep(1.5)
    _console(env, "write", "after", "3", "--switch-wal")

    restored_env = _env(folder / "until")
    restored = _manage(
        restored_env,
        "restore",
        str(folder / "base-for-pitr"),
        "--until",
        moment.isoformat(),
        "--wal-archive",
        str(folder / "wal"),
    )
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "verified" in restored.stdout
    # The copy keeps none of the original's archiving: it archives as its own environment says.
    assert "archive_command" not in (folder / "until" / "pg" / "postgresql.auto.conf").read_text()
    request_ids = {d["request_id"] for d in _dump(restored_env, folder / "until.json")["decisions"]}
    assert {f"before-{n:05d}" for n in range(3)} <= request_ids
    assert not any(request_id.startswith("after-") for request_id in request_ids)


_HOLD_A_SERVER = """
import sys
from pathlib import Path
from console import embedded
folder = Path(sys.argv[1])
print(embedded.postgres_url(folder), embedded.postgres_owner_url(folder), embedded.postgres_superuser_url(folder))
sys.stdout.flush()
sys.stdin.read()
"""


@pytest.mark.slow
def test_with_an_external_database_the_backup_is_a_dump_restored_into_an_empty_database(tmp_path):
    """An embedded cluster held by a process of its own stands in for the external PostgreSQL."""
    import psycopg

    folder = Path(tempfile.mkdtemp(prefix="console-external-"))  # not under tmp_path: see `source`
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_A_SERVER, str(folder / "server")],
        env=_env(folder / "server"),
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        app_url, owner_url, superuser_url = holder.stdout.readline().split()
        with psycopg.connect(superuser_url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE console_copy OWNER console_owner")
        env = _env(folder / "data", DATABASE_URL=app_url, DATABASE_OWNER_URL=owner_url)
        for args in (("migrate", "-v", "0"), ("create_route", "it-support", "--name", "IT support")):
            result = _manage(env, *args)
            assert result.returncode == 0, result.stderr
        _console(env, "write", "external", "5")
        taken = _manage(env, "backup", str(folder / "backup"))
        assert taken.returncode == 0, taken.stderr
        assert (folder / "backup" / "db" / "console.dump").is_file()

        copy_env = _env(
            folder / "restored",
            DATABASE_URL=app_url.replace("/console?", "/console_copy?"),
            DATABASE_OWNER_URL=owner_url.replace("/console?", "/console_copy?"),
        )
        restored = _manage(copy_env, "restore", str(folder / "backup"))
        assert restored.returncode == 0, restored.stdout + restored.stderr
        assert restored.stdout.rstrip().endswith("verified")
        copy, original = _dump(copy_env, folder / "copy.json"), _dump(env, folder / "original.json")
        assert copy.pop("events")[:-1] == original.pop("events")
        assert copy == original and copy["decisions"]
        # An empty data folder is not enough: the database must be empty too.
        again = _manage({**copy_env, "CONSOLE_DATA_DIR": str(folder / "again")}, "restore", str(folder / "backup"))
        assert again.returncode == 1 and "restore into an empty database" in again.stderr
        assert not (folder / "again").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_backup_goes_only_into_a_new_or_empty_folder(tmp_path):
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup" / "old").write_text("x")
    with pytest.raises(backup.BackupError, match="is not empty"):
        backup.backup(tmp_path / "backup", folder=tmp_path / "data", err=io.StringIO())


def test_restore_goes_only_into_an_empty_data_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "secret_key").write_text("x")
    with pytest.raises(backup.BackupError, match="is not empty"):
        backup.restore(tmp_path / "backup", folder=tmp_path / "data", err=io.StringIO())


def _fake_backup(folder: Path) -> None:
    (folder / "pg").mkdir(parents=True)
    (folder / "pg" / "base.tar").write_bytes(b"cluster")
    (folder / "files").mkdir()
    (folder / "files" / "secret_key").write_text("key")
    manifest = {"format": backup.FORMAT, "files": backup._file_list(folder)}
    (folder / backup.MANIFEST).write_text(json.dumps(manifest))


def test_every_file_must_match_the_manifest_and_none_may_be_added_or_missing(tmp_path):
    _fake_backup(tmp_path)
    assert backup.manifest_verify(tmp_path, err=io.StringIO())["format"] == backup.FORMAT
    (tmp_path / "files" / "secret_key").write_text("kez")
    (tmp_path / "pg" / "base.tar").unlink()
    (tmp_path / "files" / "planted").write_text("x")
    with pytest.raises(backup.BackupError) as refused:
        backup.manifest_verify(tmp_path, err=io.StringIO())
    message = str(refused.value)
    assert "files/secret_key: SHA-256 differs" in message
    assert "pg/base.tar: missing" in message
    assert "files/planted: not in the manifest" in message


def test_a_folder_without_a_manifest_is_not_a_backup(tmp_path):
    with pytest.raises(backup.BackupError, match="not a console backup"):
        backup.manifest_verify(tmp_path, err=io.StringIO())


def test_a_moment_without_an_offset_is_utc():
    assert backup.parse_until("2026-12-03T21:40:00") == datetime(2026, 12, 3, 21, 40, tzinfo=UTC)
    assert backup.parse_until("2026-12-03T22:40:00+01:00") == datetime(2026, 12, 3, 21, 40, tzinfo=UTC)
    assert backup.parse_until("2026-12-03T21:40:00Z").utcoffset() == timedelta(0)
    with pytest.raises(backup.BackupError, match="ISO 8601"):
        backup.parse_until("yesterday")


def test_the_archive_command_quotes_the_folder_and_keeps_postgres_placeholders():
    from console import embedded

    command = embedded.wal_archive_command(Path("/var/wal 100%"))
    assert "'/var/wal 100%%'/%f" in command and "cp %p" in command
    assert shutil.which("cmp") and shutil.which("sync")  # what the command needs on this machine


def test_restore_drops_the_originals_archive_and_recovery_settings(tmp_path):
    conf = tmp_path / "postgresql.auto.conf"
    conf.write_text(
        "# Do not edit this file manually!\narchive_mode = 'on'\narchive_command = 'cp %p /wal/%f'\n"
        "recovery_target_time = '2026-12-03'\nwork_mem = '8MB'\n"
    )
    backup._rewrite_auto_conf(tmp_path, {"restore_command": "cp '/wal'/%f %p"})
    assert conf.read_text().splitlines() == [
        "# Do not edit this file manually!",
        "work_mem = '8MB'",
        "restore_command = 'cp ''/wal''/%f %p'",
    ]
