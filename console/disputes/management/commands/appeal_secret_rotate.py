"""`manage.py appeal_secret_rotate SLUG`: a new appeal secret for the route, printed once as the
last line. Every appeal link given out before stops working (404)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from audit.services import Actor
from console.accounts.models import Route
from console.disputes.services import appeal_secret_rotate


class Command(BaseCommand):
    help = "Rotate a route's appeal secret; prints the new secret once."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")

    def handle(self, *args, slug: str, **options) -> None:
        route = Route.objects.filter(slug=slug).first()
        if route is None:
            raise CommandError(f"No route {slug!r}.")
        secret = appeal_secret_rotate(actor=Actor.system("appeal_secret_rotate command"), route=route)
        self.stdout.write("Appeal links given out before no longer work. The new secret (shown once):")
        self.stdout.write(secret)
