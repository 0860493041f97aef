"""Every page fits a phone (360 px), a half-screen window (700 px) and a laptop (1280 px) without the
page itself scrolling sideways: wide tables scroll inside their own container instead."""

import pytest

from console.accounts import services as accounts
from console.ledger.models import Decision
from console.notify import services as notify
from grading.services.pool import gold_item_create, grading_plan_set
from tests.factories import TEST_ACTOR, ingest, make_route, make_user, recent, record

pytestmark = pytest.mark.django_db(transaction=True)

# 1000 px too: the long lists only become scrolling boxes below 900 px, so they must fit by themselves above.
WIDTHS = (360, 700, 1000, 1280)
LONG = "a-very-long-unbroken-identifier-that-a-real-integrator-might-send-" * 2


@pytest.fixture
def workspace():
    route = make_route("it-support", "IT support")
    ids = ingest(
        [
            record(
                occurred_at=recent(),
                question=f"How do I reset the multi-factor authentication on a shared mailbox, case {i}?",
                versions={"model": LONG, "retriever": "hybrid-3", "corpus": "snap-2026-11-01", "gate": "nli-4"},
                segments={"query_type": "how-to", "language": "en", "source": LONG},
            )
            for i in range(5)
        ]
    )
    notify.notification_send(channel="email", recipient="not-an-address", subject=LONG, body="x", route=route.slug)
    admin = make_user("ada", "admin")
    make_user(LONG[:150], "reader", route)
    accounts.token_issue(actor=TEST_ACTOR, user=admin, name=LONG[:100])
    # A gold item and a plan, so their pages show a row each with the long texts.
    decision = Decision.objects.get(pk=ids[0])
    gold_item_create(actor=TEST_ACTOR, decision=decision, verdict="correct", answer=LONG)
    grading_plan_set(actor=TEST_ACTOR, route=route, bands=[(0.0, 0.5, 10), (0.5, 0.85, 20)], gold_rate=0.05)
    return ids


# Names the outermost elements that stick out, so a failure says where to look.
WIDEST = """() => [...document.querySelectorAll('body *')]
  .filter(el => el.getBoundingClientRect().right > window.innerWidth + 1
                && el.parentElement.getBoundingClientRect().right <= window.innerWidth + 1
                && !(el.parentElement.closest('.table-scroll')))
  .slice(0, 3).map(el => el.tagName.toLowerCase() + (el.className ? '.' + el.className : '')).join(', ')"""


def _pages(decision_id: int) -> list[str]:
    return [
        "/",
        "/refusals/",
        f"/decisions/{decision_id}/",
        "/audit/",
        "/outbox/",
        "/operating-points/?route=it-support",
        "/routes/it-support/policy/",
        "/routes/it-support/policy/draft/",
        "/routes/it-support/monitoring/",
        "/routes/it-support/trials/",
        "/grading/",
        "/grading/adjudication/",
        "/grading/agreement/",
        "/grading/plans/",
        "/grading/routes/it-support/plan/",
        "/grading/routes/it-support/gold/",
        "/gaps/",
        "/workspace/",
        "/workspace/roles/",
        "/routes/new/",
        "/routes/it-support/settings/",
        "/routes/it-support/members/",
        "/tokens/",
        "/accounts/security/",  # ada's own token has the long name, her session Chromium's user agent
    ]


def test_no_page_scrolls_sideways_at_360_700_1000_or_1280_px(workspace, sign_in, live_server):
    page = sign_in("ada")
    overflowing = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 800})
        for path in _pages(workspace[0]):
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 200, path
            page.wait_for_load_state("networkidle")
            extra = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            if extra > 0:
                overflowing.append(f"{path} at {width} px: +{extra} px ({page.evaluate(WIDEST)})")
    assert not overflowing, "\n".join(overflowing)


def test_an_admins_menu_keeps_to_one_line_at_1280_px(workspace, sign_in):
    page = sign_in("ada")
    page.set_viewport_size({"width": 1280, "height": 800})
    links = page.locator("header.top nav a")
    tops = {round(links.nth(i).bounding_box()["y"]) for i in range(links.count())}
    assert len(tops) == 1, tops
