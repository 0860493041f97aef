"""A console process for the backup tests (tests/project/test_backup_restore.py), run on a data
folder of its own: `python -m tests.project.backup_console ingest STOP_FILE PROGRESS_FILE`,
`... write PREFIX N [--switch-wal]` and `... dump OUT_FILE`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _setup() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()


def _records(prefix: str, start: int, count: int) -> list[dict]:
    from tests.sample_record import BASE_RECORD

    return [
        {**BASE_RECORD, "request_id": f"{prefix}-{n:05d}", "question": f"How do I reset MFA on device {n}?"}
        for n in range(start, start + count)
    ]


def _ingest(records: list[dict]) -> int:
    """Through the ledger's service, as `import_decisions` writes a batch."""
    from audit.services import Actor
    from console.ledger import services
    from console.ledger.validation import validate_batch

    items, errors = validate_batch(records)
    routes, route_errors = services.routes_for_items(items)
    assert not errors and not route_errors, (errors, route_errors)
    return services.decision_ingest(actor=Actor.system("backup-test"), items=items, routes=routes).created


def _count_written(progress_file: Path, written: int) -> None:
    """Write the count whole: a reader never finds the file emptied for the new one (a test read ''
    between `write_text`'s truncation and its write once)."""
    partial = progress_file.with_name(progress_file.name + ".partial")
    partial.write_text(str(written))
    os.replace(partial, progress_file)


def ingest(stop_file: Path, progress_file: Path) -> None:
    """Batches of five decisions, one after another, until `stop_file` appears."""
    written = 0
    while not stop_file.exists():
        written += _ingest(_records("load", written, 5))
        _count_written(progress_file, written)
    _count_written(progress_file, written)


def write(prefix: str, count: int, *, switch_wal: bool) -> None:
    _ingest(_records(prefix, 0, count))
    if switch_wal:  # the segment holding these writes goes to the archive now, not when it fills
        import psycopg
        from django.conf import settings

        from console import embedded

        with psycopg.connect(embedded.postgres_superuser_url(settings.DATA_DIR), autocommit=True) as conn:
            conn.execute("SELECT pg_switch_wal()")
            conn.execute("CHECKPOINT")


def dump(out: Path) -> None:
    """Every decision, final label, policy version and audit event, by id, as JSON."""
    from audit.models import AuditEvent
    from console.governance.models import PolicyVersion
    from console.ledger.models import Decision
    from grading.models import FinalLabel

    def rows(queryset, key: str) -> list[dict]:
        return json.loads(json.dumps(list(queryset.order_by(key).values()), default=str))

    out.write_text(
        json.dumps(
            {
                "decisions": rows(Decision.objects.all(), "id"),
                "labels": rows(FinalLabel.objects.all(), "id"),
                "policies": rows(PolicyVersion.objects.all(), "id"),
                "events": rows(AuditEvent.objects.all(), "seq"),
            }
        )
    )


def main(argv: list[str]) -> None:
    _setup()
    command = argv[0]
    if command == "ingest":
        ingest(Path(argv[1]), Path(argv[2]))
    elif command == "write":
        write(argv[1], int(argv[2]), switch_wal="--switch-wal" in argv)
    elif command == "dump":
        dump(Path(argv[1]))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
