import secrets

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction

from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts import services as accounts
from console.accounts.models import Route
from console.disputes.demo import demo_disputes
from console.governance.demo import demo_policies, demo_policy_waiting
from console.ledger import services
from console.ledger.services import route_answer_settings_set
from console.ledger.validation import validate_batch
from console.review import long_demo
from console.review.demo import demo_answer_is_correct, demo_records, gap_records
from console.review.monitoring_demo import demo_monitoring
from console.shadow.services import route_shadow_set
from console.trials.demo import demo_trial
from grading import selectors as grading_selectors
from grading.services.labels import labels_import
from grading.services.pool import route_grading_set
from grading.validation import validate_labels

DEMO_ROUTES = {"it-support": "IT support", "hr-policy": "HR policy"}
# The third route, of long answers graded claim by claim (console/review/long_demo.py). Kept apart
# from DEMO_ROUTES: it has no shadow pipeline, no planted gaps and half as many decisions.
LONG_ROUTE = {long_demo.SLUG: long_demo.NAME}
DEMO_USERS = [  # username, role, route (None = all routes)
    ("admin", "admin", None),
    ("lead", "policy_owner", "it-support"),
    ("lead", "policy_owner", "hr-policy"),
    ("lead", "policy_owner", long_demo.SLUG),
    ("reviewer", "reviewer", None),
    ("auditor", "auditor", None),
    ("grader1", "grader", None),
    ("grader2", "grader", None),
    ("agent", "reader", "hr-policy"),
]


