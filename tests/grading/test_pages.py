import re
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss

from audit.models import AuditEvent
from console.ledger.models import Decision
from grading import selectors
from grading.models import Assignment, FinalLabel, Grade, GradingItem, ItemStatus
from grading.selectors import published_guidelines
from grading.services import labels as labels_services
from grading.services import pool as pool_services
from grading.services import queue as queue_services
from tests.factories import TEST_ACTOR, make_route, make_user, record, served_record, set_grading
from tests.grading.helpers import pooled


@pytest.fixture
def grader_user(route):
    return make_user("page-grader", "grader")


def _item_ids(html: str) -> list[str]:
    return re.findall(r'action="/grading/items/([0-9a-f-]{36})/grade"', html)


def test_a_grader_only_user_lands_on_the_queue(route, grader_user, page_of):
    response = page_of(grader_user).get("/")
    assert response.status_code == 302 and response["Location"] == "/grading/"


def test_signing_in_as_a_grader_ends_on_the_queue(client, route):
    make_user("signs-in", "grader", password="a-long-password")
    response = client.post("/accounts/login/", {"username": "signs-in", "password": "a-long-password"}, follow=True)
    assert response.redirect_chain[-1][0] == "/grading/"
    assert b"Grade answers" in response.content


def test_the_queue_page_offers_to_start_and_the_button_shows_the_item(route, grader_user, page_of):
    set_grading(route, guidelines="# Rules\n\nBe **strict**. <script>alert(1)</script>")
    pooled(
        [
            record(
                question="Where is the printer?",
                claim="On floor two.",
                passages=[
                    {"id": "b", "text": "Second passage", "rank": 2},
                    {"id": "a", "text": "First passage", "rank": 1},
                ],
            )
        ]
    )
    pages = page_of(grader_user)
    page = pages.get("/grading/")
    assert page["Vary"] and "HX-Request" in page["Vary"]
    html = page.content.decode()
    assert "Start grading" in html and 'hx-trigger="load' not in html  # no lease yet: the button takes one
    assert 'src="/static/grading.js"' in html
    fragment = pages.post("/grading/next", HTTP_HX_REQUEST="true").content.decode()
    assert not fragment.lstrip().startswith("<!doctype")
    assert "Where is the printer?" in fragment and "On floor two." in fragment
    assert fragment.index("First passage") < fragment.index("Second passage")
    assert "<strong>strict</strong>" in fragment and "<script>" not in fragment
    assert 'data-progress="left">0<' in fragment  # the item in hand is no longer "left"
    # a reload shows the same lease instead of taking another item
    assert _item_ids(pages.get("/grading/").content.decode()) == _item_ids(fragment)


