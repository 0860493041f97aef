from django.core.management.base import BaseCommand, CommandError

from audit.services import Actor
from console.core.errors import InvalidInput
from console.ledger.models import Decision
from grading.services.pool import gold_item_create


class Command(BaseCommand):
    help = "Make a gold item from a decision: its question and passages with an answer whose verdict is known."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("request_id")
        parser.add_argument("--verdict", required=True, choices=["correct", "incorrect"])
        parser.add_argument("--answer", help="The answer graders see (default: the decision's answer under review).")

    def handle(self, *args, slug, request_id, verdict, answer, **options):
        decision = Decision.objects.select_related("route").filter(route__slug=slug, request_id=request_id).first()
        if decision is None:
            raise CommandError(f"No decision {request_id!r} on route {slug!r}.")
        try:
            item = gold_item_create(
                actor=Actor.system("grading_gold"), decision=decision, verdict=verdict, answer=answer
            )
        except InvalidInput as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Gold item {item.pk} ({verdict}) added to {slug}.")
