"""Blindness as a security property, tested from the outside.

Decisions get distinctive gate scores and cutoffs. A grader then walks every page and endpoint
they can reach — the queue page and its htmx fragments, the API, the docs page — and nothing
they receive (body or headers) may contain the score or cutoff in any rounding, the outcome, the
answer's origin, verifier words or another grader's note. Everything else answers 403/404.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from console.shadow.models import ShadowRun
from grading.models import GradingItem
from tests.factories import make_route, make_user, record, served_record, set_grading
from tests.grading.helpers import api_client, grade, pooled

SCORES = {"refused": (0.7319, 0.8527), "served": (0.9461, 0.8527), "shadowed": (0.6183, 0.7914)}
# Outcome and origin words, anywhere (so "unserved" counts too); then words only as whole words
# ("gate" must not flag "mitigate" in the docs page's script).
OUTCOME_WORDS = ("refus", "served", "shadow", "cutoff", "disput", "appeal", "overturn", "upheld", "escalat")
WHOLE_WORDS = re.compile(r"\b(gate|scores?|verif\w*|verified|abstain\w*|outcome)\b", re.I)
OTHER_NOTE = "ZETA-NOTE-FROM-ANOTHER-GRADER"


def _renderings(value: float) -> list[re.Pattern]:
    """The value as a probability at 2 to 4 decimals (0.7319, 0.732, 0.73, .73) or a percentage
    (73.19, 73.2, and 73% with its sign), as a standalone number."""
    forms = {f"{value:.{d}f}" for d in range(2, 5)} | {f"{100 * value:.{d}f}" for d in (1, 2)}
    forms |= {f[1:] for f in forms if f.startswith("0.")}
    patterns = [re.compile(rf"(?<![\d.]){re.escape(f)}(?!\d)") for f in forms]
    return [*patterns, re.compile(rf"(?<![\d.]){100 * value:.0f}\s*%")]


FORBIDDEN_NUMBERS = [p for score, cutoff in SCORES.values() for p in _renderings(score) + _renderings(cutoff)]


def assert_blind(text: str, where: str) -> None:
    lowered = text.lower()
    for word in OUTCOME_WORDS:
        assert word not in lowered, f"{where} says {word!r}"
    word = WHOLE_WORDS.search(text)
    assert word is None, f"{where} says {word.group()!r}"
    for pattern in FORBIDDEN_NUMBERS:
        match = pattern.search(text)
        context = text[max(0, match.start() - 40) : match.end() + 40] if match else ""
        assert match is None, f"{where} shows {match.group()!r} in {context!r}"
    assert OTHER_NOTE not in text, f"{where} shows another grader's note"
    assert "DISPUTE-REASON-TEXT" not in text and "APPEAL-MESSAGE-TEXT" not in text, f"{where} shows a dispute"
    assert re.search(r"items/\d+/", text) is None, f"{where} names an item by its database id"


def assert_response_blind(response, where: str) -> None:
    assert_blind(response.content.decode(), where)
    assert_blind(" ".join(f"{k}: {v}" for k, v in response.items()), f"{where} headers")


@pytest.fixture
def known_items(route):
    """Items whose gate score, cutoff and outcome are known, on a route with and one without a shadow pipeline."""
    set_grading(route, guidelines="Mark an answer *correct* only when the passages support every step.")
    make_route("assisted", "Assisted answers", shadow_config={"kind": "reference"})
    passages = [
        {"id": "kb/one", "text": "Open Settings and choose Reset.", "rank": 1, "retrieval_score": 0.7319},
        {"id": "kb/two", "text": "Sign in again afterwards.", "rank": 2},
    ]
    refused_score, refused_cutoff = SCORES["refused"]
    served_score, served_cutoff = SCORES["served"]
    shadow_score, shadow_cutoff = SCORES["shadowed"]
    ids = pooled(
        [
            record(
                question="How do I reset it?",
                claim="Choose Reset in Settings.",
                passages=passages,
                gate={"name": "nli", "score": refused_score, "cutoff": refused_cutoff},
            ),
            served_record(
                question="How do I sign in?",
                served_answer="Use your badge number.",
                gate={"name": "nli", "score": served_score, "cutoff": served_cutoff},
            ),
            record(
                route="assisted",
                question="Where is the portal?",
                claim="Unused claim text.",
                gate={"name": "nli", "score": shadow_score, "cutoff": shadow_cutoff},
            ),
        ]
    )
    ShadowRun.objects.create(
        decision_id=ids[2],
        pipeline="reference",
        status="succeeded",
        answer="The portal is on the intranet.",
        passages_sha256="0" * 64,
    )
    from grading import tasks

    tasks.grading_pool_sweep()
    assert GradingItem.objects.count() == 3
    _dispute(ids[0])
    return ids


def _dispute(decision_id: int) -> None:
    """The refused item is disputed (with a quote) and appealed: a grader must see none of it."""
    from console.disputes.models import Dispute
    from console.disputes.services import appeal_open
    from console.ledger.models import Decision

    agent = api_client(make_user("blind-check-agent", "reader"))
    passage = Decision.objects.get(pk=decision_id).ranked_passages[0].passage_id  # the top-ranked
    response = agent.post(
        f"/api/v1/decisions/{decision_id}/disputes",
        {
            "kind": "answerable_from_passages",
            "reason": "DISPUTE-REASON-TEXT",
            "evidence": {"passage_id": passage, "quote": "choose Reset"},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    decision = Decision.objects.get(pk=decision_id)
    appeal_open(route=decision.route, request_id=decision.request_id, message="APPEAL-MESSAGE-TEXT")
    assert Dispute.objects.count() == 2


@pytest.fixture
def grader_pages(known_items):
    user = make_user("blind-grader", "grader")
    client = Client()
    client.force_login(user)
    return client


def test_nothing_a_grader_receives_on_the_pages_reveals_score_outcome_or_origin(known_items, grader_pages):
    other = api_client(make_user("other-grader", "grader"))
    seen_items = 0
    landing = grader_pages.get("/", follow=True)
    assert landing.redirect_chain[-1][0] == "/grading/"
    assert_response_blind(landing, "the landing page")
    for path in ("/grading/", "/grading/?route=it-support", "/grading/?route=assisted"):
        assert_response_blind(grader_pages.get(path), path)
        assert_response_blind(grader_pages.get(path, HTTP_HX_REQUEST="true"), f"{path} (htmx)")
    response = grader_pages.post("/grading/next", HTTP_HX_REQUEST="true")
    while True:
        assert_response_blind(response, "the item fragment")
        match = re.search(r'action="/grading/items/([0-9a-f-]{36})/grade"', response.content.decode())
        if match is None:
            break
        seen_items += 1
        item_id = match.group(1)
        other_item = other.post("/api/v1/grading/next", {}, format="json")
        if other_item.status_code == 200:  # another grader grades with a note this grader must not see
            grade(other, other_item.json()["item"]["id"], "incorrect", OTHER_NOTE)
        if seen_items == 2:
            response = grader_pages.post(f"/grading/items/{item_id}/skip", HTTP_HX_REQUEST="true")
        else:
            response = grader_pages.post(
                f"/grading/items/{item_id}/grade", {"verdict": "correct"}, HTTP_HX_REQUEST="true"
            )
            last_graded = item_id
        assert_response_blind(grader_pages.get("/grading/"), "the queue page between items")
    assert seen_items == 3
    # taking the last grade back, and the refusal of a grade that is not this grader's last
    assert "Saved:" in response.content.decode()
    undo = grader_pages.post(f"/grading/items/{last_graded}/undo", HTTP_HX_REQUEST="true")
    assert_response_blind(undo, "the undo fragment")
    first_item = GradingItem.objects.exclude(public_id=last_graded).filter(grades__isnull=False).first()
    refused = grader_pages.post(f"/grading/items/{first_item.public_id}/undo", HTTP_HX_REQUEST="true")
    assert "Not undone" in refused.content.decode()
    assert_response_blind(refused, "a refused undo")
    assert_response_blind(grader_pages.post("/grading/next"), "the queue without htmx")
    assert_response_blind(grader_pages.get("/api/docs/"), "the API docs page")


def test_nothing_a_grader_receives_from_the_api_reveals_score_outcome_or_origin(known_items):
    grader = api_client(make_user("blind-api-grader", "grader"))
    other = api_client(make_user("other-api-grader", "grader"))
    handed = []
    while (response := grader.post("/api/v1/grading/next", {}, format="json")).status_code == 200:
        assert_response_blind(response, "POST /api/v1/grading/next")
        item_id = response.json()["item"]["id"]
        handed.append(item_id)
        other_response = other.post("/api/v1/grading/next", {}, format="json")
        if other_response.status_code == 200:
            grade(other, other_response.json()["item"]["id"], "unsure", OTHER_NOTE)
        assert_response_blind(grade(grader, item_id, "incorrect"), "POST .../grades")
        assert_response_blind(grade(grader, item_id, "incorrect"), "POST .../grades again (409)")
        assert_response_blind(grader.post(f"/api/v1/grading/items/{item_id}/skip"), "POST .../skip (409)")
    assert response.status_code == 204 and len(handed) == 3
    assert_response_blind(response, "POST /api/v1/grading/next (204)")


def test_every_other_page_and_endpoint_is_closed_to_a_grader(known_items, grader_pages):
    grader = api_client(make_user("closed-door-grader", "grader"))
    item = GradingItem.objects.first()
    decision_id = known_items[0]
    pages = [
        "/refusals/",
        f"/decisions/{decision_id}/",
        "/audit/",
        "/grading/adjudication/",
        f"/grading/adjudication/{item.public_id}/",
        "/grading/agreement/",
        "/grading/routes/it-support/guidelines/",
        "/operating-points/?route=it-support",
        "/operating-points/table.csv?route=it-support",
        "/disputes/",
        "/disputes/1/",
        "/disputes/2/",
    ]
    for path in pages:
        response = grader_pages.get(path)
        assert response.status_code in (403, 404), path
        assert_response_blind(response, path)
    endpoints = [
        f"/api/v1/decisions/{decision_id}",
        "/api/v1/routes/it-support/decisions/anything",
        "/api/v1/routes",
        f"/api/v1/audit/events?object=decision:{decision_id}",
        "/api/v1/audit/export",
        "/api/v1/grading/adjudications",
        f"/api/v1/grading/items/{item.public_id}/adjudication",
        "/api/v1/routes/it-support/agreement",
        "/api/v1/routes/it-support/operating-points",
        "/api/v1/routes/it-support/certified-cutoff",
        "/api/v1/routes/it-support/calibration",
        "/api/v1/disputes",
        "/api/v1/disputes/1",
        "/api/v1/disputes/2",
        "/api/v1/routes/it-support/decisions/anything/appeal-link",
    ]
    for path in endpoints:
        response = grader.get(path)
        assert response.status_code in (403, 404), path
        assert_response_blind(response, path)
    assert (
        grader.post(
            f"/api/v1/grading/items/{item.public_id}/adjudication", {"verdict": "correct"}, format="json"
        ).status_code
        == 403
    )
    assert grader_pages.post("/grading/routes/it-support/guidelines/", {"guidelines": "x"}).status_code == 403
    preview = grader_pages.post("/grading/routes/it-support/guidelines/preview", {"guidelines": "x"})
    assert preview.status_code == 403
    assert (
        grader.post(
            f"/api/v1/decisions/{decision_id}/disputes",
            {"kind": "other", "reason": "x", "evidence": None},
            format="json",
        ).status_code
        == 403
    )
    assert (
        grader.post("/api/v1/disputes/1/resolve", {"resolution": "upheld", "note": "x"}, format="json").status_code
        == 403
    )


def test_the_grader_nav_offers_only_the_queue(known_items, grader_pages):
    nav = re.search(r"<nav[^>]*>(.*?)</nav>", grader_pages.get("/grading/").content.decode(), re.S).group(1)
    assert re.findall(r">([^<]+)</a>", nav) == ["Grade", "API"]


def test_the_leak_detector_catches_what_a_reader_is_shown(known_items):
    reader = Client()
    reader.force_login(make_user("blind-check-reviewer", "reviewer"))
    with pytest.raises(AssertionError, match="0.7319|refus"):
        assert_response_blind(reader.get(f"/decisions/{known_items[0]}/"), "a reviewer's decision page")
    with pytest.raises(AssertionError, match="73.2"):
        assert_blind("rated 73.2% of the way", "a percentage")
