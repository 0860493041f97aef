"""The refusals list as a working tool: search, sorting, CSV export, clean addresses, errors and
help shown on htmx submits, and the way back from a decision."""

import csv
import io
import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.test import Client

from tests.factories import ingest, make_user, record


@pytest.fixture
def pages(route):
    client = Client()
    client.force_login(make_user("tools-reviewer", "reviewer"))
    return client


def questions(page: str) -> list[str]:
    return re.findall(r'class="question"><a href="/decisions/\d+/(?:\?back=[^"]*)?">([^<]*)</a>', page)


def link(page: str, text: str) -> str | None:
    found = re.search(rf'<a href="(\?[^"]*)"[^>]*>{re.escape(text)}</a>', page)
    return unescape(found.group(1)) if found else None


def test_search_matches_words_of_the_question_or_the_claim(pages):
    ingest(
        [
            record(question="VPN drops every hour", claim="Reconnect the client."),
            record(question="Printer is offline", claim="Restart the VPN gateway first."),
            record(question="Password expired", claim="Use the self-service portal."),
        ]
    )
    assert set(questions(pages.get("/refusals/?q=vpn").content.decode())) == {
        "VPN drops every hour",
        "Printer is offline",
    }
    assert questions(pages.get("/refusals/?q=vpn+-printer").content.decode()) == ["VPN drops every hour"]
    assert questions(pages.get('/refusals/?q="self-service+portal"').content.decode()) == ["Password expired"]
    assert questions(pages.get("/refusals/?q=nothing-like-this").content.decode()) == []


def test_the_search_runs_on_the_gin_expression_index(pages):
    from console.ledger.models import Decision
    from console.ledger.selectors import DecisionFilters

    sql, params = DecisionFilters(outcome=None, text="vpn").apply(Decision.objects.all()).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        # The decisions are partitioned by month: each partition scans its own copy of the index.
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'decision_text_search_idx'::regclass"
        )
        copies = [name for (name,) in cursor.fetchall()]
    assert copies and all(name in plan for name in copies), plan
    assert "Seq Scan" not in plan, plan


def test_the_search_filter_holds_inside_a_subquery(pages):
    # Django renames the table inside subqueries (U0): the filter must follow, as other apps
    # build their querysets on DecisionFilters.
    from console.ledger.models import Decision
    from console.ledger.selectors import DecisionFilters

    ingest([record(question="VPN drops"), record(question="Printer jam")])
    matching = DecisionFilters(outcome=None, text="vpn").apply(Decision.objects.all()).values("pk")
    assert list(Decision.objects.filter(pk__in=matching).values_list("question", flat=True)) == ["VPN drops"]


