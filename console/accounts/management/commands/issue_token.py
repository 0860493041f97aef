from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from audit.services import Actor
from console.accounts import services
from console.accounts.models import Role, RoleGrant
from console.core.errors import ServiceError


class Command(BaseCommand):
    help = "Grant USERNAME a role (creating the user if needed) and print a new API token as the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--route", help="Route slug; without it the role covers every route.")
        parser.add_argument("--password", help="Also set a password so the user can sign in to pages.")

    def handle(self, *args, username, role, route=None, password=None, **options):
        actor = Actor.system("issue_token")
        route_obj = None
        if route:
            route_obj = _route_model().objects.filter(slug=route).first()
            if route_obj is None:
                raise CommandError(f"Unknown route {route!r}. Create it with create_route first.")
        try:
            with transaction.atomic():
                user = services.user_ensure(actor=actor, username=username)
                if password:
                    user.set_password(password)
                    user.save(update_fields=["password"])
                services.role_grant(actor=actor, user=user, role=role, route=route_obj)
                issued = services.token_issue(actor=actor, user=user)
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        scope = f"route {route}" if route else "every route"
        self.stderr.write(f"{username} is {role} on {scope}. Token (shown once):")
        self.stdout.write(issued.key)


def _route_model():
    """The ledger's Route, as the grant's foreign key names it (accounts sit below the ledger)."""
    return RoleGrant._meta.get_field("route").related_model
