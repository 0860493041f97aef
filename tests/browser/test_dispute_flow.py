"""A support agent (reader) disputes a refusal with a quote from its passage, a reviewer resolves
it as overturned from the inbox, and the agent sees the outcome on the refusal's page."""

import pytest

from console.disputes.models import Dispute
from tests.factories import ingest, make_route, make_user, record

pytestmark = pytest.mark.django_db(transaction=True)


def _sign_out(page):
    page.click("header form.who button[type=submit]")
    page.wait_for_load_state("networkidle")


def test_a_reader_disputes_a_reviewer_overturns_the_reader_sees_it(sign_in, live_server):
    route = make_route("it-support", "IT support")
    [decision_id] = ingest(
        [
            record(
                question="How do I reset MFA?",
                passages=[
                    {"id": "kb/mfa#2", "text": "To reset MFA, open Settings > Security and choose Reset.", "rank": 1}
                ],
            )
        ]
    )
    make_user("rosa", "reader", route)
    make_user("rita", "reviewer", route)

    page = sign_in("rosa")
    page.goto(f"{live_server.url}/decisions/{decision_id}/")
    assert page.locator("text=Operating points").count() == 0  # a reader has no statistics
    # The form is a panel of its own, showing only the fields of the chosen kind and evidence.
    page.select_option("#id_kind", "other")
    assert page.is_visible("label.source-none")
    page.select_option("#id_kind", "answerable_from_passages")
    assert not page.is_visible("label.source-none")  # this kind needs evidence
    page.check("#id_source_1")
    assert page.is_visible("#id_url") and not page.is_visible("#id_passage")
    page.fill("#id_reason", "The first passage says exactly how.")
    page.check("#id_source_0")
    assert page.is_visible("#id_passage") and not page.is_visible("#id_url")
    page.fill("#id_quote", "CHOOSE RESET")
    page.click("form[action$='/dispute/'] button[type=submit]")
    page.wait_for_selector("article.dispute mark")
    assert page.inner_text("article.dispute mark") == "choose Reset"
    assert "opened" in page.inner_text("ul.messages")
    assert "open" in page.inner_text("article.dispute header")
    dispute = Dispute.objects.get()
    _sign_out(page)

    sign_in("rita")
    page.goto(f"{live_server.url}/disputes/")
    page.click(f"#dispute-table a:has-text('#{dispute.pk}')")
    page.click("button:has-text('Take (assign to me)')")
    page.wait_for_load_state("networkidle")
    page.select_option("select[name=resolution]", "overturned")
    page.fill("textarea[name=note]", "Right: passage 1 answers it; the cutoff is too high for how-to questions.")
    page.click("form[action$='/resolve/'] button[type=submit]")
    page.wait_for_selector("#dispute-outcome")
    assert "The refusal was overturned: the answer should have been given" in page.inner_text("#dispute-outcome")
    _sign_out(page)

    sign_in("rosa")
    page.goto(f"{live_server.url}/decisions/{decision_id}/")
    outcome = page.inner_text(f"#dispute-{dispute.pk} .outcome")
    assert "The refusal was overturned" in outcome and "rita" in outcome and "too high for how-to" in outcome
