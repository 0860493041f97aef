"""A lead answers the exchange-rate questions, proposes the recommended row, signs it with their
password and sees it in force on the route and on a refusal."""

import pytest
from django.utils import timezone

from console.governance.models import PolicyVersion
from tests.analysis.populations import decision_records, graded_route
from tests.browser.exchange_rate import answer_exchange_rate_questions
from tests.factories import ingest, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_lead_proposes_the_recommended_row_signs_it_and_sees_it_in_force(sign_in, live_server):
    route = graded_route()
    make_user("lena", "policy_owner", route)
    page = sign_in("lena")
    page.goto(f"{live_server.url}/operating-points/?route=it-support")
    page.wait_for_selector("table.op-table")
    answer_exchange_rate_questions(page, ["Yes"] * 5)
    page.wait_for_selector("text=Your accepted exchange rate")
    recommended = page.locator("table.op-table tr.recommended th").inner_text().split()[0]

    page.click("#propose-recommended")
    page.wait_for_selector("#draft-form")
    assert page.input_value("#id_cutoff") == recommended
    assert page.input_value("#id_exchange_rate")  # r* from the answers
    page.select_option("#id_owner", "lena")
    page.fill("#id_escalation_contact", "IT service desk lead")
    page.fill("#id_escalation_channel", "mailto:desk@example.org")
    page.fill("#id_escalation_response_hours", "8")
    page.fill("#id_refusal_message", "I can't answer this reliably. **The desk replies within 8 hours.**")
    page.fill("#id_rationale", "The questions say so.")
    page.click("#draft-form button[type=submit]")
    page.wait_for_selector("text=Read the evidence and sign")
    policy = PolicyVersion.objects.get()
    assert policy.status == "draft" and policy.exchange_answers and policy.cutoff == float(recommended)

    page.click("text=Read the evidence and sign")
    page.wait_for_selector("#sign-form")
    assert page.inner_text("#evidence-text") == policy.evidence_text  # exactly what will be stored
    page.fill("#id_password", "not-my-password")
    page.check("input[name=read_evidence]")
    page.click("#sign-form button[type=submit]")
    page.wait_for_selector("text=The password is not right")
    assert PolicyVersion.objects.get().status == "draft"

    page.fill("#id_password", "pw-12345678")
    page.check("input[name=read_evidence]")
    page.click("#sign-form button[type=submit]")
    page.wait_for_selector("#in-force")
    assert "In force: version 1" in page.inner_text("#in-force")
    assert page.locator("#in-force .refusal-preview strong").inner_text() == "The desk replies within 8 hours."
    assert PolicyVersion.objects.get().status == "active"

    [refusal] = ingest(decision_records([0.2], occurred_at=timezone.now().isoformat()))
    page.goto(f"{live_server.url}/decisions/{refusal}/")
    signed = page.inner_text("#signed-cutoff")
    assert "version 1" in signed and "lena" in signed
