from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from audit.services import Actor
from console.accounts import services
from console.accounts.models import Role, Route
from console.core.errors import ServiceError


class Command(BaseCommand):
    help = "Grant USERNAME a role (creating the user if needed) and print a new API token as the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--route", help="Route slug; without it the role covers every route.")
        parser.add_argument("--password", help="Also set a password so the user can sign in to pages.")
        parser.add_argument("--name", default="", help="What the token is for, as listed on the tokens page.")
        parser.add_argument("--expires-days", type=int, help="Days until the API refuses the token; default never.")
        parser.add_argument(
            "--rate",
            type=int,
            help="API calls a minute the token may make (429 past it); default the API_TOKEN_RATE_PER_MINUTE setting.",
        )

    def handle(
        self, *args, username, role, route=None, password=None, name="", expires_days=None, rate=None, **options
    ):
        if expires_days is not None and expires_days < 1:
            raise CommandError("--expires-days must be at least 1.")
        if rate is not None and rate < 1:
            raise CommandError("--rate must be at least 1 call a minute.")
        expires_at = timezone.now() + timedelta(days=expires_days) if expires_days else None
        actor = Actor.system("issue_token")
        route_obj = None
        if route:
            route_obj = Route.objects.filter(slug=route).first()
            if route_obj is None:
                raise CommandError(f"Unknown route {route!r}. Create it with create_route first.")
        try:
            with transaction.atomic():
                user = services.user_ensure(actor=actor, username=username)
                if password:
                    user.set_password(password)
                    user.save(update_fields=["password"])
                services.role_grant(actor=actor, user=user, role=role, route=route_obj)
                issued = services.token_issue(
                    actor=actor, user=user, name=name, expires_at=expires_at, rate_per_minute=rate
                )
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        scope = f"route {route}" if route else "every route"
        self.stderr.write(f"{username} is {role} on {scope}. Token (shown once):")
        self.stdout.write(issued.key)
