"""What the database guarantees about signed versions, concurrent signatures and compliance."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import DatabaseError, connection, connections, transaction
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from audit.services import Actor
from console.governance import selectors, services
from console.governance.models import PolicyVersion
from tests.analysis.populations import census, decision_records, post_decisions
from tests.governance.conftest import draft_body


@pytest.fixture
def graded(integrator):
    """The 300 labelled decisions of tests/governance/conftest.py, built in the test: the races below
    commit, which a test starting from the module's world cannot (tests/worlds.py)."""
    return census(integrator, n=300, seed=3)


def _sign(owner, draft) -> int:
    return owner.post(
        f"/api/v1/policies/{draft['id']}/sign", {"evidence_sha256": draft["evidence_sha256"]}, format="json"
    ).status_code


@pytest.mark.django_db
@pytest.mark.parametrize(
    "assignment",
    [
        "cutoff = 0.1",
        "refusal_message = 'changed'",
        "evidence_text = '{}'",
        "evidence_sha256 = repeat('0', 64)",
        "owner_id = created_by_id",
        "signed_at = now() - interval '1 day'",
        "escalation_response_hours = 1",
    ],
)
def test_the_trigger_refuses_sql_updates_of_a_signed_versions_content(draft, owner, assignment):
    assert _sign(owner, draft) == 200
    with (
        pytest.raises(DatabaseError, match="only its status may change"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(f"UPDATE governance_policyversion SET {assignment} WHERE id = %s", [draft["id"]])
    stored = PolicyVersion.objects.get(pk=draft["id"])
    assert stored.cutoff == 0.85 and stored.evidence_sha256 == draft["evidence_sha256"]


@pytest.mark.django_db
def test_the_trigger_lets_the_status_move_and_refuses_deleting_a_signed_version(draft, owner):
    assert _sign(owner, draft) == 200
    with connection.cursor() as cursor:
        cursor.execute("UPDATE governance_policyversion SET status = 'needs_recheck' WHERE id = %s", [draft["id"]])
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "needs_recheck"
    with pytest.raises(DatabaseError, match="DELETE refused"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM governance_policyversion WHERE id = %s", [draft["id"]])


def _sql(statement: str, params: list | None = None) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement, params or [])


@pytest.mark.django_db
@pytest.mark.parametrize("assignment", ["rationale = 'edited'", "cutoff = 0.1", "owner_id = created_by_id"])
def test_a_drafts_content_is_as_drafted_and_only_its_evidence_may_be_recomputed(draft, assignment):
    with pytest.raises(DatabaseError, match="only a draft's evidence may change"):
        _sql(f"UPDATE governance_policyversion SET {assignment} WHERE id = %s", [draft["id"]])
    _sql(
        "UPDATE governance_policyversion SET evidence_text = '{}', evidence_sha256 = repeat('1', 64) WHERE id = %s",
        [draft["id"]],
    )
    assert PolicyVersion.objects.get(pk=draft["id"]).evidence_sha256 == "1" * 64


@pytest.mark.django_db
@pytest.mark.parametrize(
    "assignment",
    [
        "status = 'active', signed_at = now(), signed_by_id = owner_id",  # a signature without the owner
        "status = 'active', signed_at = now(), signed_by_id = owner_id, cutoff = 0.1",  # and a new cutoff
        "status = 'needs_recheck', signed_at = now(), signed_by_id = owner_id",
        "status = 'superseded', signed_at = now(), signed_by_id = owner_id",
    ],
)
def test_the_apps_role_cannot_put_a_draft_in_force_by_sql(draft, assignment):
    with pytest.raises(DatabaseError):
        _sql(f"UPDATE governance_policyversion SET {assignment} WHERE id = %s", [draft["id"]])
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "draft"


@pytest.mark.django_db
def test_the_signing_function_signs_a_draft_for_its_owner_only(draft, owner):
    stored = PolicyVersion.objects.get(pk=draft["id"])
    with pytest.raises(DatabaseError, match="not a draft owned by"):
        _sql("SELECT governance_policy_sign(%s, %s, now())", [stored.pk, stored.created_by_id])
    _sql("SELECT governance_policy_sign(%s, %s, now())", [stored.pk, stored.owner_id])
    signed = PolicyVersion.objects.get(pk=draft["id"])
    assert signed.status == "active" and signed.signed_by_id == stored.owner_id and signed.signed_at is not None
    with pytest.raises(DatabaseError, match="not a draft owned by"):
        _sql("SELECT governance_policy_sign(%s, %s, now())", [stored.pk, stored.owner_id])  # only a draft


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["active", "needs_recheck", "superseded"])
def test_a_version_cannot_be_inserted_already_signed(draft, status):
    columns = (
        "route_id, version, cutoff, exchange_answers, owner_id, created_by_id, created_at, escalation_contact, "
        "escalation_channel, escalation_response_hours, refusal_message, rationale, filters, confidence, interval, "
        "evidence_text, evidence_sha256, data_version, warnings"
    )
    with pytest.raises(DatabaseError, match="starts as an unsigned draft"):
        _sql(
            f"INSERT INTO governance_policyversion ({columns}, status, signed_at, signed_by_id) "
            f"SELECT {columns}, %s, now(), owner_id FROM governance_policyversion WHERE id = %s",
            [status, draft["id"]],
        )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("start", "to"),
    [("superseded", "active"), ("superseded", "needs_recheck"), ("active", "draft"), ("active", "withdrawn")],
)
def test_a_signed_version_moves_only_along_the_legal_transitions(draft, owner, start, to):
    assert _sign(owner, draft) == 200
    if start == "superseded":
        _sql("UPDATE governance_policyversion SET status = 'superseded' WHERE id = %s", [draft["id"]])
    with pytest.raises(DatabaseError, match="not a legal transition"):
        _sql("UPDATE governance_policyversion SET status = %s WHERE id = %s", [to, draft["id"]])
    assert PolicyVersion.objects.get(pk=draft["id"]).status == start