def test_grading_on_the_page_moves_progress_and_brings_the_next_item(route, grader_user, page_of):
    pooled([record() for _ in range(3)])
    pages = page_of(grader_user)
    fragment = pages.post("/grading/next", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-progress="graded-today">0<' in fragment and 'data-progress="left">2<' in fragment
    [first] = _item_ids(fragment)
    fragment = pages.post(
        f"/grading/items/{first}/grade",
        {"verdict": "incorrect", "note": "wrong step", "seconds_spent": "12.5"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert 'data-progress="graded-today">1<' in fragment and 'data-progress="left">1<' in fragment
    [second] = _item_ids(fragment)
    assert second != first
    fragment = pages.post(f"/grading/items/{second}/skip", HTTP_HX_REQUEST="true").content.decode()
    [third] = _item_ids(fragment)
    fragment = pages.post(f"/grading/items/{third}/grade", {"verdict": "correct"}, HTTP_HX_REQUEST="true")
    assert "Nothing is waiting for you" in fragment.content.decode()
    assert list(Grade.objects.order_by("pk").values_list("verdict", "note", "seconds_spent"))[0] == (
        "incorrect",
        "wrong step",
        12.5,
    )


def test_the_page_works_without_javascript(route, grader_user, page_of):
    pooled([record()])
    pages = page_of(grader_user)
    response = pages.post("/grading/next")
    assert response.status_code == 302 and response["Location"] == "/grading/"
    [item_id] = _item_ids(pages.get("/grading/").content.decode())
    response = pages.post(f"/grading/items/{item_id}/grade", {"verdict": "unsure"})
    assert response.status_code == 302
    assert Grade.objects.get().verdict == "unsure"
    # the queue is empty now, and the page it lands on says so instead of offering to start again
    landed = pages.get(response["Location"]).content.decode()
    assert "Nothing is waiting for you" in landed and "Check again" in landed
    # the word is only believed while nothing is in hand
    pooled([record(question="A later question")])
    pages.post("/grading/next")
    assert "Nothing is waiting" not in pages.get(response["Location"]).content.decode()


def test_a_stale_grade_on_the_page_is_explained_not_recorded(route, grader_user, page_of):
    pooled([record()])
    pages = page_of(grader_user)
    [item_id] = _item_ids(pages.post("/grading/next", HTTP_HX_REQUEST="true").content.decode())
    pages.post(f"/grading/items/{item_id}/grade", {"verdict": "correct"}, HTTP_HX_REQUEST="true")
    again = pages.post(f"/grading/items/{item_id}/grade", {"verdict": "incorrect"}, HTTP_HX_REQUEST="true")
    assert "already graded" in again.content.decode()
    assert Grade.objects.count() == 1


def test_the_route_picker_limits_the_queue(route, other_route, page_of):
    user = make_user("two-route-grader", "grader")
    pooled([record(question="IT question"), record(route="hr-policy", question="HR question")])
    pages = page_of(user)
    page = pages.get("/grading/?route=hr-policy").content.decode()
    assert 'href="/grading/?route=it-support"' in page and 'name="route" value="hr-policy"' in page
    fragment = pages.post("/grading/next", {"route": "hr-policy"}, HTTP_HX_REQUEST="true").content.decode()
    assert "HR question" in fragment and "IT question" not in fragment
    assert pages.get("/grading/?route=nope").status_code == 404


def test_the_queue_page_costs_a_fixed_number_of_queries(route, grader_user, page_of, django_assert_num_queries):
    pooled([record(passages=[{"id": f"p{i}", "text": f"text {i}"} for i in range(n)]) for n in (1, 40)])
    pages = page_of(grader_user)
    pages.post("/grading/next")
    # session, user, grants, lease, routes, progress (2), passages
    with django_assert_num_queries(8) as first:
        pages.get("/grading/")
    pinned = len(first.captured_queries)  # read now: the next request clears Django's query log
    [item_id] = _item_ids(pages.get("/grading/").content.decode())
    pages.post(f"/grading/items/{item_id}/grade", {"verdict": "correct"})
    with django_assert_num_queries(pinned):
        pages.get("/grading/")


def test_graders_only_reach_the_queue(route, grader_user, page_of):
    pages = page_of(grader_user)
    for path in ("/grading/adjudication/", "/grading/agreement/", "/grading/routes/it-support/guidelines/"):
        assert pages.get(path).status_code == 403
    outsider = page_of(make_user("nobody-here"))
    assert outsider.get("/grading/").status_code == 403


def test_opening_the_queue_page_takes_no_place(route, page_of):
    [decision_id] = pooled([record()])
    for name, role in (("browsing-reviewer", "reviewer"), ("browsing-admin", "admin")):
        pages = page_of(make_user(name, role))
        for _ in range(2):
            html = pages.get("/grading/").content.decode()
            main = html[html.index("<main") :]  # the navigation loads a backlog count, nothing of the queue
            assert 'hx-trigger="load' not in main and "Start grading" in main
    assert not Assignment.objects.filter(item__decision_id=decision_id).exists()


def test_the_graders_pages_are_never_stored_by_a_browser_or_proxy(route, grader_user, page_of):
    pooled([record(), record()])
    pages = page_of(grader_user)
    claimed = pages.post("/grading/next", HTTP_HX_REQUEST="true")
    [item_id] = _item_ids(claimed.content.decode())
    responses = [
        pages.get("/grading/"),
        pages.get("/grading/", HTTP_HX_REQUEST="true"),
        claimed,
        pages.post(f"/grading/items/{item_id}/skip", HTTP_HX_REQUEST="true"),
        pages.post("/grading/next"),
    ]
    [next_id] = _item_ids(pages.get("/grading/").content.decode())
    responses.append(pages.post(f"/grading/items/{next_id}/grade", {"verdict": "correct"}, HTTP_HX_REQUEST="true"))
    for response in responses:
        assert "no-store" in response["Cache-Control"], response.request


def test_guidelines_show_no_image_from_another_site(route, page_of):
    set_grading(
        route,
        guidelines=(
            '![pixel](https://tracker.example/p.png) <img src="//tracker.example/q.png"> '
            '<img src="/\\tracker.example/r.png"> ![logo](/static/logo.png) '
            "![dot](data:image/png;base64,iVBORw0KGgo=) [a link](data:text/html,hi)"
        ),
    )
    html = page_of(make_user("pixel-reviewer", "reviewer")).get("/grading/routes/it-support/guidelines/")
    preview = html.content.decode().split("</textarea>")[-1]
    assert "tracker.example" not in preview
    assert 'src="/static/logo.png"' in preview and 'src="data:image/png;base64,iVBORw0KGgo="' in preview
    assert "data:text/html" not in preview


def test_reviewers_edit_guidelines_as_markdown_and_publish_after_reviewing_the_change(route, page_of):
    pages = page_of(make_user("guide-reviewer", "reviewer"))
    text = "Use **the passages**.\r\n\r\n<img src=x onerror=alert(1)>"
    # the first post is the review step: the change and its rendering, nothing saved yet
    review = pages.post("/grading/routes/it-support/guidelines/", {"guidelines": text, "step": "review"})
    html = review.content.decode()
    assert review.status_code == 200 and 'value="publish"' in html
    assert '<span class="added">+Use **the passages**.</span>' in html
    assert "<strong>the passages</strong>" in html and "onerror" not in html.split("</textarea>")[-1]
    assert published_guidelines(route) == "" and not AuditEvent.objects.filter(action="route_updated").exists()
    base = re.search(r'name="base" value="([0-9a-f]{64})"', html).group(1)
    response = pages.post(
        "/grading/routes/it-support/guidelines/",
        {"guidelines": text, "base": base, "step": "publish"},
        follow=True,
    )
    assert "Guidelines published" in response.content.decode()
    # line breaks as typed
    assert published_guidelines(route) == "Use **the passages**.\n\n<img src=x onerror=alert(1)>"
    event = AuditEvent.objects.get(action="route_updated")
    assert event.payload["guidelines"]["old"] == "" and event.actor == "user:guide-reviewer"


def test_publishing_guidelines_needs_the_review_step(route, page_of):
    pages = page_of(make_user("hasty-reviewer", "reviewer"))
    for data in (
        {"guidelines": "Be strict."},
        {"guidelines": "Be strict.", "step": "publish"},
        {"guidelines": "Be strict.", "step": "publish", "base": "not-a-hash"},
    ):
        response = pages.post("/grading/routes/it-support/guidelines/", data)
        assert response.status_code == 200 and 'value="publish"' in response.content.decode()
    assert published_guidelines(route) == "" and not AuditEvent.objects.filter(action="route_updated").exists()


def test_publishing_over_guidelines_changed_since_the_review_is_refused(route, page_of):
    pages = page_of(make_user("slow-reviewer", "reviewer"))
    html = pages.post("/grading/routes/it-support/guidelines/", {"guidelines": "Mine."}).content.decode()
    base = re.search(r'name="base" value="([0-9a-f]{64})"', html).group(1)
    pool_services.route_guidelines_update(actor=TEST_ACTOR, route=route, guidelines="Theirs.")
    response = pages.post(
        "/grading/routes/it-support/guidelines/", {"guidelines": "Mine.", "base": base, "step": "publish"}
    )
    html = response.content.decode()
    assert "changed by someone else" in html and '<span class="removed">-Theirs.</span>' in html
    assert published_guidelines(route) == "Theirs."


def test_publishing_the_unchanged_text_offers_nothing_to_publish(route, page_of):
    set_grading(route, guidelines="Same.")
    html = page_of(make_user("idle-reviewer", "reviewer"))
    html = html.post("/grading/routes/it-support/guidelines/", {"guidelines": "Same."}).content.decode()
    assert "Nothing to publish" in html and 'value="publish"' not in html


def test_the_guidelines_preview_renders_sanitised_markdown_and_saves_nothing(route, page_of):
    pages = page_of(make_user("preview-reviewer", "reviewer"))
    page = pages.get("/grading/routes/it-support/guidelines/").content.decode()
    assert 'hx-post="/grading/routes/it-support/guidelines/preview"' in page
    assert 'hx-trigger="input changed delay:300ms"' in page
    text = "# Rules\n\nBe **strict**. <script>alert(1)</script> ![x](https://tracker.example/p.png)"
    response = pages.post("/grading/routes/it-support/guidelines/preview", {"guidelines": text}, HTTP_HX_REQUEST="true")
    fragment = response.content.decode()
    assert response.status_code == 200 and "HX-Request" in response["Vary"]
    assert fragment.startswith('<div id="guidelines-preview"')
    assert "<h1>Rules</h1>" in fragment and "<strong>strict</strong>" in fragment
    assert "<script>" not in fragment and "alert(1)" not in fragment and "tracker.example" not in fragment
    # without JavaScript, the Preview button shows the whole page with the text kept in the box
    page = pages.post("/grading/routes/it-support/guidelines/preview", {"guidelines": text}).content.decode()
    assert "<!doctype html>" in page and "<strong>strict</strong>" in page and "&lt;script&gt;" in page
    assert published_guidelines(route) == "" and not AuditEvent.objects.filter(action="route_updated").exists()


def test_the_guidelines_preview_needs_the_right_to_edit(route, other_route, page_of):
    form = {"guidelines": "**hi**"}
    url = "/grading/routes/it-support/guidelines/preview"
    assert page_of(make_user("preview-grader", "grader")).post(url, form, HTTP_HX_REQUEST="true").status_code == 403
    other = page_of(make_user("preview-hr-reviewer", "reviewer", other_route))
    assert other.post(url, form, HTTP_HX_REQUEST="true").status_code == 404
    assert page_of(make_user("preview-getter", "reviewer")).get(url).status_code == 405


def test_a_reviewer_of_another_route_cannot_edit_its_guidelines(route, other_route, page_of):
    pages = page_of(make_user("hr-reviewer", "reviewer", other_route))
    assert pages.get("/grading/routes/it-support/guidelines/").status_code == 404


def _grade_all(graders_verdicts: dict, questions: list[str]) -> None:
    """Each grader claims every item in turn and grades it by its question."""
    for user, verdicts in graders_verdicts.items():
        while (
            assignment := queue_services.assignment_claim(actor=TEST_ACTOR, grader=user, route_ids=None)
        ) is not None:
            verdict = verdicts[questions.index(assignment.item.question)]
            labels_services.grade_submit(
                actor=TEST_ACTOR, grader=user, public_id=assignment.item.public_id, verdict=verdict
            )


def test_adjudication_pages_show_every_grade_and_record_the_decision(route, page_of):
    ana, ben = make_user("ana", "grader"), make_user("ben", "grader")
    [decision_id] = pooled([record(question="Disputed?", gate={"name": "nli", "score": 0.4242, "cutoff": 0.9})])
    _grade_all({ana: ["correct"], ben: ["incorrect"]}, ["Disputed?"])
    pages = page_of(make_user("judge", "reviewer"))
    listing = pages.get("/grading/adjudication/").content.decode()
    item = GradingItem.objects.get(decision_id=decision_id)
    assert f"/grading/adjudication/{item.public_id}/" in listing
    page = pages.get(f"/grading/adjudication/{item.public_id}/").content.decode()
    assert "ana" in page and "ben" in page and "0.4242" not in page and "0.424" not in page
    response = pages.post(f"/grading/adjudication/{item.public_id}/", {"verdict": "correct", "note": "fine"})
    assert response.status_code == 302
    label = FinalLabel.objects.get(decision_id=decision_id)
    assert (label.method, label.correct, label.note) == ("adjudicated", True, "fine")
    assert "Nothing waits for adjudication" in pages.get("/grading/adjudication/").content.decode()


def test_revisiting_a_decided_item_shows_its_verdict_who_decided_and_why(route, page_of):
    ana, ben = make_user("ana", "grader"), make_user("ben", "grader")
    [disputed_id, agreed_id] = pooled([record(question="Disputed?"), record(question="Agreed?")])
    _grade_all({ana: ["correct", "correct"], ben: ["incorrect", "correct"]}, ["Disputed?", "Agreed?"])
    judge = make_user("judge", "reviewer")
    pages = page_of(judge)
    disputed = GradingItem.objects.get(decision_id=disputed_id)
    url = f"/grading/adjudication/{disputed.public_id}/"
    pages.post(url, {"verdict": "incorrect", "note": "The passage names the manager."})

    for reader in (pages, page_of(make_user("second-judge", "reviewer"))):
        response = reader.get(url)
        html = response.content.decode()
        assert response.status_code == 200 and 'name="verdict"' not in html
        assert 'data-field="final-verdict">Incorrect<' in html and "Decided by judge" in html
        assert "Why: The passage names the manager." in html
    # a late second decision is refused and the page shows the one that stands
    late = page_of(make_user("late-judge", "reviewer")).post(url, {"verdict": "correct", "note": "no"})
    html = late.content.decode()
    assert "not waiting for adjudication" in html and 'data-field="final-verdict">Incorrect<' in html
    assert FinalLabel.objects.get(decision_id=disputed_id).correct is False

    agreed = GradingItem.objects.get(decision_id=agreed_id)
    html = pages.get(f"/grading/adjudication/{agreed.public_id}/").content.decode()
    assert 'data-field="final-verdict">Correct<' in html and "graders' votes agreed" in html


def test_agreement_matches_scikit_learn_and_statsmodels(route, page_of):
    ana, ben = make_user("ana", "grader"), make_user("ben", "grader")
    questions = [f"Question {n}" for n in range(10)]
    decision_ids = pooled([record(question=q) for q in questions])
    gold = pool_services.gold_item_create(
        actor=TEST_ACTOR, decision=Decision.objects.get(pk=decision_ids[0]), verdict="correct", answer="A gold answer."
    )
    ana_votes = [
        "correct",
        "correct",
        "incorrect",
        "incorrect",
        "correct",
        "unsure",
        "correct",
        "incorrect",
        "correct",
        "correct",
    ]
    ben_votes = [
        "correct",
        "incorrect",
        "incorrect",
        "incorrect",
        "correct",
        "correct",
        "correct",
        "unsure",
        "correct",
        "incorrect",
    ]
    _grade_all({ana: ana_votes, ben: ben_votes}, questions)
    # the gold rate decides at random when a gold item comes; hand this one to ana directly
    Assignment.objects.create(
        item=gold, grader=ana, leased_at=timezone.now(), lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    labels_services.grade_submit(actor=TEST_ACTOR, grader=ana, public_id=gold.public_id, verdict="correct")

    result = selectors.route_agreement(route)
    [pair] = result["pairs"]
    assert pair["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(ana_votes, ben_votes))
    counts = np.array(
        [[v.count(c) for c in ("correct", "incorrect", "unsure")] for v in zip(ana_votes, ben_votes, strict=True)]
    )
    assert result["fleiss_kappa"]["value"] == pytest.approx(statsmodels_fleiss(counts))
    assert result["fleiss_kappa"]["low"] < result["fleiss_kappa"]["value"] < result["fleiss_kappa"]["high"]
    assert result["gwet_ac1"]["value"] is not None
    by_name = {g["grader"]: g for g in result["graders"]}
    assert (by_name["ana"]["grades"], by_name["ana"]["correct"], by_name["ana"]["unsure"]) == (11, 7, 1)
    assert by_name["ana"]["gold_accuracy"]["accuracy"]["value"] == 1.0 and by_name["ben"]["gold_accuracy"] is None
    assert FinalLabel.objects.filter(method="unanimous").count() == 8  # all but 1 and 9 (unsure is no vote)
    assert by_name["ana"]["label_agreement"]["voted"] == 7  # ana was unsure on item 5

    page = page_of(make_user("stats-reviewer", "reviewer")).get("/grading/agreement/").content.decode()
    assert f"{result['fleiss_kappa']['value']:.3f}" in page and "Cohen" in page and "Gwet" in page


def test_extreme_prevalence_points_to_gwets_ac1(route, page_of):
    ana, ben = make_user("ana", "grader"), make_user("ben", "grader")
    questions = [f"Q{n}" for n in range(12)]
    pooled([record(question=q) for q in questions])
    _grade_all({ana: ["correct"] * 12, ben: ["correct"] * 11 + ["incorrect"]}, questions)
    result = selectors.route_agreement(route)
    assert result["extreme_prevalence"] is True
    assert result["gwet_ac1"]["value"] > 0.8 > result["fleiss_kappa"]["value"]
    page = page_of(make_user("stats-reviewer", "reviewer")).get("/grading/agreement/").content.decode()
    assert "read Gwet" in page
    # The shares are of double-graded items only, and the page says so.
    assert "Verdicts among the grades of those 12 double-graded items (single-graded items are left out)" in page


def test_agreement_api_is_for_reviewers(route, reviewer, grader):
    assert reviewer.get("/api/v1/routes/it-support/agreement").status_code == 200
    assert reviewer.get("/api/v1/routes/nope/agreement").status_code == 404
    assert grader.get("/api/v1/routes/it-support/agreement").status_code == 403


def test_served_decisions_wait_in_the_queue_like_any_other(db):
    make_route("mixed")
    pooled([served_record(route="mixed"), record(route="mixed")])
    assert set(GradingItem.objects.values_list("status", flat=True)) == {ItemStatus.OPEN}


def test_reviewer_pages_cost_a_fixed_number_of_queries(route, page_of, django_assert_num_queries):
    ana, ben = make_user("ana", "grader"), make_user("ben", "grader")
    pages = page_of(make_user("counting-reviewer", "reviewer"))
    counts = []
    for batch in (["A0", "A1"], ["B0", "B1", "B2", "B3", "B4"]):
        pooled([record(question=q) for q in batch])
        _grade_all({ana: ["correct"] * len(batch), ben: ["incorrect"] * len(batch)}, batch)
        with django_assert_num_queries(4) as listing:  # session, user, grants, items with grade counts
            pages.get("/grading/adjudication/")
        listing_count = len(listing.captured_queries)
        # session, user, grants, routes, grades, labels, the pool's counts for the blindness probe
        with django_assert_num_queries(7) as agreement:
            pages.get("/grading/agreement/")
        counts.append((listing_count, len(agreement.captured_queries)))
    assert counts[0] == counts[1]
    item = GradingItem.objects.filter(status=ItemStatus.ADJUDICATION).first()
    with django_assert_num_queries(6):  # session, user, grants, item, grades, passages
        pages.get(f"/grading/adjudication/{item.public_id}/")


def test_a_malformed_route_is_refused_not_crashed(route, grader_user, page_of, grader, reviewer):
    assert page_of(grader_user).get("/grading/?route=bad%00slug").status_code == 404
    assert grader.post("/api/v1/grading/next", {"route": "bad\x00slug"}, format="json").status_code == 400
    assert reviewer.get("/api/v1/grading/adjudications?route=bad%00slug").status_code == 400


def test_skipping_and_undoing_on_the_page_say_what_they_did(route, grader_user, page_of):
    pooled([record() for _ in range(3)])
    pages = page_of(grader_user)
    [first] = _item_ids(pages.post("/grading/next", HTTP_HX_REQUEST="true").content.decode())
    skipped = pages.post(f"/grading/items/{first}/skip", HTTP_HX_REQUEST="true").content.decode()
    assert "Skipped: the item goes to other graders and will not come back to you." in skipped
    [second] = _item_ids(skipped)
    pages.post(f"/grading/items/{second}/grade", {"verdict": "correct"}, HTTP_HX_REQUEST="true")
    undone = pages.post(f"/grading/items/{second}/undo", HTTP_HX_REQUEST="true").content.decode()
    assert "Your grade was withdrawn; grade this item again." in undone


def test_agreement_below_the_minimum_number_of_items_reads_too_few_items(route, page_of):
    ana, ben = make_user("ana", "grader"), make_user("ben", "grader")
    pooled([record(question="Q0")])
    _grade_all({ana: ["correct"], ben: ["incorrect"]}, ["Q0"])
    page = page_of(make_user("stats-reviewer", "reviewer")).get("/grading/agreement/").content.decode()
    assert "too few items" in page and "-1.000" not in page
