"""The policy pages: the route's policy, the draft form, the decision record and signing with step-up."""

from __future__ import annotations

import pytest
from django.test import Client

from console.governance.models import PolicyVersion
from console.ledger.models import Decision
from tests.factories import make_user
from tests.governance.conftest import draft_body

pytestmark = pytest.mark.django_db


def _browser(client_for_api) -> Client:
    browser = Client()
    browser.force_login(client_for_api.user)
    return browser


def test_signing_in_the_browser_needs_the_password_and_the_read_tick(draft, owner):
    page = _browser(owner)
    url = f"/policies/{draft['id']}/sign/"
    shown = page.get(url)
    assert shown.status_code == 200
    stored = PolicyVersion.objects.get(pk=draft["id"])
    assert stored.evidence_text.replace('"', "&quot;") in shown.content.decode()  # the evidence exactly as stored
    form = {"evidence_sha256": draft["evidence_sha256"], "read_evidence": "yes", "password": "wrong"}
    assert page.post(url, form).status_code == 400
    assert page.post(url, form | {"password": "pw-12345678", "read_evidence": ""}).status_code == 400
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "draft"
    done = page.post(url, form | {"password": "pw-12345678"})
    assert done.status_code == 302 and done["Location"] == "/routes/it-support/policy/"
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "active"
    in_force = page.get("/routes/it-support/policy/").content.decode()
    assert "In force: version 1" in in_force and "<strong>reliably</strong>" in in_force


def test_the_owners_browser_session_cannot_sign_through_the_api(draft, owner):
    session = Client(enforce_csrf_checks=True)
    session.force_login(owner.user)
    session.get(f"/policies/{draft['id']}/sign/")  # sets the CSRF cookie, as a page left open would
    token = session.cookies["csrftoken"].value
    response = session.post(
        f"/api/v1/policies/{draft['id']}/sign",
        {"evidence_sha256": draft["evidence_sha256"]},
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == 403 and response.json()["error"]["code"] == "step_up_required"
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "draft"
    signed = owner.post(
        f"/api/v1/policies/{draft['id']}/sign", {"evidence_sha256": draft["evidence_sha256"]}, format="json"
    )
    assert signed.status_code == 200  # the owner's token is the proof


def test_wrong_sign_form_passwords_count_against_the_sign_in_throttle(draft, owner, settings):
    from django.core.cache import cache

    cache.clear()
    settings.LOGIN_FAILURES_PER_USER = 3
    page = _browser(owner)
    url = f"/policies/{draft['id']}/sign/"
    form = {"evidence_sha256": draft["evidence_sha256"], "read_evidence": "yes", "password": "wrong"}
    assert [page.post(url, form).status_code for _ in range(3)] == [400, 400, 400]
    refused = page.post(url, form | {"password": "pw-12345678"})  # right, but throttled now
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "draft"
    login = Client().post("/accounts/login/", {"username": owner.user.get_username(), "password": "pw-12345678"})
    assert login.status_code == 429  # one count: the sign-in page refuses this user too
    cache.clear()


def test_nobody_but_the_owner_reaches_the_sign_page(draft, reviewer, admin, other_owner):
    for client in (reviewer, admin, other_owner):
        page = _browser(client)
        assert page.get(f"/policies/{draft['id']}/sign/").status_code == 403
        form = {"evidence_sha256": draft["evidence_sha256"], "read_evidence": "yes", "password": "pw-12345678"}
        assert page.post(f"/policies/{draft['id']}/sign/", form).status_code == 403
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "draft"


def test_the_refusal_message_is_sanitised(reviewer, owner, graded):
    from tests.governance.conftest import draft_body

    body = draft_body(refusal_message="Sorry <script>alert(1)</script> [desk](javascript:alert(2))")
    created = reviewer.post("/api/v1/routes/it-support/policies", body, format="json").json()
    html = _browser(reviewer).get(f"/policies/{created['id']}/").content.decode()
    assert "<script>alert(1)" not in html and "javascript:alert" not in html


def test_the_draft_form_saves_a_draft_and_names_each_missing_field(reviewer, owner, graded):
    page = _browser(reviewer)
    prefilled = page.get("/routes/it-support/policy/draft/?cutoff=0.85&answers=yn&c_w=20&c_a=0.5&from=2026-10-01")
    html = prefilled.content.decode()
    assert prefilled.status_code == 200 and 'value="0.85"' in html and 'name="from" value="2026-10-01"' in html
    assert "&quot;rate&quot;: 10" in html  # the answers the questions gave
    missing = page.post("/routes/it-support/policy/draft/", {"cutoff": "0.85"})
    assert missing.status_code == 400
    for field in (
        "Owner",
        "Rationale",
        "Refusal message",
        "Escalation contact",
        "Escalation channel",
        "Response time in hours",
    ):
        assert f"<strong>{field}</strong>" in missing.content.decode()
    saved = page.post(
        "/routes/it-support/policy/draft/",
        {
            "cutoff": "0.85",
            "band_lower": "0.4",
            "owner": "owner",
            "rationale": "Because.",
            "escalation_contact": "Desk",
            "escalation_channel": "desk@example.org",
            "escalation_response_hours": "24",
            "refusal_message": "Sorry.",
            "exchange_answers": '[{"rate": 10, "accept": true}]',
            "c_w": "20",
            "c_a": "0.5",
            "from": "2026-10-01",
        },
    )
    assert saved.status_code == 302
    policy = PolicyVersion.objects.get()
    assert policy.filters["from"] == "2026-10-01" and policy.exchange_answers == [{"rate": 10, "accept": True}]
    assert policy.cost_threshold == pytest.approx(19.5 / 21)


def test_the_record_prints_and_its_json_matches_the_api(draft, reviewer):
    page = _browser(reviewer)
    html = page.get(f"/policies/{draft['id']}/").content.decode()
    assert "policy-record.css" in html and draft["evidence_sha256"] in html
    as_json = page.get(f"/policies/{draft['id']}/record.json").json()
    assert as_json["evidence_sha256"] == draft["evidence_sha256"] and as_json["evidence_text"]


def test_the_operating_points_page_offers_propose_as_policy(reviewer, graded, integrator):
    html = _browser(reviewer).get("/operating-points/?route=it-support&cutoffs=0.7,0.85").content.decode()
    assert "/routes/it-support/policy/draft/?cutoff=0.85" in html and "Propose as policy" in html
    assert "Propose as policy" not in _browser(integrator).get("/operating-points/?route=it-support").content.decode()


def test_the_decision_page_shows_the_logged_and_the_signed_cutoff(draft, owner, reviewer, integrator):
    from tests.analysis.populations import decision_records, post_decisions

    owner.post(f"/api/v1/policies/{draft['id']}/sign", {"evidence_sha256": draft["evidence_sha256"]}, format="json")
    [decision_id] = post_decisions(integrator, decision_records([0.5], occurred_at="2099-01-01T00:00:00Z"))
    html = _browser(reviewer).get(f"/decisions/{decision_id}/").content.decode()
    assert "Cutoff the gate used" in html and "Signed cutoff in force at that time" in html
    assert "version 1</a>, owner owner" in html and "did not follow the signed policy" in html
    earlier = Decision.objects.filter(route__slug="it-support").order_by("occurred_at").first()
    html = _browser(reviewer).get(f"/decisions/{earlier.pk}/").content.decode()
    assert "no signed policy then" in html


def test_the_route_page_counts_decisions_not_following_the_policy(draft, owner, reviewer, integrator):
    from tests.analysis.populations import decision_records, post_decisions

    owner.post(f"/api/v1/policies/{draft['id']}/sign", {"evidence_sha256": draft["evidence_sha256"]}, format="json")
    post_decisions(integrator, decision_records([0.5, 0.9, 0.2], occurred_at="2099-01-01T00:00:00Z"))
    html = _browser(reviewer).get("/routes/it-support/policy/").content.decode()
    assert "<strong>3</strong> decisions logged a cutoff other than the signed cutoff" in html
    assert html.count('<a class="mono" href="/decisions/') == 3


def test_the_route_page_and_the_versions_list_cost_a_fixed_number_of_queries(draft, reviewer, owner):
    from tests.governance.conftest import draft_body

    page = _browser(reviewer)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count(url: str, client) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured.captured_queries)

    before = (count("/routes/it-support/policy/", page), count("/api/v1/routes/it-support/policies", reviewer))
    for cutoff in (0.8, 0.9, 0.95):
        reviewer.post("/api/v1/routes/it-support/policies", draft_body(cutoff=cutoff), format="json")
    after = (count("/routes/it-support/policy/", page), count("/api/v1/routes/it-support/policies", reviewer))
    assert after == before


