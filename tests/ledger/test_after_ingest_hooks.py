"""Work queued after an ingest batch: one message per batch, or per share of it when the app asks."""

from django.conf import settings

from console.ledger import hooks
from console.verification import tasks as verification_tasks


def test_a_task_asking_for_shares_gets_one_message_per_share_and_the_rest_one_per_batch(monkeypatch):
    sent = []
    monkeypatch.setattr(hooks, "enqueue", lambda task, ids: sent.append((task, ids)))
    monkeypatch.setattr(hooks, "_after_ingest", [])
    monkeypatch.setattr(hooks, "_ids_per_job", {})
    hooks.register_after_ingest("whole")
    hooks.register_after_ingest("shared", ids_per_job=2)
    hooks.queue_after_ingest([1, 2, 3, 4, 5])
    assert sent == [("whole", [1, 2, 3, 4, 5]), ("shared", [1, 2]), ("shared", [3, 4]), ("shared", [5])]


def test_span_checks_are_queued_in_shares_of_an_ingest_batch():
    assert hooks._ids_per_job[verification_tasks.decisions_verify] == settings.VERIFY_IDS_PER_JOB == 250
