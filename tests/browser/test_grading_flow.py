"""Blind grading in a real browser: keyboard grading, a disagreement, and its adjudication."""

import pytest

from grading.models import FinalLabel, Grade, GradingItem
from grading.selectors import published_guidelines
from tests.factories import make_route, make_user, record, served_record
from tests.grading.helpers import pooled

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = [
    "How do I reset MFA?",
    "Where is the VPN client?",
    "Who approves laptops?",
    "How long do deleted files stay?",
    "When do passwords expire?",
]
DISPUTED = "Who approves laptops?"


def _graded_today(page) -> int:
    return int(page.inner_text("[data-progress=graded-today]"))


def _grade_everything_with_the_keyboard(page, key_for_question) -> list[str]:
    if not page.query_selector("#grading-item form.grade"):
        page.keyboard.press("n")  # opening the page holds nothing; n takes the first item
    seen = []
    for expected in range(1, len(QUESTIONS) + 1):
        page.wait_for_selector("#grading-item form.grade")
        question = page.inner_text("[data-field=question]")
        seen.append(question)
        page.keyboard.press(key_for_question(question))
        page.wait_for_function(
            "n => document.querySelector('[data-progress=graded-today]').textContent.trim() === String(n)", arg=expected
        )
    page.wait_for_selector("text=Nothing is waiting for you")
    return seen


def _sign_out(page):
    page.click("header form.who button[type=submit]")
    page.wait_for_load_state("networkidle")


def test_graders_grade_with_the_keyboard_and_a_reviewer_adjudicates_their_disagreement(sign_in, live_server):
    make_route("it-support", "IT support", guidelines="Grade the answer **as written**.")
    make_user("gina", "grader")
    make_user("gus", "grader")
    make_user("rita", "reviewer")
    pooled(
        [
            record(question=q, claim=f"Answer to: {q}")
            if n % 2
            else served_record(question=q, served_answer=f"Answer: {q}")
            for n, q in enumerate(QUESTIONS)
        ]
    )

    page = sign_in("gina")
    assert page.url.endswith("/grading/")
    page.wait_for_selector("#grading-item form.next")
    assert GradingItem.objects.filter(assignments__isnull=False).count() == 0  # looking takes no place
    page.keyboard.press("n")
    page.wait_for_selector("#grading-item form.grade")
    assert _graded_today(page) == 0
    assert page.inner_text("[data-progress=left]") == "4"  # the fifth is in hand
    assert "as written" in page.inner_text(".guidelines")
    seen = _grade_everything_with_the_keyboard(page, lambda question: "1")
    assert sorted(seen) == sorted(QUESTIONS)
    assert _graded_today(page) == 5 and page.inner_text("[data-progress=left]") == "0"
    _sign_out(page)

    page = sign_in("gus")
    _grade_everything_with_the_keyboard(page, lambda question: "2" if question == DISPUTED else "1")
    _sign_out(page)
    assert Grade.objects.count() == 10
    assert FinalLabel.objects.filter(method="unanimous").count() == 4

    page = sign_in("rita")
    page.click("header nav >> text=Adjudicate")
    page.wait_for_selector("table.list")
    page.click(f"text={DISPUTED}")
    page.wait_for_selector("table.grades")
    grades = page.inner_text("table.grades")
    assert "gina" in grades and "gus" in grades and "Correct" in grades and "Incorrect" in grades
    page.fill("textarea[name=note]", "The passage names the manager, not IT.")
    page.click("form.adjudicate button[value=incorrect]")
    page.wait_for_selector("text=Nothing waits for adjudication")
    label = FinalLabel.objects.get(decision__question=DISPUTED)
    assert (label.method, label.correct, label.decided_by.username) == ("adjudicated", False, "rita")


def _question_in_view(page) -> dict:
    return page.evaluate(
        """() => {
            const heading = document.querySelector('#item-question');
            const box = heading.getBoundingClientRect();
            return {top: box.top, bottom: box.bottom, height: window.innerHeight,
                    focused: document.activeElement && document.activeElement.id};
        }"""
    )


def test_after_a_grade_the_next_item_is_in_view_with_the_focus_and_the_grade_can_be_undone(sign_in, live_server):
    make_route("it-support", "IT support")
    make_user("gina", "grader")
    long_passages = [{"id": f"p{n}", "text": "A long passage line.\n" * 30, "rank": n} for n in range(1, 5)]
    pooled([record(question=q, claim=f"Answer to: {q}", passages=long_passages) for q in QUESTIONS[:3]])

    page = sign_in("gina")
    page.keyboard.press("n")
    page.wait_for_selector("#grading-item form.grade")
    first = page.inner_text("[data-field=question]")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # down at the verdict buttons
    assert _question_in_view(page)["bottom"] < 0  # the question is above the screen
    page.click("button[name=verdict][value=correct]")
    page.wait_for_function("() => document.querySelector('[data-progress=graded-today]').textContent.trim() === '1'")
    second = page.inner_text("[data-field=question]")
    assert second != first
    view = _question_in_view(page)
    assert 0 <= view["top"] and view["bottom"] <= view["height"] * 0.4, view  # near the top of the viewport
    assert view["focused"] == "grading-item"
    assert page.inner_text("form.saved [data-saved=verdict]") == "correct"

    # u takes the grade back: the first item is in hand again, ready to grade
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.keyboard.press("u")
    page.wait_for_selector("text=Your grade was withdrawn")
    assert page.inner_text("[data-field=question]") == first
    assert _graded_today(page) == 0 and Grade.objects.count() == 0
    view = _question_in_view(page)
    assert 0 <= view["top"] < view["height"] and view["focused"] == "grading-item"
    page.keyboard.press("2")
    page.wait_for_function("() => document.querySelector('[data-progress=graded-today]').textContent.trim() === '1'")
    assert Grade.objects.get().verdict == "incorrect"
    assert page.inner_text("[data-field=question]") == second  # the item released by the undo comes back


def test_the_guidelines_preview_follows_the_typing_and_publishing_is_confirmed(sign_in, live_server):
    route = make_route("it-support", "IT support", guidelines="Old rule.")
    make_user("rita", "reviewer")
    page = sign_in("rita")
    page.goto(f"{live_server.url}/grading/routes/it-support/guidelines/")
    page.fill("#id_guidelines", "")
    page.type("#id_guidelines", "Grade **strictly**. <script>window.pwned = 1</script>")
    page.wait_for_selector("#guidelines-preview strong:has-text('strictly')")
    assert page.evaluate("window.pwned") is None
    assert published_guidelines(route) == "Old rule."  # typing saves nothing
    page.click("button[value=review]")
    page.wait_for_selector("pre.diff")
    assert "-Old rule." in page.inner_text("pre.diff") and "+Grade **strictly**." in page.inner_text("pre.diff")
    assert published_guidelines(route) == "Old rule."
    page.click("button[value=publish]")
    page.wait_for_selector("text=Guidelines published")
    assert published_guidelines(route).startswith("Grade **strictly**.")
