"""An admin sets a route's sampling plan and adds a gold item in a real browser, reaching both from the
grading section's navigation; a grader then gets the gold item like any other item."""

import pytest

from grading.models import GradingItem, GradingPlan
from tests.factories import make_route, make_user, record
from tests.grading.helpers import pooled

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_sets_a_plan_and_adds_a_gold_item(sign_in, live_server):
    route = make_route("it-support", "IT support")
    sent = record(question="Where is the VPN client?", claim="In the software centre.")
    pooled([sent, record()])
    make_user("ada", "admin")
    page = sign_in("ada")

    page.goto(f"{live_server.url}/grading/agreement/")
    page.click("nav[aria-label=Grading] >> text=Sampling plans and gold items")
    page.wait_for_selector("h1:has-text('Sampling plans and gold items')")
    page.click("text=Set a plan")
    page.wait_for_selector("#plan-form")
    page.fill("#id_bands-0-low", "0")
    page.fill("#id_bands-0-high", "0.5")
    page.fill("#id_bands-0-target", "40")
    page.fill("#id_bands-1-low", "0.5")
    page.fill("#id_bands-1-high", "0.9")  # no target: the row is half filled
    page.fill("#id_gold_percent", "10")
    page.click("#plan-form button[type=submit]")
    page.wait_for_selector("text=Give how many items too, or clear the whole row.")
    assert not GradingPlan.objects.exists()
    page.fill("#id_bands-1-target", "60")
    page.click("#plan-form button[type=submit]")
    page.wait_for_selector("text=Sampling plan of IT support saved")
    plan = GradingPlan.objects.get(route=route)
    assert [(band["low"], band["high"], band["target"]) for band in plan.strata] == [(0, 0.5, 40), (0.5, 0.9, 60)]
    assert plan.gold_rate == 0.1

    page.click("text=gold items of IT support")
    page.wait_for_selector("#gold-form")
    page.fill("#id_request_id", "no-such-request")
    page.check("#id_verdict_1")  # incorrect
    page.click("#gold-form button[type=submit]")
    page.wait_for_selector("text=No decision of this route has that request id.")
    page.fill("#id_request_id", sent["request_id"])
    page.check("#id_verdict_1")
    page.fill("#id_answer", "Ask the front desk for a floppy disk.")
    page.click("#gold-form button[type=submit]")
    page.wait_for_selector("text=Gold item added from")
    row = page.locator("table.list tbody tr").first
    assert "Where is the VPN client?" in row.inner_text() and "Incorrect" in row.inner_text()
    gold = GradingItem.objects.get(is_gold=True)
    assert (gold.answer, gold.gold_verdict) == ("Ask the front desk for a floppy disk.", "incorrect")
