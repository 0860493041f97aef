import json

from django.core.management.base import BaseCommand, CommandError

from audit.services import Actor
from console.accounts.models import Route
from console.monitoring.services.alarms import monitor_run


class Command(BaseCommand):
    help = "Run the drift monitor now: refresh daily aggregates, open and close alarms."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--route", help="Only this route's slug.")

    def handle(self, *args, route: str | None = None, **options) -> None:
        if route and not Route.objects.filter(slug=route).exists():
            raise CommandError(f"No route {route!r}.")
        for result in monitor_run(actor=Actor.system("monitor_run"), route_slug=route):
            self.stdout.write(json.dumps(result, default=str))
