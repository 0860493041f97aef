import pytest

from tests.analysis.populations import graded_route
from tests.browser.exchange_rate import answer_exchange_rate_questions
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_policy_owner_changes_the_cutoffs_and_sees_the_table_update(sign_in, live_server):
    route = graded_route()
    make_user("olivia", "policy_owner", route)
    page = sign_in("olivia")
    page.click("header nav >> text=Operating points")
    page.wait_for_selector("table.op-table")
    rows = page.locator("table.op-table tbody tr")
    assert rows.count() == 6 and "no gate" in rows.first.inner_text()

    page.fill("#id_cutoffs", "0.3, 0.65")
    page.click("text=Update table")
    # A function, not a bare expression: Playwright evals an expression, which the page's CSP refuses.
    page.wait_for_function("() => document.querySelectorAll('table.op-table tbody tr').length === 3")
    assert [rows.nth(i).locator("th").inner_text().strip() for i in range(3)] == ["no gate", "0.3", "0.65"]
    assert "cutoffs=0.3" in page.url  # the address keeps the table, so it can be shared
    assert page.locator("svg.tradeoff-chart circle").count() >= 2

    answer_exchange_rate_questions(page, ("Yes", "No", "No", "Yes", "No"))
    page.wait_for_selector("text=Your accepted exchange rate")
    assert page.locator("table.op-table tr.recommended").count() == 1
    assert page.locator("table.op-table tbody tr").count() == 3  # the chosen cutoffs survived the answers


def test_a_grader_has_no_operating_points_page(sign_in, live_server):
    graded_route()
    make_user("gail", "grader")
    page = sign_in("gail")
    assert "Operating points" not in page.locator("header nav").inner_text()
    assert page.goto(f"{live_server.url}/operating-points/").status == 403


def test_at_1000_px_the_exchange_rate_column_is_fully_on_screen(sign_in, live_server):
    route = graded_route()
    make_user("olivia", "policy_owner", route)
    page = sign_in("olivia")
    page.set_viewport_size({"width": 1000, "height": 800})
    page.goto(f"{live_server.url}/operating-points/?cutoffs=0.3,0.5,0.65,0.8")
    page.wait_for_selector("table.op-table")
    scroller = page.locator(".table-scroll").first
    # Nothing to scroll sideways: the whole table fits its box, the exchange-rate column included.
    widths = page.evaluate("el => [el.scrollWidth, el.clientWidth]", scroller.element_handle())
    assert widths[0] <= widths[1], widths
    box = scroller.bounding_box()
    for cell in page.locator("table.op-table tr > :last-child").all():
        cell_box = cell.bounding_box()
        assert cell_box["x"] + cell_box["width"] <= min(box["x"] + box["width"], 1000) + 0.5
    assert "Exchange rate" in page.locator("table.op-table thead th").last.inner_text()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1000


def test_the_band_and_costs_chosen_on_the_page_reach_the_policy_draft(sign_in, live_server):
    route = graded_route()
    make_user("olivia", "policy_owner", route)
    page = sign_in("olivia")
    page.goto(f"{live_server.url}/operating-points/?route=it-support&cutoffs=0.5,0.8")
    page.wait_for_selector("table.op-table")

    page.fill("#id_band_lower", "0.3")
    page.fill("#id_band_cutoff", "0.8")
    page.click("#band button[type=submit]")
    page.wait_for_function(
        "() => document.querySelector('#propose-row-2').getAttribute('href').includes('band_lower=0.3')"
    )
    page.fill("#id_c_w", "30")
    page.fill("#id_c_a", "1")
    page.click("#cost button[type=submit]")
    # The cost form swapped only its own region; the table's links came back with the costs.
    page.wait_for_function("() => document.querySelector('#propose-row-2').getAttribute('href').includes('c_w=30')")
    assert "band_lower=0.3" in page.get_attribute("#propose-row-2", "href")
    assert "c_w=30" in page.get_attribute("#propose-band", "href")

    page.click("#propose-row-2")
    page.wait_for_selector("#draft-form")
    assert page.input_value("#id_cutoff") == "0.8"
    assert page.input_value("#id_band_lower") == "0.3"
    assert (page.input_value("#id_c_w"), page.input_value("#id_c_a")) == ("30", "1")