def _scored(n: int) -> None:
    # Scores with ties (each value twice) so ties straddle page boundaries.
    ingest(
        [
            record(question=f"s{i:03d}", gate={"name": "nli", "score": round((i // 2) / 100, 2), "cutoff": 0.9})
            for i in range(n)
        ]
    )


def _walk(pages, start: str, forward: str) -> list[str]:
    seen, address = [], start
    while address is not None:
        page = pages.get(f"/refusals/{address}").content.decode()
        seen += questions(page)
        address = link(page, forward)
    return seen


@pytest.mark.parametrize(
    "sort, expect",
    [
        ("score", lambda qs: sorted(qs, key=lambda q: (int(q[1:]) // 2, int(q[1:])))),
        ("-score", lambda qs: sorted(qs, key=lambda q: (int(q[1:]) // 2, int(q[1:])), reverse=True)),
    ],
)
def test_sorting_by_score_pages_through_every_row_once_in_order(pages, sort, expect):
    _scored(121)
    seen = _walk(pages, f"?sort={sort}", "Next →")
    assert len(seen) == 121 == len(set(seen))
    assert seen == expect(seen) == expect([f"s{i:03d}" for i in range(121)])


def test_a_score_ordered_list_pages_back_as_it_came(pages):
    _scored(120)
    first = pages.get("/refusals/?sort=score").content.decode()
    second = pages.get(f"/refusals/{link(first, 'Next →')}").content.decode()
    third = pages.get(f"/refusals/{link(second, 'Next →')}").content.decode()
    back = pages.get(f"/refusals/{link(third, '← Previous')}").content.decode()
    assert questions(back) == questions(second)
    assert "« First" in back


def test_oldest_first_is_the_newest_order_reversed(pages):
    ingest([record(question=f"d{i:02d}", occurred_at=f"2026-10-{1 + i:02d}T08:00:00Z") for i in range(12)])
    assert questions(pages.get("/refusals/?sort=oldest").content.decode()) == [f"d{i:02d}" for i in range(12)]
    page = pages.get("/refusals/").content.decode()
    assert questions(page) == [f"d{i:02d}" for i in range(11, -1, -1)]
    # The column headers sort, and say which order is in force.
    assert 'aria-sort="descending"><a href="?sort=oldest"' in page
    assert 'aria-sort="none"><a href="?sort=score"' in page


def test_csv_exports_every_filtered_decision_streamed_with_its_request_id(pages):
    ingest([record(request_id=f"vpn-{i}", question=f"VPN question {i}") for i in range(60)])
    ingest([record(request_id="other", question='=HYPERLINK("x") printer')])
    response = pages.get("/refusals/?q=vpn&format=csv")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 60 and {r["request_id"] for r in rows} == {f"vpn-{i}" for i in range(60)}
    assert rows[0]["route"] == "it-support" and rows[0]["outcome"] == "refused"
    everything = pages.get("/refusals/?format=csv")
    [formula] = [
        r
        for r in csv.DictReader(io.StringIO(b"".join(everything.streaming_content).decode()))
        if r["request_id"] == "other"
    ]
    assert formula["question"].startswith("'=")  # not run as a formula by a spreadsheet


def test_a_submitted_form_leaves_only_the_filters_set_in_the_address(pages):
    ingest([record()])
    empty_fields = "route=&outcome=refused&score_min=&score_max=&date_from=&date_to=&q=vpn&segment=&sort=newest"
    response = pages.get(f"/refusals/?{empty_fields}")
    # Empty fields and the defaults (refusals, newest first) are left out.
    assert response.status_code == 302 and response["Location"] == "/refusals/?q=vpn"
    swapped = pages.get(f"/refusals/?{empty_fields}", HTTP_HX_REQUEST="true")
    assert swapped.status_code == 200
    assert swapped["HX-Push-Url"] == "/refusals/?q=vpn"
    # An address typed by hand, defaults and all, is answered as it is.
    assert pages.get("/refusals/?outcome=refused&sort=newest").status_code == 200


def test_filter_errors_show_on_an_htmx_submit(pages):
    response = pages.get("/refusals/?score_min=abc&segment=nolabel&date_from=11/30/2026", HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert 'id="decision-filters"' in page and 'hx-swap-oob="true"' in page
    assert "Enter a number" in page and "Write the segment as key=value." in page and "Enter a valid date" in page
    assert "Export CSV" not in page


def test_help_texts_are_shown_and_every_described_by_id_exists(pages):
    for address in ("/refusals/", "/refusals/?score_min=abc&segment=nolabel"):
        page = pages.get(address, follow=True).content.decode()
        ids = set(re.findall(r'\sid="([^"]+)"', page))
        described = {i for value in re.findall(r'aria-describedby="([^"]+)"', page) for i in value.split()}
        assert described and described <= ids, described - ids
    assert "key=value, e.g. language=en" in page and "a retrieval problem, not a gate one" in page


def test_dates_are_typed_and_shown_as_iso(pages):
    ingest([record(question="october", occurred_at="2026-10-15T08:00:00Z")])
    page = pages.get("/refusals/").content.decode()
    date_input = re.search(r'<input[^>]*name="date_from"[^>]*>', page).group(0)
    assert 'type="text"' in date_input and 'placeholder="YYYY-MM-DD"' in date_input
    assert "2026-10-15 08:00" in page
    shown = pages.get("/refusals/?date_from=2026-10-15").content.decode()
    assert 'value="2026-10-15"' in shown and questions(shown) == ["october"]


def test_the_decision_page_leads_back_to_the_list_it_came_from(pages):
    ingest([record(question="vpn down", gate={"name": "nli", "score": 0.2, "cutoff": 0.8})])
    page = pages.get("/refusals/?q=vpn&sort=score").content.decode()
    detail_href = unescape(re.search(r'class="question"><a href="([^"]+)"', page).group(1))
    back = parse_qs(urlsplit(detail_href).query)["back"][0]
    assert parse_qs(back) == {"q": ["vpn"], "sort": ["score"]}
    detail = pages.get(detail_href).content.decode()
    assert '<a href="/refusals/?q=vpn&amp;sort=score">← Back to the list</a>' in detail
    # Whatever is passed, the link stays on the refusals list.
    hostile = pages.get(detail_href.split("?")[0] + "?back=%22%3E%3Cscript%3E").content.decode()
    assert "<script>" not in hostile


def test_the_export_holds_only_what_the_reader_may_read(route, other_route):
    ingest([record(request_id="it-1"), record(request_id="hr-1", route="hr-policy")])
    client = Client()
    client.force_login(make_user("hr-owner", "policy_owner", other_route))
    response = client.get("/refusals/?format=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [r["request_id"] for r in rows] == ["hr-1"]
