"""Claim-by-claim grading of long answers in a real browser: the keyboard flow (1/2/3 mark and move
on, j/k and the arrows move, Enter submits only once every claim is marked) and blindness."""

import re

import pytest
from django.contrib.auth import get_user_model

from console.ledger.services import route_answer_settings_set
from grading.models import ClaimGrade, Grade
from grading.services import labels as labels_services
from grading.services import queue as queue_services
from tests.browser.test_page_widths import WIDEST
from tests.factories import TEST_ACTOR, make_route, make_user, record, served_record
from tests.grading.helpers import pooled
from tests.grading.test_blindness import SCORES, assert_blind

pytestmark = pytest.mark.django_db(transaction=True)

ANSWERS = ["Open Settings. Choose Security. Press Reset.", "Call the desk. Give your badge number."]


def _current_claim(page) -> int:
    return int(page.get_attribute("li.claim.current", "data-claim"))


def test_a_grader_marks_each_claim_with_the_keyboard_and_submits_only_when_all_are_marked(sign_in, live_server):
    route = make_route("it-support", "IT support")
    route_answer_settings_set(actor=TEST_ACTOR, route=route, answer_form="long")
    make_user("gina", "grader")
    refused_score, refused_cutoff = SCORES["refused"]
    served_score, served_cutoff = SCORES["served"]
    pooled(
        [
            record(
                question="How do I reset MFA?",
                claim=ANSWERS[0],
                gate={"name": "nli", "score": refused_score, "cutoff": refused_cutoff},
            ),
            served_record(
                question="Who can help?",
                claim=ANSWERS[1],
                served_answer=ANSWERS[1],
                gate={"name": "nli", "score": served_score, "cutoff": served_cutoff},
            ),
        ]
    )

    page = sign_in("gina")
    page.wait_for_selector("#grading-item form.next")
    page.keyboard.press("n")
    page.wait_for_selector("#grading-item form.grade[data-claims]")
    graded = 0
    for _ in ANSWERS:
        page.wait_for_selector("li.claim.current")
        # blind: what the page holds says nothing of score, outcome or origin ("not verifiable" is the scale)
        assert_blind(re.sub(r"(?i)not verifiable", "", page.content()), "the claim grading page")
        claims = page.locator("li.claim").count()
        assert claims in (2, 3) and _current_claim(page) == 0
        assert page.is_disabled("button[data-claims-submit]")

        page.keyboard.press("1")  # claim 0 supported, on to claim 1
        assert _current_claim(page) == 1
        page.keyboard.press("k")  # back to claim 0
        assert _current_claim(page) == 0
        page.keyboard.press("ArrowDown")
        assert _current_claim(page) == 1
        page.keyboard.press("Enter")  # not every claim is marked: nothing is sent, the first unmarked is current
        assert _current_claim(page) == 1 and Grade.objects.count() == graded
        page.keyboard.press("2")  # claim 1 not supported
        for _rest in range(2, claims):
            page.keyboard.press("3")  # not verifiable
        assert page.is_enabled("button[data-claims-submit]")
        assert page.is_checked("li.claim[data-claim='0'] input[value=supported]")
        assert page.is_checked("li.claim[data-claim='1'] input[value=unsupported]")
        page.keyboard.press("Enter")
        graded += 1
        page.wait_for_selector("[data-saved=verdict]")
        page.wait_for_function(
            "n => document.querySelector('[data-progress=graded-today]').textContent.trim() === String(n)", arg=graded
        )
        assert_blind(re.sub(r"(?i)not verifiable", "", page.content()), "the page after a grade")
    page.wait_for_selector("text=Nothing is waiting for you")
    assert Grade.objects.count() == 2 and set(Grade.objects.values_list("verdict", flat=True)) == {"incorrect"}
    verdicts = sorted(ClaimGrade.objects.values_list("index", "verdict"))
    assert verdicts.count((0, "supported")) == 2 and verdicts.count((1, "unsupported")) == 2
    assert (2, "unverifiable") in verdicts


def test_a_long_answers_claims_and_their_adjudication_fit_a_phone_without_scrolling_sideways(sign_in, live_server):
    route = make_route("it-support", "IT support")
    route_answer_settings_set(actor=TEST_ACTOR, route=route, answer_form="long")
    make_user("gina", "grader")
    make_user("gus", "grader")
    make_user("rita", "reviewer")
    long_word = "Supercalifragilistic" * 6
    pooled([record(question="How do I reset MFA?", claim=f"Open Settings. Choose {long_word}. Press Reset.")])

    gus = get_user_model().objects.get(username="gus")
    assignment = queue_services.assignment_claim(actor=TEST_ACTOR, grader=gus, route_ids=None)
    labels_services.grade_submit(
        actor=TEST_ACTOR,
        grader=gus,
        public_id=assignment.item.public_id,
        claims=[{"index": i, "verdict": "supported"} for i in range(3)],
    )
    page = sign_in("gina")
    page.keyboard.press("n")  # the lease; each width then reloads the page, which shows it again
    page.wait_for_selector("li.claim.current")
    for width in (360, 700, 1280):
        page.set_viewport_size({"width": width, "height": 800})
        page.goto(f"{live_server.url}/grading/")
        page.wait_for_selector("li.claim.current")
        extra = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert extra <= 0, f"the claim page scrolls sideways at {width} px by {extra} px ({page.evaluate(WIDEST)})"
    for key in ("1", "2", "1"):  # the middle claim: not supported, unlike the other grader
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-saved=verdict]")
    item_id = Grade.objects.filter(grader__username="gina").get().item.public_id
    page.click("header form.who button[type=submit]")
    page.wait_for_load_state("networkidle")
    page = sign_in("rita")
    for width in (360, 700, 1280):
        page.set_viewport_size({"width": width, "height": 800})
        page.goto(f"{live_server.url}/grading/adjudication/{item_id}/")
        assert page.locator("li.claim").count() == 1  # only the claim the graders split on
        extra = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert extra <= 0, (
            f"the adjudication page scrolls sideways at {width} px by {extra} px ({page.evaluate(WIDEST)})"
        )
