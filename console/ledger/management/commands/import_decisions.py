import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from audit.services import Actor
from console.core.errors import Conflict
from console.ledger import services
from console.ledger.validation import validate_batch


class Command(BaseCommand):
    help = (
        "Import decisions from a JSON Lines file (one decision per line, the API's record shape). "
        "Bad lines are rejected and reported; good lines are written in atomic batches. Re-running "
        "is safe: decisions already stored count as unchanged."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--batch-size", type=int, default=500)
        parser.add_argument("--report", type=Path, help="Write rejected lines as JSON Lines here.")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, file: Path, batch_size: int, report: Path | None, no_progress: bool, **options):
        if not file.exists():
            raise CommandError(f"No such file: {file}")
        if not 1 <= batch_size <= 1000:
            raise CommandError("--batch-size must be between 1 and 1000")
        actor = Actor.system(f"import_decisions:{file.name}")
        totals = {"created": 0, "unchanged": 0, "rejected": 0}
        rejected: list[dict] = []
        size = file.stat().st_size
        with (
            file.open("rb") as handle,
            tqdm(total=size, unit="B", unit_scale=True, disable=no_progress, desc="import") as progress,
        ):
            batch: list[tuple[int, object]] = []
            for line_number, raw_line in enumerate(handle, start=1):
                progress.update(len(raw_line))
                if not raw_line.strip():
                    continue
                try:
                    batch.append((line_number, json.loads(raw_line)))
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    rejected.append({"line": line_number, "errors": [{"field": "", "message": f"not JSON: {exc}"}]})
                except (RecursionError, ValueError):  # nested past the parser's depth; a number too long to read
                    rejected.append(
                        {
                            "line": line_number,
                            "errors": [{"field": "", "message": "not JSON: nested too deeply or a number too long"}],
                        }
                    )
                if len(batch) >= batch_size:
                    self._write(actor, batch, totals, rejected)
                    batch = []
            if batch:
                self._write(actor, batch, totals, rejected)
        totals["rejected"] = len(rejected)
        if report:
            report.write_text("".join(json.dumps(r) + "\n" for r in rejected))
        for entry in rejected[:20]:
            messages = "; ".join(f"{e['field'] or 'record'} {e['message']}" for e in entry["errors"])
            self.stderr.write(f"line {entry['line']}: {messages}")
        if len(rejected) > 20:
            self.stderr.write(
                f"... and {len(rejected) - 20} more rejected lines"
                + (f" (all in {report})" if report else " (use --report FILE to keep them all)")
            )
        self.stdout.write(
            f"created {totals['created']}, unchanged {totals['unchanged']}, rejected {totals['rejected']}"
        )

    def _write(self, actor, batch, totals, rejected) -> None:
        lines = [line for line, _ in batch]
        items, errors = validate_batch([record for _, record in batch])
        routes, route_errors = services.routes_for_items(items)
        problems: dict[int, list[dict]] = {}
        for error in errors + route_errors:
            problems.setdefault(error["index"], []).append({"field": error["field"], "message": error["message"]})
        good = [item for item in items if item.index not in problems]
        while good:
            try:
                result = services.decision_ingest(actor=actor, items=good, routes=routes)
            except Conflict as exc:
                # Keep the rest of the batch: drop the conflicting lines, report them, write again.
                bad = {d["index"] for d in exc.details}
                for detail in exc.details:
                    problems.setdefault(detail["index"], []).append(
                        {"field": "request_id", "message": detail["message"]}
                    )
                good = [item for item in good if item.index not in bad]
                continue
            totals["created"] += result.created
            totals["unchanged"] += result.unchanged
            break
        for index, errs in sorted(problems.items()):
            rejected.append({"line": lines[index], "errors": errs})
