import pytest

from tests.factories import ingest, make_route, make_user, record, served_record

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reviewer_signs_in_filters_refusals_and_opens_one(sign_in, live_server):
    make_route("it-support", "IT support")
    make_user("rita", "reviewer")
    ingest(
        [
            record(question="Low score question", gate={"name": "nli", "score": 0.21, "cutoff": 0.85}),
            record(question="Middle score question", gate={"name": "nli", "score": 0.64, "cutoff": 0.85}),
            served_record(question="Served question"),
        ]
    )
    page = sign_in("rita")
    assert "IT support" in page.content()
    page.click("text=Refusals")
    assert page.locator("table.list tbody tr").count() == 2
    page.fill("#id_score_min", "0.5")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector("text=1 decision")
    assert "score_min=0.5" in page.url  # htmx pushed the filtered URL, so it can be shared
    page.click("text=Middle score question")
    page.wait_for_selector("h1")
    body = page.content()
    assert "0.6400" in body and "0.8500" in body
    assert "Decisions ingested" in body


def test_a_grader_sees_no_refusal_pages(sign_in, live_server):
    make_route("it-support", "IT support")
    make_user("gail", "grader")
    ingest([record(question="Secret refusal", gate={"name": "nli", "score": 0.3131, "cutoff": 0.85})])
    page = sign_in("gail")
    assert "Refusals" not in page.locator("header nav").inner_text()
    response = page.goto(f"{live_server.url}/refusals/")
    assert response.status == 403
    assert "Secret refusal" not in page.content() and "0.3131" not in page.content()


def test_a_reviewer_pages_older_and_back_to_newest_in_place(sign_in, live_server):
    make_route("it-support", "IT support")
    make_user("rob", "reviewer")
    ingest(
        [
            record(question=f"Question {i:03d}", occurred_at=f"2026-10-{1 + i // 10:02d}T{i % 10:02d}:00:00Z")
            for i in range(60)
        ]
    )
    page = sign_in("rob")
    page.click("text=Refusals")
    assert page.locator("table.list tbody tr").count() == 50
    assert page.locator("table.list tbody tr").first.inner_text().count("Question 059") == 1
    page.click("text=Older →")
    page.wait_for_selector("text=Question 009")
    rows = page.locator("table.list tbody tr")
    assert rows.count() == 10 and "Question 000" in rows.last.inner_text()
    assert "before=" in page.url and page.locator("text=Older →").count() == 0  # pushed, and the end
    page.click("text=← Newer")
    page.wait_for_selector("text=Question 059")
    assert page.locator("table.list tbody tr").count() == 50
    page.go_back()  # htmx pushed each page to the history
    page.wait_for_selector("text=Question 009")


def test_an_htmx_filter_error_shows_and_the_address_keeps_only_the_set_filters(sign_in, live_server):
    make_route("it-support", "IT support")
    make_user("rita", "reviewer")
    ingest([record(question="VPN drops", claim="Reconnect."), record(question="Printer jam", claim="Open tray.")])
    page = sign_in("rita")
    page.goto(f"{live_server.url}/refusals/")
    page.fill("#id_segment", "nolabel")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector("text=Write the segment as key=value.")
    assert page.locator("#id_segment").get_attribute("aria-invalid") == "true"
    page.fill("#id_segment", "")
    page.fill("#id_q", "vpn")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector("text=1 decision")
    assert page.url.endswith("/refusals/?q=vpn")
    assert page.locator("text=Write the segment as key=value.").count() == 0
    page.click("text=VPN drops")
    page.click("text=← Back to the list")
    page.wait_for_selector("table.list")
    assert "q=vpn" in page.url and page.locator("table.list tbody tr").count() == 1
