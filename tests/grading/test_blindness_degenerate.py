"""The blindness probe on degenerate routes, from the outside: it always answers 200 with a reading or
a stated reason, never a 500 and never a NaN."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache

from tests.factories import make_user, record, served_record
from tests.grading.helpers import pooled

URL = "/api/v1/routes/it-support/blindness"


@pytest.fixture(autouse=True)
def fresh_cache(db):
    cache.clear()
    yield
    cache.clear()


def _pool(served: list[str], refused: list[str]) -> None:
    """Served answers and refused claims (the route has no shadow pipeline, so a refusal is graded on its claim)."""
    pooled([served_record(served_answer=a) for a in served] + [record(claim=c) for c in refused])


def _probe(reviewer) -> dict:
    response = reviewer.get(URL)
    assert response.status_code == 200, response.content[:2000]
    text = response.content.decode()
    assert "NaN" not in text and "Infinity" not in text
    return json.loads(text)


def test_answers_that_share_one_template_give_a_reading_not_a_500(route, reviewer):
    # The openings ("option 1", "option 2", ...) are each unique, so no opening is kept: an empty vocabulary.
    template = "Option {} is under Settings > Billing > Export."
    _pool([template.format(i) for i in range(30)], [template.format(i) for i in range(30, 60)])
    body = _probe(reviewer)
    assert body["enough"] is True and body["reason"] is None
    assert body["auroc"]["low"] <= body["auroc"]["value"] <= body["auroc"]["high"]
    assert body["warning"] is False


@pytest.mark.parametrize(
    "served, refused",
    [
        pytest.param([str(i) for i in range(30)], [str(i) for i in range(30, 60)], id="numbers only"),
        pytest.param(["\U0001f600"] * 15 + ["\U0001f44d"] * 15, ["\U0001f600"] * 15 + ["\U0001f44d"] * 15, id="emoji"),
        pytest.param(["?"] * 30, ["!"] * 30, id="punctuation only"),
    ],
)
def test_answers_without_words_give_a_reading_not_a_500(route, reviewer, served, refused):
    body = _probe(reviewer)  # an empty pool first: not enough items
    assert body["reason"] == "too_few_items"
    cache.clear()
    _pool(served, refused)
    body = _probe(reviewer)
    assert body["enough"] is True
    assert body["reason"] in (None, "no_variation")
    assert body["warning"] is False


def test_identical_answers_say_the_form_cannot_differ_instead_of_a_figure(route, reviewer):
    answer = "Open Settings > Security and choose Reset."
    _pool([answer] * 30, [answer] * 30)
    body = _probe(reviewer)
    assert body["reason"] == "no_variation"
    assert body["auroc"] is None and body["warning"] is False and body["features"] == []
    assert "every item shows graders the same" in body["message"].lower()


def test_a_single_origin_says_why_there_is_no_reading(route, reviewer):
    _pool([f"Answer number {i} for you." for i in range(40)], [])
    body = _probe(reviewer)
    assert body["enough"] is False and body["auroc"] is None
    assert body["reason"] == "too_few_items"
    assert body["message"].startswith("Not enough items to probe: 40 served and 0 refused")


def test_the_agreement_page_of_a_degenerate_route_answers(route, page_of):
    template = "Option {} is under Settings > Billing > Export."
    _pool([template.format(i) for i in range(30)], [template.format(i) for i in range(30, 60)])
    page = page_of(make_user("page-reviewer", "reviewer")).get("/grading/agreement/?route=it-support")
    assert page.status_code == 200
    assert "Probe AUROC" in page.content.decode()
