from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from audit.services import Actor
from console.ledger.services import route_create


class Command(BaseCommand):
    help = "Create a route (a gated answering surface)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--graders-per-item", type=int, default=2)
        parser.add_argument("--guidelines", default="", help="Grading guidelines (Markdown).")

    def handle(self, *args, slug, name, graders_per_item, guidelines, **options):
        try:
            route = route_create(actor=Actor.system("create_route"), slug=slug, name=name,
                                 guidelines=guidelines, graders_per_item=graders_per_item)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        self.stdout.write(f"Created route {route.slug} ({route.name}).")
