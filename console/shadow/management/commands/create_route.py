from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from audit.services import Actor
from console.accounts.models import Route
from console.accounts.services import route_create
from console.core.errors import InvalidInput
from console.shadow.pipelines import validate_shadow_config
from console.shadow.services import route_shadow_set


class Command(BaseCommand):
    help = (
        "Create a route (a gated answering surface). With --shadow or --shadow-url on an existing route, "
        "set its shadow pipeline instead."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", help="Display name; required to create a route.")
        parser.add_argument("--graders-per-item", type=int, default=2)
        parser.add_argument("--guidelines", default="", help="Grading guidelines (Markdown).")
        shadow = parser.add_mutually_exclusive_group()
        shadow.add_argument(
            "--shadow",
            choices=["reference", "none"],
            help="Shadow pipeline: the built-in extractive reference pipeline, or none.",
        )
        shadow.add_argument("--shadow-url", help="Shadow pipeline: an http(s) URL answering POSTed questions.")

    def handle(self, *args, slug, name, graders_per_item, guidelines, shadow=None, shadow_url=None, **options):
        shadow_config = None
        if shadow is not None or shadow_url is not None:
            config = {"kind": "http", "url": shadow_url} if shadow_url else {"kind": shadow}
            try:
                shadow_config = validate_shadow_config({} if shadow == "none" else config)
            except InvalidInput as exc:
                raise CommandError(exc.message) from exc
            existing = Route.objects.filter(slug=slug).first()
            if existing:
                route_shadow_set(actor=Actor.system("create_route"), route=existing, config=shadow_config)
                self.stdout.write(f"Route {existing.slug}: shadow pipeline set to {shadow_config or 'none'}.")
                return
        if not name:
            raise CommandError("--name is required to create a route.")
        try:
            route = route_create(
                actor=Actor.system("create_route"),
                slug=slug,
                name=name,
                guidelines=guidelines,
                graders_per_item=graders_per_item,
                shadow_config=shadow_config,
            )
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        self.stdout.write(f"Created route {route.slug} ({route.name}).")