def _race(actions) -> list:
    """Run the callables at once, each in its own thread and database connection."""
    barrier = threading.Barrier(len(actions))
    results: list = [None] * len(actions)

    def run(index, action):
        try:
            barrier.wait()
            results[index] = action()
        except Exception as exc:  # noqa: BLE001 -- the test inspects what each thread got
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


def _owner_client(owner) -> APIClient:
    """A client of its own per thread, with the owner's token (a session alone does not sign)."""
    client = APIClient()
    client.credentials(**owner._credentials)
    return client


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_signatures_of_one_draft_one_wins(draft, owner):
    results = _race([lambda: _sign(_owner_client(owner), draft) for _ in range(2)])
    assert sorted(results) == [200, 409]
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "active"
    from audit.models import AuditEvent

    assert AuditEvent.objects.filter(action="policy_signed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_drafts_signed_at_once_leave_exactly_one_in_force(draft, reviewer, owner):
    second = reviewer.post("/api/v1/routes/it-support/policies", draft_body(cutoff=0.9), format="json").json()
    results = _race([lambda d=d: _sign(_owner_client(owner), d) for d in (draft, second)])
    # Signatures are serialised. Both drafts were drafted before either was signed, so whichever is
    # signed second was drafted before the version then in force: a roll-back, refused unless asked for.
    assert sorted(results) == [200, 409], results
    assert sorted(PolicyVersion.objects.values_list("status", flat=True)) == ["active", "draft"]


def _at(day: int, hour: int = 12) -> datetime:
    return datetime(2026, 11, day, hour, tzinfo=UTC)


@pytest.mark.django_db
def test_the_compliance_count_equals_a_sql_reference(route, reviewer, owner, integrator, monkeypatch):
    # Decisions on three days with logged cutoffs 0.7 and 0.85; signatures on day 2 (0.85) and day 4 (0.7).
    records = []
    moments = [(1, 12, 0.7), (2, 12, 0.7), (3, 12, 0.85), (3, 12, 0.7), (4, 12, 0.85), (5, 12, 0.7), (5, 12, 0.85)]
    moments += [(5, 12, 0.85)]
    # In the hours the signatures fall in (18:00), before and after them: read decision by decision.
    moments += [(2, 17, 0.7), (4, 18, 0.85)]
    for day, hour, cutoff in moments:
        at = _at(day, hour) + (timedelta(minutes=30) if hour in (17, 18) else timedelta())
        records += decision_records([0.5, 0.9], occurred_at=at.isoformat().replace("+00:00", "Z"))
        for r in records[-2:]:
            r["gate"]["cutoff"] = cutoff
    post_decisions(integrator, records)
    actor = Actor.system("tests")
    from console.governance.validation import parse_draft

    for cutoff, signed_at in [(0.85, _at(2, 18)), (0.7, _at(4, 18))]:
        policy = services.policy_draft(
            actor=actor,
            user=reviewer.user,
            route=route,
            draft=parse_draft(draft_body(cutoff=cutoff, band_lower=None), route=route),
        )
        with monkeypatch.context() as clock:  # sign in the data's past
            clock.setattr(timezone, "now", lambda at=signed_at: at)
            services.policy_sign(actor=actor, user=owner.user, policy=policy, evidence_sha256=policy.evidence_sha256)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT count(*) FROM ledger_decision d
             WHERE d.route_id = %s
               AND d.cutoff <> (SELECT p.cutoff FROM governance_policyversion p
                                 WHERE p.route_id = d.route_id AND p.signed_at <= d.occurred_at
                                 ORDER BY p.signed_at DESC LIMIT 1)
        """,
            [route.pk],
        )
        (reference,) = cursor.fetchone()
    # Day 2 noon and 17:30 precede the first signature; day 3 0.7 (2) differs from 0.85; day 4 18:30 0.85
    # (2) differs from 0.7, signed at 18:00; day 5 0.85 (4) differs from 0.7.
    assert reference == 8
    assert selectors.decisions_not_following_policy([route.pk]) == {route.pk: reference}
    assert selectors.decisions_not_following_policy() == {route.pk: reference}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT d.id FROM ledger_decision d
             WHERE d.route_id = %s
               AND d.cutoff <> (SELECT p.cutoff FROM governance_policyversion p
                                 WHERE p.route_id = d.route_id AND p.signed_at <= d.occurred_at
                                 ORDER BY p.signed_at DESC LIMIT 1)
             ORDER BY d.occurred_at DESC, d.id DESC
        """,
            [route.pk],
        )
        newest = [pk for (pk,) in cursor.fetchall()]
    for limit in (3, 20):  # the newest few, and all of them
        listed = selectors.decisions_not_following_policy_list(route, limit=limit)
        assert [row["id"] for row in listed] == newest[:limit]
    assert reviewer.get("/api/v1/routes/it-support/policies").json()["decisions_not_following_policy"] == reference
    # The refusals list filters the same decisions ("Gate not following policy"), served ones included.
    pages = Client()
    pages.force_login(reviewer.user)
    export = pages.get("/refusals/?route=it-support&outcome=any&not_following_policy=on&format=csv")
    assert export.status_code == 200
    assert len(b"".join(export.streaming_content).decode().splitlines()) - 1 == reference  # less the header
    late = decision_records([0.5], occurred_at=_at(5).isoformat().replace("+00:00", "Z"))[0]
    [late_id] = post_decisions(integrator, [late])
    signed = reviewer.get(f"/api/v1/decisions/{late_id}").json()["signed_policy"]
    assert signed["cutoff"] == 0.7 and signed["version"] == 2 and signed["gate_followed"] is True