class Command(BaseCommand):
    help = "Create the demo workspace: three routes, demo users (logins written to the data folder) and decisions."

    def add_arguments(self, parser):
        parser.add_argument(
            "--decisions", type=int, default=600, help="Decisions per route (half as many on Policy briefs)."
        )
        parser.add_argument(
            "--no-logins", action="store_true", help="Do not print the logins (make run prints them in its banner)."
        )

    def handle(self, *args, decisions: int, **options):
        actor = Actor.system("load_demo")
        for slug, name in DEMO_ROUTES.items():
            if not Route.objects.filter(slug=slug).exists():
                with transaction.atomic():
                    route = accounts.route_create(actor=actor, slug=slug, name=name)
                    route_grading_set(
                        actor=actor,
                        route=route,
                        guidelines="Grade **correct** only if every statement in the answer is "
                        "supported by the passages or is common knowledge.",
                    )
        long_route = Route.objects.filter(slug=long_demo.SLUG).first()
        if long_route is None:
            with transaction.atomic():
                long_route = accounts.route_create(actor=actor, slug=long_demo.SLUG, name=long_demo.NAME)
                route_answer_settings_set(actor=actor, route=long_route, **long_demo.SETTINGS)
        routes = {r.slug: r for r in Route.objects.filter(slug__in=[*DEMO_ROUTES, *LONG_ROUTE])}
        logins: dict[str, list[str]] = {}  # username -> [password, role on route, ...]
        users = {}
        for username, role, route in DEMO_USERS:
            if username not in logins:  # one password per person, however many roles they hold
                logins[username] = [f"{username}-{secrets.token_hex(3)}"]
            with transaction.atomic():
                user = accounts.user_ensure(actor=actor, username=username, email=f"{username}@demo.invalid")
                user.set_password(logins[username][0])
                user.is_staff = user.is_superuser = role == "admin"
                user.save(update_fields=["password", "is_staff", "is_superuser"])
                accounts.role_grant(actor=actor, user=user, role=role, route=routes.get(route))
            users[username] = user
            logins[username].append(f"{role}{' on ' + route if route else ''}")
        # Both routes re-run their refusals through the built-in extractive pipeline, and its answers
        # wait for the graders. The demo's served answers are written the way that pipeline writes, so
        # graders cannot tell a refused item from a served one by its form (see the README); graded on
        # the logged claims instead, refusals would give themselves away by how little of them the
        # passages hold. HR policy also comes with an imported graded set, so its operating points
        # can be read at once.
        for slug in DEMO_ROUTES:
            route_shadow_set(actor=actor, route=routes[slug], config={"kind": "reference"})
        created = 0
        graded_set = []
        for slug in DEMO_ROUTES:
            # HR policy's integrator sends its own question vectors; IT support uses the built-in embedder.
            records = list(demo_records(slug, decisions, embed=slug == "hr-policy"))
            for start in range(0, len(records), 500):
                items, errors = validate_batch(records[start : start + 500])
                assert not errors, errors[:3]
                created += services.decision_ingest(actor=actor, items=items, routes=routes).created
            if slug == "hr-policy":
                graded_set = [
                    {
                        "route": slug,
                        "request_id": r["request_id"],
                        "source": "demo-graded-set",
                        "verdict": "correct" if demo_answer_is_correct(r) else "incorrect",
                    }
                    for r in records
                ]
        # Policy briefs: long answers and their claim verdicts, a graded set imported at once so
        # that its operating points show E[S] beside Pr(S = 1).
        long_created, long_graded = long_demo.demo_long_route(
            actor=actor, route=long_route, count=max(20, decisions // 2)
        )
        created += long_created
        imported = self._import_labels(actor, graded_set + long_graded)
        demo_policies(actor=actor, routes=routes, users=users)

        created += self._plant_gaps(actor, routes, decisions)

        demo_trial(actor=actor, routes=routes, users=users)
        demo_disputes(actor=actor, routes=routes, users=users)
        demo_monitoring(actor=actor, routes=routes, users=users)
        demo_policy_waiting(actor=actor, routes=routes, users=users)
        with transaction.atomic():
            audit_record(
                actor=actor,
                action=Action.DEMO_LOADED,
                object_type="workspace",
                object_id="demo",
                payload={
                    "decisions_created": created,
                    "labels_imported": imported,
                    "users": [u for u, _, _ in DEMO_USERS],
                },
            )
        logins = [f"{name:<9} {password:<16} ({', '.join(roles)})" for name, (password, *roles) in logins.items()]
        logins_file = settings.DATA_DIR / "demo-logins.txt"
        logins_file.write_text("\n".join(logins) + "\n")
        logins_file.chmod(0o600)
        self.stdout.write(
            f"Demo workspace ready: {created} decisions, {imported} imported labels. Logins in {logins_file}:"
        )
        if not options.get("no_logins"):
            for line in logins:
                self.stdout.write("  " + line)

    @staticmethod
    def _plant_gaps(actor, routes: dict[str, Route], decisions: int) -> int:
        """Two topics per route that the corpus does not cover, then what a worker would do next
        (span verification, the built-in embedder's fit, the gap clustering), done here so that
        /gaps/ shows them at the top without waiting for the worker."""
        from console.ledger.models import Decision
        from console.similarity.services.builtin import embedder_fit
        from console.similarity.services.gaps import gaps_compute
        from console.verification.services import decisions_verify

        created = 0
        for slug in DEMO_ROUTES:
            items, errors = validate_batch(list(gap_records(slug, max(16, decisions // 12), embed=slug == "hr-policy")))
            assert not errors, errors[:3]
            created += services.decision_ingest(actor=actor, items=items, routes=routes).created
        refused = list(
            Decision.objects.filter(route__slug__in=DEMO_ROUTES, outcome="refused").values_list("pk", flat=True)
        )
        decisions_verify(actor=actor, decision_ids=refused)
        embedder_fit(actor=actor, route_id=routes["it-support"].pk)
        for slug in DEMO_ROUTES:
            gaps_compute(actor=actor, route_id=routes[slug].pk)
        return created

    @staticmethod
    def _import_labels(actor, records: list[dict]) -> int:
        created = 0
        for start in range(0, len(records), 1000):
            items, errors = validate_labels(records[start : start + 1000])
            assert not errors, errors[:3]
            routes, _ = services.routes_for_items(items)
            decision_ids, unknown = grading_selectors.decisions_for_labels(items, routes)
            assert not unknown, unknown[:3]
            created += labels_import(actor=actor, items=items, routes=routes, decision_ids=decision_ids).created
        return created
