"""grading 0007 keeps an item's text only where it differs from its decision's, and its reverse puts
every text back."""

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from console.core.db_roles import as_owner
from console.shadow.models import ShadowRun
from grading import tasks
from grading.models import GradingItem
from tests.factories import ingest, make_route, record, served_record

BEFORE = [("grading", "0006_label_revision")]
# After grading 0008: every app forward (the newest state). Taking grading back to 0006 takes back
# what depends on it in other apps too (ledger 0020 runs after grading 0009, and the ledger's later
# migrations after it), so stopping at grading 0008 would leave today's models reading columns that
# are not there yet.
AFTER = None


def _migrate(target):
    """Migrate to `target` (None: every app's newest) as the owner role, as `migrate` does (the
    tests run as the app role)."""
    with as_owner():
        executor = MigrationExecutor(connection)
        target = target or executor.loader.graph.leaf_nodes()
        executor.migrate(target)
        return executor.loader.project_state(target).apps


@pytest.mark.slow  # migrates the test database back and forth: seconds, for the full suite (tests/conftest.py)
@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_only_texts_the_decision_does_not_hold_and_puts_them_back(route):
    make_route("shadowed", shadow_config={"kind": "reference"})
    served, claimed = ingest(
        [
            served_record(question="How do I reset MFA?", claim="The draft.", served_answer="Choose Reset."),
            record(question="Where is the printer?", claim="On floor two."),
        ]
    )
    [shadowed] = ingest([record(route="shadowed", question="Who signs leave?", claim="HR does.")])
    # committed here, so ingest has queued its shadow run already: the run is set to succeed by hand
    ShadowRun.objects.update_or_create(
        decision_id=shadowed,
        defaults={
            "pipeline": "reference",
            "status": "succeeded",
            "answer": "Your manager.",
            "passages_sha256": "0" * 64,
        },
    )
    tasks.grading_pool_sweep()
    GradingItem.objects.filter(decision_id=shadowed).delete()  # entered from whatever the run said first
    tasks.grading_pool_sweep()
    try:
        old_apps = _migrate(BEFORE)
        OldItem = old_apps.get_model("grading", "GradingItem")
        back = {d: (q, a) for d, q, a in OldItem.objects.values_list("decision_id", "question", "answer")}
        assert back == {
            served: ("How do I reset MFA?", "Choose Reset."),
            claimed: ("Where is the printer?", "On floor two."),
            shadowed: ("Who signs leave?", "Your manager."),
        }
        # a copy that no longer matches its decision (edited by hand) is the item's own text
        OldItem.objects.filter(decision_id=claimed).update(question="Where is the printer, please?")
        gold = OldItem.objects.create(
            route_id=route.pk,
            decision_id=served,
            question="How do I reset MFA?",
            answer="Call the desk.",
            answer_source="gold",
            stratum="gold",
            queue_key=7,
            is_gold=True,
            gold_verdict="incorrect",
        )
        before = set(OldItem.objects.values_list("pk", "question", "answer"))

        _migrate(AFTER)
        stored = {
            (i.decision_id, i.is_gold): (i.own_question, i.own_answer, i.question, i.answer)
            for i in GradingItem.objects.with_texts()
        }
        assert stored == {
            (served, False): ("", "", "How do I reset MFA?", "Choose Reset."),
            (claimed, False): ("Where is the printer, please?", "", "Where is the printer, please?", "On floor two."),
            (shadowed, False): ("", "Your manager.", "Who signs leave?", "Your manager."),
            (served, True): ("", "Call the desk.", "How do I reset MFA?", "Call the desk."),
        }
        assert GradingItem.objects.get(pk=gold.pk).answer == "Call the desk."

        old_apps = _migrate(BEFORE)
        assert (
            set(old_apps.get_model("grading", "GradingItem").objects.values_list("pk", "question", "answer")) == before
        )
    finally:
        call_command("migrate", verbosity=0)  # every app forward again, for the tests after this one
