"""Opening a dispute through the API: quotes checked by the span verifier, one open dispute per
person, served decisions refused, the clock from the signed policy in force, permissions."""

from __future__ import annotations

from datetime import datetime, timedelta

from audit.models import AuditEvent
from tests.disputes.conftest import client_for, open_dispute, passage_id
from tests.factories import make_user


def test_a_quote_found_in_the_passage_stores_its_ranges(decisions, reader):
    response = open_dispute(reader, decisions[0])
    assert response.status_code == 201, response.json()
    body = response.json()
    text = "To reset MFA, open Settings > Security and choose Reset."
    start = text.index("open Settings")
    assert body["status"] == "open" and body["kind"] == "answerable_from_passages"
    assert body["quote_ranges"] == {"bytes": [[start, len(text) - 1]], "chars": [[start, len(text) - 1]]}
    assert body["escalated_at"] is None and body["opened_by"] == "support-agent"
    event = AuditEvent.objects.get(action="dispute_opened")
    assert event.route == "it-support" and event.object_id == str(body["id"]) and event.actor.endswith("support-agent")


def test_a_quote_not_in_the_passage_is_400_quote_not_found(decisions, reader):
    response = open_dispute(
        reader, decisions[0], evidence={"passage_id": passage_id(decisions[0], 1), "quote": "choose Delete"}
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "quote_not_found"
    # The quote is in the other passage, not the one named.
    response = open_dispute(
        reader, decisions[0], evidence={"passage_id": passage_id(decisions[0], 2), "quote": "choose Reset"}
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "quote_not_found"


def test_a_unicode_quote_matches_with_case_folding_and_byte_ranges_differ(decisions, reader):
    response = open_dispute(
        reader, decisions[0], evidence={"passage_id": passage_id(decisions[0], 2), "quote": "HAUPTSTRASSE 5"}
    )
    assert response.status_code == 201, response.json()
    text = "Die Lieferadresse ist Hauptstraße 5, Zimmer 12."
    start = text.index("Hauptstraße")
    end = start + len("Hauptstraße 5")
    ranges = response.json()["quote_ranges"]
    assert ranges["chars"] == [[start, end]]
    assert ranges["bytes"] == [[len(text[:start].encode()), len(text[:end].encode())]]
    assert text.encode()[ranges["bytes"][0][0] : ranges["bytes"][0][1]].decode() == "Hauptstraße 5"


def test_a_passage_of_another_decision_is_refused(decisions, reader):
    response = open_dispute(reader, decisions[0], evidence={"passage_id": 999_999, "quote": "Reset"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "unknown_passage"


def test_outside_source_and_no_evidence(decisions, reader, reviewer):
    response = open_dispute(
        reader,
        decisions[0],
        kind="answerable_elsewhere",
        evidence={"url": "https://wiki.example.org/mfa", "quote": "Reset it in Settings."},
    )
    assert response.status_code == 201 and response.json()["evidence"]["url"] == "https://wiki.example.org/mfa"
    assert open_dispute(reviewer, decisions[0], kind="retrieval_missed", evidence=None).status_code == 201
    missing = open_dispute(make_client("expert"), decisions[0], kind="answerable_elsewhere", evidence=None)
    assert missing.status_code == 400


def make_client(name: str, role: str = "reader"):
    from console.accounts.models import Route

    return client_for(make_user(name, role, Route.objects.get(slug="it-support")))


def test_reason_is_required_and_capped(decisions, reader):
    assert open_dispute(reader, decisions[0], reason="").status_code == 400
    response = open_dispute(reader, decisions[0], reason="x" * 5001)
    assert response.status_code == 400 and response.json()["error"]["details"][0]["field"] == "reason"
    assert open_dispute(reader, decisions[0], reason="x" * 5000).status_code == 201
    assert open_dispute(reader, decisions[0], kind="appeal").status_code == 400


def test_one_open_dispute_per_person_per_decision(decisions, reader, reviewer):
    first = open_dispute(reader, decisions[0]).json()
    second = open_dispute(reader, decisions[0], kind="other", evidence=None)
    assert second.status_code == 409
    error = second.json()["error"]
    assert error["code"] == "already_open" and error["details"][0]["id"] == first["id"]
    assert open_dispute(reviewer, decisions[0]).status_code == 201  # another person may
    withdrawn = reader.post(
        f"/api/v1/disputes/{first['id']}/resolve", {"resolution": "withdrawn", "note": "wrong one"}, format="json"
    )
    assert withdrawn.status_code == 200 and withdrawn.json()["status"] == "withdrawn"
    assert open_dispute(reader, decisions[0]).status_code == 201  # once closed, a new one may be opened


def test_a_served_decision_cannot_be_disputed(decisions, reader):
    response = open_dispute(reader, decisions[1])
    assert response.status_code == 400 and response.json()["error"]["code"] == "not_refused"


def test_due_by_is_the_route_default_without_a_signed_policy(decisions, reader):
    body = open_dispute(reader, decisions[0]).json()
    opened, due = datetime.fromisoformat(body["opened_at"]), datetime.fromisoformat(body["due_by"])
    assert due - opened == timedelta(hours=72)
    assert body["no_signed_escalation_path"] is True and body["policy_version"] is None


def test_due_by_follows_the_signed_policy_in_force(decisions, reader, signed_policy):
    body = open_dispute(reader, decisions[0]).json()
    opened, due = datetime.fromisoformat(body["opened_at"]), datetime.fromisoformat(body["due_by"])
    assert due - opened == timedelta(hours=24)
    assert body["no_signed_escalation_path"] is False and body["policy_version"] == signed_policy.version


def test_who_may_open_and_read(decisions, reader, grader, auditor, outsider, other_route):
    assert open_dispute(grader, decisions[0]).status_code == 403
    assert open_dispute(outsider, decisions[0]).status_code == 403
    hr_reader = client_for(make_user("hr-agent", "reader", other_route))
    assert open_dispute(hr_reader, decisions[0]).status_code == 404  # another route's decision is not there
    dispute = open_dispute(reader, decisions[0]).json()
    assert open_dispute(auditor, decisions[0]).status_code == 201
    assert hr_reader.get(f"/api/v1/disputes/{dispute['id']}").status_code == 404
    assert grader.get(f"/api/v1/disputes/{dispute['id']}").status_code == 403
    assert grader.get("/api/v1/disputes").status_code == 403
    assert reader.get(f"/api/v1/disputes/{dispute['id']}").json()["id"] == dispute["id"]
    assert [d["id"] for d in hr_reader.get("/api/v1/disputes").json()["disputes"]] == []


def test_a_reader_reads_refusals_but_not_statistics_grades_or_audit(decisions, reader):
    assert reader.get(f"/api/v1/decisions/{decisions[0]}").status_code == 200
    for path in (
        "/api/v1/routes/it-support/operating-points",
        "/api/v1/routes/it-support/calibration",
        "/api/v1/routes/it-support/policy",
        "/api/v1/routes/it-support/policies",
        "/api/v1/audit/events",
    ):
        assert reader.get(path).status_code in (403, 404), path
    assert reader.post("/api/v1/grading/next", {}, format="json").status_code == 403
    from django.test import Client

    pages = Client()
    pages.force_login(reader.user)
    assert pages.get(f"/decisions/{decisions[0]}/").status_code == 200
    assert pages.get("/operating-points/?route=it-support").status_code == 403
    assert pages.get("/audit/").status_code == 403
    assert "Audit history" not in pages.get(f"/decisions/{decisions[0]}/").content.decode()


def test_a_reader_is_not_shown_grades_in_the_decision_lookup(decisions, reader, reviewer):
    assert "final_label" in reviewer.get(f"/api/v1/decisions/{decisions[0]}").json()
    body = reader.get(f"/api/v1/decisions/{decisions[0]}").json()
    assert "final_label" not in body and "grades" not in body and body["request_id"] == "req-refused"
