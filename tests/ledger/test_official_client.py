"""The official client (clients/python/) against a live console: what an integrator runs."""

from __future__ import annotations

import pytest
from abstention_console import Console, NoSignedPolicy

from console.ledger.models import Decision
from tests import factories
from tests.monitoring.conftest import sign_policy

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ingest_token(route) -> str:
    return factories.make_token(factories.make_user("ingest-bot", "integrator", route))


def test_the_official_client_records_200_decisions_and_reads_the_signed_policy(
    live_server, route, owner, reviewer, ingest_token, tmp_path
):
    records = [factories.record(occurred_at=factories.recent()) for _ in range(200)]
    with Console(live_server.url, ingest_token, spool_dir=tmp_path, batch_size=64, flush_interval=0.05) as console:
        for record in records:
            console.record(record)
        assert console.flush(timeout=120)
        with pytest.raises(NoSignedPolicy):
            console.policy("it-support")

        signed = sign_policy(route, owner.user, reviewer.user, cutoff=0.6)
        policy = console.policy("it-support")
        assert policy["cutoff"] == 0.6 and policy["version"] == signed.version and policy["status"] == "active"
        assert console.policy("it-support") == policy  # revalidated: 304, same policy

        for record in records[:20]:  # a replay, as after an outage: stored once
            console.record(record)
        assert console.flush(timeout=60)
    stored = set(Decision.objects.filter(route=route).values_list("request_id", flat=True))
    assert stored == {record["request_id"] for record in records}
    assert not console.dead_letter_path.exists()


def test_a_rejected_decision_is_dead_lettered_and_the_rest_stored(live_server, route, ingest_token, tmp_path):
    good = [factories.record(occurred_at=factories.recent()) for _ in range(5)]
    bad = factories.record(occurred_at=factories.recent(), outcome="served", served_answer=None)
    with Console(live_server.url, ingest_token, spool_dir=tmp_path, flush_interval=60) as console:
        for record in [*good[:2], bad, *good[2:]]:
            console.record(record)
        assert console.flush(timeout=60)
    stored = set(Decision.objects.filter(route=route).values_list("request_id", flat=True))
    assert stored == {record["request_id"] for record in good}
    assert bad["request_id"] in console.dead_letter_path.read_text()
