"""Run the escalation job now: `manage.py disputes_escalate [--as-of ISO-TIME]`.

With --as-of a later time it is a drill that really notifies: every open dispute due before that
time is escalated (once, as the beat job would), so a team can test its escalation path."""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError

from audit.services import Actor
from console.disputes.services import disputes_escalate


class Command(BaseCommand):
    help = "Escalate open disputes past their due time (once each); --as-of runs a drill at a later time."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--as-of", help="ISO 8601 time to treat as now, e.g. 2026-12-01T09:00:00Z")

    def handle(self, *args, as_of: str | None = None, **options) -> None:
        when = None
        if as_of:
            try:
                when = datetime.fromisoformat(as_of.replace("Z", "+00:00"))
            except ValueError as error:
                raise CommandError(f"--as-of is not an ISO 8601 time: {as_of!r}") from error
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
        escalated = disputes_escalate(actor=Actor.system("disputes_escalate command"), as_of=when)
        self.stdout.write(
            f"escalated {len(escalated)} dispute{'s' if len(escalated) != 1 else ''}"
            + (f": {', '.join(f'#{pk}' for pk in escalated)}" if escalated else "")
        )
