import re
from html import escape

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.factories import ingest, make_user, record, served_record


@pytest.fixture
def browser_of():
    def login(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return login


@pytest.fixture
def reviewer_pages(route, browser_of):
    return browser_of(make_user("page-reviewer", "reviewer"))


@pytest.mark.parametrize("path", ["/", "/refusals/", "/decisions/1/", "/audit/", "/admin/"])
def test_every_page_sends_an_anonymous_visitor_to_sign_in(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/") or "/admin/login/" in response["Location"]


def test_the_login_page_and_health_check_are_open(client, db):
    assert client.get("/accounts/login/").status_code == 200
    assert client.get("/healthz").status_code in (200, 503)


def test_signing_in_with_a_password_reaches_the_dashboard(client, route):
    make_user("lead", "policy_owner", route, password="a-long-password")
    response = client.post("/accounts/login/", {"username": "lead", "password": "a-long-password"}, follow=True)
    assert response.status_code == 200
    assert b"IT support" in response.content


def test_the_dashboard_shows_counts_per_route(route, reviewer_pages):
    ingest([record(), record(), served_record()])
    page = reviewer_pages.get("/").content.decode()
    assert "IT support" in page
    assert re.search(r"<strong>3</strong> decisions, <strong>2</strong> refused", page)


def test_the_refusals_list_shows_only_refusals_by_default(route, reviewer_pages):
    ingest([record(question="refused one"), served_record(question="served one")])
    page = reviewer_pages.get("/refusals/").content.decode()
    assert "refused one" in page and "served one" not in page


@pytest.mark.parametrize(
    "query, expected",
    [
        ("score_min=0.5&score_max=0.6", {"mid"}),
        ("score_min=0.7", {"high"}),
        ("model=gen-2026-11", {"new-model"}),
        ("segment=language%3Dde", {"german"}),
        ("date_from=2026-10-01&date_to=2026-10-31", {"october"}),
        ("route=hr-policy", {"hr"}),
    ],
)
def test_the_refusals_list_filters(route, other_route, reviewer_pages, query, expected):
    base = {"gate": {"name": "nli", "score": 0.3, "cutoff": 0.85}}
    ingest(
        [
            record(question="mid", gate={"name": "nli", "score": 0.55, "cutoff": 0.85}),
            record(question="high", gate={"name": "nli", "score": 0.8, "cutoff": 0.85}),
            record(question="new-model", versions={"model": "gen-2026-11"}, **base),
            record(question="german", segments={"language": "de"}, **base),
            record(question="october", occurred_at="2026-10-15T08:00:00Z", **base),
            record(question="hr", route="hr-policy", **base),
        ]
    )
    page = reviewer_pages.get(f"/refusals/?{query}").content.decode()
    shown = {q for q in ["mid", "high", "new-model", "german", "october", "hr"] if q in shown_questions(page)}
    assert shown == expected


def test_a_bad_filter_value_is_explained_not_a_crash(route, reviewer_pages):
    response = reviewer_pages.get("/refusals/?score_min=abc&segment=nolabel")
    assert response.status_code == 200
    assert "Enter a number" in response.content.decode()


def test_the_refusals_list_costs_the_same_queries_for_5_or_60_rows(route, reviewer_pages, django_assert_num_queries):
    ingest([record() for _ in range(5)])
    with django_assert_num_queries(6) as few:
        reviewer_pages.get("/refusals/")
    ingest([record() for _ in range(55)])
    with django_assert_num_queries(len(few.captured_queries)):
        response = reviewer_pages.get("/refusals/")
    page = response.content.decode()
    assert "60 decisions" in page and "Older →" in page and "← Newer" not in page


def shown_questions(page: str) -> list[str]:
    return re.findall(r'class="question"><a href="/decisions/\d+/(?:\?back=[^"]*)?">([^<]*)</a>', page)


def cursor_link(page: str, key: str) -> str | None:
    found = re.search(rf'href="\?([^"]*{key}=[^"&]*)"', page)
    return found.group(1).replace("&amp;", "&") if found else None


def test_the_refusals_list_pages_through_every_row_once_newest_first(route, reviewer_pages):
    # The 50th and 51st newest share an instant, across the page boundary: the id breaks the tie.
    def when(i: int) -> str:
        return "2026-10-12T03:30:00Z" if i in (69, 70) else f"2026-10-{1 + i // 6:02d}T{i % 6:02d}:00:00Z"

    ingest([record(question=f"q{i:03d}", occurred_at=when(i)) for i in range(120)])
    seen, pages, query = [], [], "route=it-support"
    while query is not None:
        page = reviewer_pages.get(f"/refusals/?{query}").content.decode()
        pages.append(page)
        seen += shown_questions(page)
        query = cursor_link(page, "before")
    assert len(pages) == 3 and len(seen) == 120 == len(set(seen))
    assert seen == [f"q{i:03d}" for i in range(119, -1, -1)]
    assert "120 decisions" in pages[0]
    # and back: the newer link of the last page shows the middle page again
    back = reviewer_pages.get(f"/refusals/?{cursor_link(pages[2], 'after')}").content.decode()
    assert shown_questions(back) == shown_questions(pages[1])
    assert "« Newest" in back


@pytest.mark.parametrize("cursor", ["before=abc", "before=1.2.3", "after=99999999999999999999999.1", "before="])
def test_a_cursor_that_does_not_parse_shows_the_newest_page(route, reviewer_pages, cursor):
    ingest([record(question="only one")])
    response = reviewer_pages.get(f"/refusals/?{cursor}", follow=True)  # an empty one is dropped by a redirect
    assert response.status_code == 200
    assert shown_questions(response.content.decode()) == ["only one"]


def test_the_count_stops_at_its_cap(route, reviewer_pages, monkeypatch):
    from console.ledger import selectors

    monkeypatch.setattr(selectors, "COUNT_CAP", 3)
    ingest([record() for _ in range(5)])
    assert "More than 3 decisions" in reviewer_pages.get("/refusals/").content.decode()
    monkeypatch.setattr(selectors, "COUNT_CAP", 1_000)
    assert "5 decisions" in reviewer_pages.get("/refusals/").content.decode()
    assert "0 decisions" in reviewer_pages.get("/refusals/?outcome=served").content.decode()


def test_a_score_bands_count_walks_the_band_in_score_order_and_stops_at_its_cap(route, reviewer_pages, monkeypatch):
    """Unordered, the planner counted a band through a bitmap of every decision in it: 130 ms of the
    page's 170 at 10,000,000 decisions (bench/README.md, issue 36 item 4)."""
    from console.ledger import selectors

    ingest(
        [record(gate={"name": "entailment", "score": score, "cutoff": 0.85}) for score in (0.30, 0.31, 0.32, 0.33, 0.6)]
    )
    monkeypatch.setattr(selectors, "COUNT_CAP", 3)
    with CaptureQueriesContext(connection) as captured:
        page = reviewer_pages.get("/refusals/?score_min=0.3&score_max=0.5").content.decode()
    assert "More than 3 decisions" in page
    [count] = [query["sql"] for query in captured.captured_queries if query["sql"].startswith("SELECT COUNT(*)")]
    assert 'ORDER BY "ledger_decision"."gate_score"' in count
    monkeypatch.setattr(selectors, "COUNT_CAP", 1_000)
    assert "4 decisions" in reviewer_pages.get("/refusals/?score_min=0.3&score_max=0.5").content.decode()
    assert "2 decisions" in reviewer_pages.get("/refusals/?score_min=0.305&score_max=0.325").content.decode()


def test_the_refusals_list_renders_only_the_table_for_htmx(route, reviewer_pages):
    ingest([record()])
    response = reviewer_pages.get("/refusals/", HTTP_HX_REQUEST="true")
    assert "<html" not in response.content.decode()
    assert "<table" in response.content.decode()
    assert "HX-Request" in response["Vary"]


def test_the_detail_page_explains_the_refusal(route, reviewer_pages):
    sent = record(
        gate={"name": "entailment", "score": 0.6123, "cutoff": 0.85},
        passages=[
            {"id": "second", "text": "Second <b>passage</b>", "rank": 2},
            {"id": "first", "text": "First passage", "rank": 1},
        ],
    )
    [decision_id] = ingest([sent])
    page = reviewer_pages.get(f"/decisions/{decision_id}/").content.decode()
    assert escape(sent["question"]) in page and escape(sent["claim"]) in page
    assert "0.6123" in page and "0.8500" in page
    assert page.index("First passage") < page.index("Second &lt;b&gt;passage&lt;/b&gt;")
    assert "gen-2026-10" in page
    assert "Decisions ingested" in page  # its audit history


def test_the_detail_page_costs_a_fixed_number_of_queries(route, reviewer_pages, django_assert_num_queries):
    [one] = ingest([record(passages=[{"id": "a", "text": "x"}])])
    [many] = ingest([record(passages=[{"id": f"p{i}", "text": f"x{i}"} for i in range(30)])])
    # session, user, grants, decision (with support), passages, final label, grades, span checks, shadow run, audit,
    # signed policy in force at the decision's time, the route's question-vector space (none here), its disputes,
    # its appeal link (the route's secret, made before: once made, a page view only reads it)
    from console.disputes.services import appeal_secret

    appeal_secret(route)
    with django_assert_num_queries(14) as first:
        reviewer_pages.get(f"/decisions/{one}/")
    with django_assert_num_queries(len(first.captured_queries)):
        reviewer_pages.get(f"/decisions/{many}/")


def test_a_grader_cannot_open_refusal_pages(route, browser_of):
    [decision_id] = ingest([record()])
    grader = browser_of(make_user("page-grader", "grader"))
    assert grader.get("/refusals/").status_code == 403
    assert grader.get(f"/decisions/{decision_id}/").status_code == 403
    assert grader.get("/audit/").status_code == 403
    assert "0.62" not in grader.get("/").content.decode()


def test_an_owner_of_another_route_gets_404_on_a_decision(route, other_route, browser_of):
    [decision_id] = ingest([record()])
    hr = browser_of(make_user("hr-lead", "policy_owner", other_route))
    assert hr.get(f"/decisions/{decision_id}/").status_code == 404


def test_the_audit_page_verifies_the_chain_for_auditors(route, browser_of):
    ingest([record()])
    auditor = browser_of(make_user("page-auditor", "auditor"))
    page = auditor.get("/audit/?verify=1").content.decode()
    assert "Chain intact" in page


def test_a_score_just_under_its_cutoff_is_written_with_enough_digits_to_see_the_side(route, reviewer_pages):
    [just_under] = ingest([record(question="just under", gate={"name": "nli", "score": 0.69999, "cutoff": 0.7})])
    ingest([record(question="plain", gate={"name": "nli", "score": 0.3, "cutoff": 0.85})])
    page = reviewer_pages.get("/refusals/").content.decode()
    assert '<td class="num">0.69999</td>' in page and '<td class="num">0.70000</td>' in page
    assert '<td class="num">0.300</td>' in page and '<td class="num">0.850</td>' in page  # no extra digits
    detail = reviewer_pages.get(f"/decisions/{just_under}/").content.decode()
    assert "0.69999" in detail and "0.70000" in detail


def test_an_invalid_filter_in_the_address_is_reported_not_silently_dropped(client, route):
    client.force_login(make_user("rita", "reviewer"))
    text = client.get("/refusals/?segment=foo").content.decode()
    assert "These filters were not applied" in text and "key=value" in text
