"""`manage.py create_route SLUG --name ...`: create a route, with the settings the apps above add
options for (console/accounts/hooks.py: grading's `--graders-per-item` and `--guidelines`,
shadow's `--shadow` / `--shadow-url`). Each app saves its own part through its own audited service,
in the command's one transaction."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from audit.services import Actor
from console.accounts import hooks
from console.accounts.models import Route
from console.accounts.services import route_create
from console.core.errors import InvalidInput


class Command(BaseCommand):
    help = (
        "Create a route (a gated answering surface). With --shadow or --shadow-url on an existing route, "
        "set its shadow pipeline instead."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", help="Display name; required to create a route.")
        for option in hooks.create_route_options():
            option.add_arguments(parser)

    def handle(self, *args, slug, name, **options):
        actor = Actor.system("create_route")
        apps_options = hooks.create_route_options()
        try:
            for option in apps_options:
                if option.check is not None:
                    option.check(options)
            with transaction.atomic():
                existing = Route.objects.filter(slug=slug).first()
                changing = [o for o in apps_options if o.changes_existing is not None and o.changes_existing(options)]
                if existing is not None and changing:
                    for option in changing:
                        self._say(option.apply(actor=actor, route=existing, created=False, options=options))
                    return
                if not name:
                    raise CommandError("--name is required to create a route.")
                route = route_create(actor=actor, slug=slug, name=name)
                lines = [
                    option.apply(actor=actor, route=route, created=True, options=options) for option in apps_options
                ]
        except InvalidInput as exc:
            raise CommandError(exc.message) from exc
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        for line in lines:
            self._say(line)
        self.stdout.write(f"Created route {route.slug} ({route.name}).")

    def _say(self, line: str | None) -> None:
        if line:
            self.stdout.write(line)
