from django.core.management.base import BaseCommand, CommandError

from audit.services import Actor
from console.accounts.models import Route
from console.core.errors import InvalidInput
from grading.services.pool import grading_plan_set


def _band(text: str) -> tuple[float, float, int]:
    try:
        low, high, target = text.split(":")
        return float(low), float(high), int(target)
    except ValueError:
        raise CommandError(f"--band takes LOW:HIGH:TARGET (e.g. 0.5:0.85:200), got {text!r}") from None


class Command(BaseCommand):
    help = "Set a route's sampling plan: gate-score bands with target counts, and the gold item rate."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument(
            "--band",
            action="append",
            default=[],
            type=_band,
            help="LOW:HIGH:TARGET, score in [LOW, HIGH); repeat per band. None: everything enters.",
        )
        parser.add_argument("--gold-rate", type=float, default=0.0, help="Share of items handed out that are gold.")
        parser.add_argument("--window-days", type=int, default=30, help="Days of traffic the rates are set from.")

    def handle(self, *args, slug, band, gold_rate, window_days, **options):
        route = Route.objects.filter(slug=slug).first()
        if route is None:
            raise CommandError(f"No route {slug!r}.")
        try:
            plan = grading_plan_set(
                actor=Actor.system("grading_plan"),
                route=route,
                bands=band,
                gold_rate=gold_rate,
                window_days=window_days,
            )
        except InvalidInput as exc:
            raise CommandError(exc.message) from exc
        for stratum in plan.strata:
            self.stdout.write(
                f"{stratum['name']:>12}: target {stratum['target']:>6,} of {stratum['population']:>8,} "
                f"in {window_days} days -> rate {stratum['rate']:.4f}"
            )
        self.stdout.write(
            f"Plan set for {route.slug}; gold rate {plan.gold_rate:g}. Applies to decisions entering "
            f"the pool from now on."
        )