def test_a_reader_opening_a_routes_policy_page_is_told_it_is_forbidden_and_why(client, route):
    client.force_login(make_user("rita", "reader", route))
    response = client.get("/routes/it-support/policy/")
    assert response.status_code == 403
    assert "statistical evidence" in response.content.decode()


def test_a_route_the_user_cannot_see_at_all_stays_not_found(client, route, other_route):
    client.force_login(make_user("rita", "reader", route))
    assert client.get(f"/routes/{other_route.slug}/policy/").status_code == 404


def test_the_draft_form_names_a_wrong_field_by_its_label(reviewer, owner, graded):
    html = _browser(reviewer).post("/routes/it-support/policy/draft/", {"cutoff": "0.5", "band_lower": "0.9"})
    text = html.content.decode()
    assert html.status_code == 400 and "<strong>Middle band from</strong>" in text
    assert "<strong>band_lower</strong>" not in text


def test_a_new_draft_starts_from_the_version_in_force(reviewer, owner, graded):
    created = reviewer.post("/api/v1/routes/it-support/policies", draft_body(cutoff=0.77), format="json").json()
    signed = owner.post(
        f"/api/v1/policies/{created['id']}/sign", {"evidence_sha256": created["evidence_sha256"]}, format="json"
    )
    assert signed.status_code == 200, signed.json()
    html = _browser(reviewer).get("/routes/it-support/policy/draft/").content.decode()
    assert 'value="0.77"' in html and "IT service desk lead" in html
