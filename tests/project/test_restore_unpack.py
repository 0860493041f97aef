"""What a restore unpacks of a backup's cluster: the database files, and nothing that belonged to
the running original (its process count, its log, the lock files of its socket)."""

from __future__ import annotations

import io
import os
import tarfile

from console import backup


def _base_tar(path, members: dict[str, str]) -> None:
    with tarfile.open(path, "w") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_a_restore_leaves_behind_the_originals_socket_lock_files_and_keeps_the_database_files(tmp_path):
    backup_pg = tmp_path / "backup" / "pg"
    backup_pg.mkdir(parents=True)
    # The lock names a live process, as the original's did while that console still ran.
    live = f"{os.getpid()}\n/original/pg\n"
    _base_tar(
        backup_pg / "base.tar",
        {
            "PG_VERSION": "16\n",
            "global/pg_control": "control",
            ".s.PGSQL.5432.lock": live,
            ".handle_pids.json": "[1]",
            "log": "the original's log",
        },
    )
    pgdata = tmp_path / "restored" / "pg"
    pgdata.parent.mkdir()
    backup._unpack_cluster(backup_pg, pgdata, err=io.StringIO())
    assert (pgdata / "PG_VERSION").read_text() == "16\n"
    assert (pgdata / "global" / "pg_control").exists() and (pgdata / "pg_wal").is_dir()
    assert not list(pgdata.glob(".s.PGSQL.*"))
    assert not (pgdata / ".handle_pids.json").exists() and not (pgdata / "log").exists()
