"""The dispute form is a panel of its own on a refusal's page; a wrong quote is one message beside
the quote with the passages to copy from; an author withdraws with one button; every action says
what it did."""

from __future__ import annotations

import re
from html import unescape

from console.disputes.models import Dispute
from tests.disputes.conftest import PASSAGES, open_dispute, pages_for, passage_id


def test_the_form_is_a_panel_of_its_own_with_a_field_per_line(decisions, reader_pages):
    html = reader_pages.get(f"/decisions/{decisions[0]}/").content.decode()
    panel = html[html.index('id="dispute-open"') :]
    panel = panel[: panel.index("</section>")]
    assert "<details" not in panel and "Dispute this refusal" in panel
    assert 'class="dispute-form"' in panel
    for field in ("kind", "reason", "passage", "url", "quote", "contact"):
        assert re.search(rf'<p class="field[^"]*"><label for="id_{field}">', panel), field
    # The Source URL shows only for a quote from another source, and "No evidence" only for the kinds
    # that allow it (console.css, by the chosen radio and kind).
    assert 'class="field when-url"' in panel and 'class="choice source-none"' in panel


def test_a_wrong_quote_is_one_message_beside_the_quote_with_the_passages_to_copy_from(decisions, reader_pages):
    response = reader_pages.post(
        f"/decisions/{decisions[0]}/dispute/",
        {
            "kind": "answerable_from_passages",
            "reason": "It is in the first passage.",
            "source": "passage",
            "passage": str(passage_id(decisions[0], 1)),
            "quote": "reset it from the login page",
        },
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert html.count('class="error') == 1 and 'id="error-quote"' in html
    assert "The quote was not found in that passage." in html and "evidence.quote" not in html
    beside = html[html.index('id="dispute-passages"') :]
    assert PASSAGES[0]["text"].replace(">", "&gt;") in beside and PASSAGES[1]["text"] in beside
    assert "reset it from the login page</textarea>" in html  # what was typed is kept


def test_missing_fields_are_each_named_once_in_words(decisions, reader_pages):
    response = reader_pages.post(
        f"/decisions/{decisions[0]}/dispute/",
        {"kind": "answerable_elsewhere", "reason": "", "source": "url", "url": "", "quote": ""},
    )
    html = response.content.decode()
    assert response.status_code == 400 and not re.search(r"evidence\.\w", html)
    assert "The dispute is not valid" not in html
    assert "A reason is required." in html and "The quote is required." in html
    assert html.count('class="error') == html.count("field-error") >= 2


def test_an_author_withdraws_with_one_button_and_is_told(decisions, reader, reader_pages):
    dispute = open_dispute(reader, decisions[0]).json()
    html = reader_pages.get(f"/disputes/{dispute['id']}/").content.decode()
    assert 'id="withdraw-form"' in html and ">Withdraw</button>" in html
    assert 'name="note"' not in html and "resolve-form" not in html  # no form of a handler's choices
    response = reader_pages.post(f"/disputes/{dispute['id']}/resolve/", {"resolution": "withdrawn"}, follow=True)
    assert Dispute.objects.get(pk=dispute["id"]).status == "withdrawn"
    assert f"You withdrew dispute #{dispute['id']}." in response.content.decode()


def test_every_dispute_action_confirms_what_it_did(decisions, reader, reviewer, reader_pages):
    opened = reader_pages.post(
        f"/decisions/{decisions[0]}/dispute/",
        {"kind": "other", "reason": "The question is plain.", "source": "none"},
        follow=True,
    )
    dispute = Dispute.objects.get()
    assert f"Dispute #{dispute.pk} opened. The route's reviewers are told; a reply is due by" in unescape(
        opened.content.decode()
    )
    reviewer_pages = pages_for(reviewer.user)
    taken = reviewer_pages.post(f"/disputes/{dispute.pk}/take/", follow=True).content.decode()
    assert f"You took dispute #{dispute.pk}; reply by" in taken
    resolved = reviewer_pages.post(
        f"/disputes/{dispute.pk}/resolve/", {"resolution": "upheld", "note": "Out of scope."}, follow=True
    ).content.decode()
    assert f"Dispute #{dispute.pk} resolved: the refusal stands. support-agent is told by email." in resolved


def test_the_api_still_needs_a_note_to_decide_but_not_to_withdraw(decisions, reader, reviewer):
    dispute = open_dispute(reader, decisions[0]).json()
    no_note = reviewer.post(f"/api/v1/disputes/{dispute['id']}/resolve", {"resolution": "upheld"}, format="json")
    assert no_note.status_code == 400
    withdrawn = reader.post(f"/api/v1/disputes/{dispute['id']}/resolve", {"resolution": "withdrawn"}, format="json")
    assert withdrawn.status_code == 200 and withdrawn.json()["outcome"] == "withdrawn"
