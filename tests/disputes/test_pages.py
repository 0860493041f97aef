"""The pages: disputing from the refusal's page, the inbox with its filters and "take", resolving,
the refusals list's filter and badge, and the counts beside the operating-point table."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone

from audit.models import AuditEvent
from console.disputes.models import Dispute
from tests import factories
from tests.disputes.conftest import open_dispute, passage_id


def test_a_reader_disputes_from_the_refusal_page_and_the_quote_is_highlighted(decisions, reader_pages):
    page = reader_pages.get(f"/decisions/{decisions[0]}/").content.decode()
    assert "Dispute this refusal" in page and "Grades and final label" not in page
    response = reader_pages.post(
        f"/decisions/{decisions[0]}/dispute/",
        {
            "kind": "answerable_from_passages",
            "reason": "It is in the second passage.",
            "source": "passage",
            "passage": str(passage_id(decisions[0], 2)),
            "quote": "HAUPTSTRASSE 5",
        },
    )
    dispute = Dispute.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"#dispute-{dispute.pk}")
    page = reader_pages.get(f"/decisions/{decisions[0]}/").content.decode()
    assert "<mark>Hauptstraße 5</mark>" in page and "due by" in page and "no signed escalation path" in page


def test_a_quote_not_found_is_said_on_the_form(decisions, reader_pages):
    response = reader_pages.post(
        f"/decisions/{decisions[0]}/dispute/",
        {
            "kind": "answerable_from_passages",
            "reason": "x",
            "source": "passage",
            "passage": str(passage_id(decisions[0], 1)),
            "quote": "not in there",
        },
    )
    assert response.status_code == 400 and "not found in that passage" in response.content.decode()
    assert not Dispute.objects.exists()


def test_no_dispute_form_on_a_served_decision(decisions, reader_pages):
    assert "Dispute this refusal" not in reader_pages.get(f"/decisions/{decisions[1]}/").content.decode()
    assert (
        reader_pages.post(
            f"/decisions/{decisions[1]}/dispute/", {"kind": "other", "reason": "x", "source": "none"}
        ).status_code
        == 400
    )


def test_the_inbox_orders_by_due_time_marks_overdue_and_filters(decisions, reader, reviewer, reviewer_pages):
    first = open_dispute(reader, decisions[0]).json()
    second = open_dispute(reviewer, decisions[0], kind="retrieval_missed", evidence=None).json()
    Dispute.objects.filter(pk=second["id"]).update(due_by=timezone.now() - timedelta(hours=1))
    html = reviewer_pages.get("/disputes/").content.decode()
    assert html.index(f"#{second['id']}<") < html.index(f"#{first['id']}<")
    assert html.count("overdue</span>") == 1
    overdue = reviewer_pages.get("/disputes/?overdue=1").content.decode()
    assert f"#{second['id']}<" in overdue and f"#{first['id']}<" not in overdue
    kind = reviewer_pages.get("/disputes/?kind=retrieval_missed").content.decode()
    assert f"#{first['id']}<" not in kind
    assert reviewer.get("/api/v1/disputes?overdue=1").json()["disputes"][0]["id"] == second["id"]
    # Take: assigned to me, then "mine" lists it.
    assert reviewer_pages.post(f"/disputes/{first['id']}/take/").status_code == 302
    assert Dispute.objects.get(pk=first["id"]).assigned_to.username == "reviewer"
    taken = AuditEvent.objects.get(action="dispute_assigned")
    assert taken.payload["assigned_to"] == {"old": None, "new": "reviewer"}
    assert taken.payload["assigned_at"]["old"] is None and taken.payload["assigned_at"]["new"]
    mine = reviewer_pages.get("/disputes/?mine=1").content.decode()
    assert f"#{first['id']}<" in mine


def test_resolution_is_recorded_notified_and_shown(decisions, reader, reviewer_pages, reader_pages):
    from console.notify.models import Notification

    dispute = open_dispute(reader, decisions[0]).json()
    assert (
        reviewer_pages.post(f"/disputes/{dispute['id']}/resolve/", {"resolution": "overturned", "note": ""}).status_code
        == 400
    )
    assert (
        reader_pages.post(
            f"/disputes/{dispute['id']}/resolve/", {"resolution": "overturned", "note": "mine"}
        ).status_code
        == 403
    )
    response = reviewer_pages.post(
        f"/disputes/{dispute['id']}/resolve/", {"resolution": "overturned", "note": "Passage 1 answers it."}
    )
    assert response.status_code == 302
    html = reader_pages.get(f"/disputes/{dispute['id']}/").content.decode()
    assert "The refusal was overturned: the answer should have been given" in html and "Passage 1 answers it." in html
    assert Notification.objects.get(recipient="agent@example.org").subject.endswith(
        ": the refusal was overturned: the answer should have been given"
    )
    event = AuditEvent.objects.get(action="dispute_resolved")
    assert event.payload == {
        "status": {"old": "open", "new": "overturned"},
        "resolution_note": {"old": "", "new": "Passage 1 answers it."},
        "resolved_by": {"old": None, "new": "reviewer"},
    }
    assert event.actor == "user:reviewer"


def test_only_the_opener_withdraws(decisions, reader, reviewer):
    dispute = open_dispute(reader, decisions[0]).json()
    response = reviewer.post(
        f"/api/v1/disputes/{dispute['id']}/resolve", {"resolution": "withdrawn", "note": "x"}, format="json"
    )
    assert response.status_code == 403
    assert reader.post(f"/api/v1/disputes/{dispute['id']}/assign").status_code == 403
    again = reader.post(
        f"/api/v1/disputes/{dispute['id']}/resolve", {"resolution": "withdrawn", "note": "x"}, format="json"
    )
    assert again.status_code == 200
    late = reviewer.post(
        f"/api/v1/disputes/{dispute['id']}/resolve", {"resolution": "upheld", "note": "x"}, format="json"
    )
    assert late.status_code == 409


def test_policy_owner_of_another_route_cannot_handle(decisions, reader, other_route):
    from tests.disputes.conftest import client_for

    dispute = open_dispute(reader, decisions[0]).json()
    hr_owner = client_for(factories.make_user("hr-owner", "policy_owner", other_route))
    assert hr_owner.post(f"/api/v1/disputes/{dispute['id']}/assign").status_code == 404


def test_the_refusals_list_filters_and_badges_disputed_decisions(decisions, reader, reader_pages):
    open_dispute(reader, decisions[0])
    (plain,) = factories.ingest([factories.record(request_id="req-plain")])
    html = reader_pages.get("/refusals/?route=it-support").content.decode()
    assert html.count("pill badge") == 1
    disputed = reader_pages.get("/refusals/?route=it-support&disputed=on").content.decode()
    assert f"/decisions/{decisions[0]}/" in disputed and f"/decisions/{plain}/" not in disputed
    assert "1 decision<" in disputed or "1 decision\n" in disputed or re.search(r"\b1 decision\b", disputed)


def test_the_analysis_page_shows_disputes_per_band_beside_the_rates(decisions, reader, reviewer, reviewer_pages):
    low = factories.ingest(
        [factories.record(request_id="req-low", gate={"name": "nli", "score": 0.2, "cutoff": 0.85})]
    )[0]
    a = open_dispute(reader, decisions[0], kind="other", evidence=None).json()  # score 0.6137
    b = open_dispute(reviewer, decisions[0], kind="other", evidence=None).json()
    open_dispute(reader, low, kind="other", evidence=None)
    reviewer.post(f"/api/v1/disputes/{a['id']}/resolve", {"resolution": "overturned", "note": "x"}, format="json")
    reviewer.post(f"/api/v1/disputes/{b['id']}/resolve", {"resolution": "upheld", "note": "y"}, format="json")
    html = reviewer_pages.get("/operating-points/?route=it-support&cutoffs=0.5,0.7").content.decode()
    panel = html[html.index('id="disputes-panel"') :]
    panel = panel[: panel.index("</section>")]
    assert "never mixed into its rates" in panel
    rows = re.findall(
        r"<tr><th scope=\"row\">([^<]+)</th>\s*<td class=\"num\">(\d+)</td><td class=\"num\">(\d+)</td>"
        r"<td class=\"num\">(\d+)</td>",
        panel,
    )
    assert rows == [("below 0.5", "1", "0", "0"), ("0.5 to 0.7", "2", "1", "1"), ("0.7 and above", "0", "0", "0")]
    # Median time to resolution of the middle band: the two resolutions took 2 h and 6 h.
    now = timezone.now()
    Dispute.objects.filter(pk=a["id"]).update(opened_at=now - timedelta(hours=2), resolved_at=now)
    Dispute.objects.filter(pk=b["id"]).update(opened_at=now - timedelta(hours=6), resolved_at=now)
    html = reviewer_pages.get("/operating-points/?route=it-support&cutoffs=0.5,0.7").content.decode()
    assert '<td class="num">4.0 h</td>' in html


def test_the_dashboard_shows_open_and_overdue_disputes_per_route(
    decisions, reader, reviewer, reviewer_pages, reader_pages
):
    first = open_dispute(reader, decisions[0]).json()
    open_dispute(reviewer, decisions[0], kind="other", evidence=None)
    Dispute.objects.filter(pk=first["id"]).update(due_by=timezone.now() - timedelta(minutes=5))
    html = reviewer_pages.get("/").content.decode()
    assert "2 open disputes</a>" in html and "1 overdue</a>" in html
    assert "/disputes/?route=it-support&amp;overdue=1" in html
    assert "policy</a>" not in reader_pages.get("/").content.decode()  # a reader has no policy page
