from datetime import date
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from audit.services import Actor
from console.core.db_roles import as_owner
from console.core.errors import ServiceError
from console.ledger.archive import month_archive
from console.ledger.partitions import decision_month_partitions


def _month(text: str) -> date:
    try:
        year, month = (int(part) for part in text.split("-"))
        return date(year, month, 1)
    except ValueError as exc:
        raise CommandError(f"Month must read YYYY-MM, not {text!r}.") from exc


class Command(BaseCommand):
    help = (
        "Archive a month of decisions: write the month's decisions and everything stored about them "
        "(passages, span checks, vectors, pool items, grades, labels, disputes, shadow runs, trial calls) "
        "to gzipped CSV files with a manifest, take the month out of the counters, detach and drop its "
        "partitions, and record it in the audit trail. Refused while work on them is under way (an open "
        "dispute, a queued job). --list shows the months."
    )

    def add_arguments(self, parser):
        parser.add_argument("month", nargs="?", help="YYYY-MM, a month before the current one")
        parser.add_argument("--to", type=Path, help="Folder for the archive (default: <data dir>/archive/YYYY-MM)")
        parser.add_argument(
            "--list", dest="show", action="store_true", help="List the month partitions and their sizes"
        )

    def handle(self, *args, month, to, show, **options):
        if show or not month:
            for part in decision_month_partitions():
                self.stdout.write(f"{part.month:%Y-%m}  {part.parent:<32} ~{part.rows:>12,} rows {part.bytes:>14,} B")
            return
        when = _month(month)
        folder = to or Path(settings.DATA_DIR) / "archive" / f"{when:%Y-%m}"
        try:
            with as_owner():  # only the tables' owner may detach and drop partitions
                result = month_archive(
                    actor=Actor.system(f"archive_month:{when:%Y-%m}"),
                    month=when,
                    folder=folder,
                )
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Archived {result.decisions:,} decisions of {when:%Y-%m} to {result.folder}")
        for name, entry in sorted(result.files.items()):
            self.stdout.write(f"  {name:<44} {entry['rows']:>10,} rows  sha256 {entry['sha256'][:16]}")
