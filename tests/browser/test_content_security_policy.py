"""The Content-Security-Policy in a real browser: the pages, their htmx swaps and Swagger UI still work
and break no rule of it; an image from another site is refused; looking at the queue holds no item."""

import pytest

from grading.models import Assignment
from tests.factories import ingest, make_route, make_user, record, served_record
from tests.grading.helpers import pooled

pytestmark = pytest.mark.django_db(transaction=True)


def _watch_violations(page) -> list[str]:
    """CSP violations reported by the page (events) and by the browser (console)."""
    seen: list[str] = []
    page.on("console", lambda message: seen.append(message.text) if "Content Security Policy" in message.text else None)
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => "
        "console.log('Content Security Policy event: ' + e.violatedDirective + ' ' + e.blockedURI))"
    )
    return seen


def test_the_pages_and_their_htmx_swaps_work_under_the_policy(sign_in, live_server, page):
    make_route("it-support", "IT support", guidelines="Grade **as written**.")
    make_user("rita", "reviewer")
    ingest(
        [
            record(question="Low score question", gate={"name": "nli", "score": 0.21, "cutoff": 0.85}),
            served_record(question="Served question"),
        ]
    )
    violations = _watch_violations(page)
    sign_in("rita")
    assert "default-src 'self'" in page.goto(f"{live_server.url}/").headers["content-security-policy"]
    page.click("text=Refusals")
    page.fill("#id_score_min", "0.1")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector("text=1 decision")  # an htmx swap
    page.click("text=Low score question")
    page.wait_for_selector("h1")
    page.click("header nav >> text=Operating points")
    page.wait_for_load_state("networkidle")
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .info .title")
    assert "Abstention Review Console API" in page.inner_text(".swagger-ui .info .title")
    assert violations == []


def test_an_image_from_another_site_is_refused(sign_in, live_server, page):
    make_route("it-support", "IT support")
    make_user("rita", "reviewer")
    violations = _watch_violations(page)
    sign_in("rita")
    page.evaluate(
        "() => { const img = new Image(); img.src = 'https://tracker.invalid/p.png'; document.body.append(img); }"
    )
    page.wait_for_timeout(300)
    assert any("img-src" in text and "tracker.invalid" in text for text in violations)


def test_a_reviewer_and_an_admin_opening_the_queue_hold_no_place(sign_in, live_server, page):
    make_route("it-support", "IT support")
    make_user("rita", "reviewer")
    make_user("ada", "admin")
    pooled([record(question="One two-grader item")])
    for name in ("rita", "ada", "rita"):
        sign_in(name)
        page.goto(f"{live_server.url}/grading/")
        page.wait_for_load_state("networkidle")
        page.wait_for_selector("#grading-item form.next")
        page.click("header form.who button[type=submit]")
        page.wait_for_load_state("networkidle")
    assert not Assignment.objects.exists()
