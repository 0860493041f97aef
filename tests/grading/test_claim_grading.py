"""Long answers graded claim by claim (issue 31): the item split into its claims, the per-claim
grade, the label where graders agree, adjudication of the disputed claims only, undo, agreement."""

from __future__ import annotations

import re

import pytest

from audit.models import AuditEvent
from console.ledger.models import Decision
from console.ledger.services import route_answer_settings_set
from grading.models import ClaimGrade, FinalClaimLabel, FinalLabel, Grade, GradingItem, ItemStatus
from tests.factories import TEST_ACTOR, make_route, make_user, record
from tests.grading.helpers import api_client, grade, next_item, pooled
from tests.grading.test_blindness import SCORES, assert_blind

HX = {"HTTP_HX_REQUEST": "true"}
ANSWER = "Open Settings. Choose Security. Press Reset."
CLAIMS = ["Open Settings.", "Choose Security.", "Press Reset."]


def make_long(route) -> None:
    route_answer_settings_set(actor=TEST_ACTOR, route=route, answer_form="long")


@pytest.fixture
def long_route(route):
    make_long(route)
    return route


def claims(*verdicts: str) -> list[dict]:
    return [{"index": i, "verdict": v} for i, v in enumerate(verdicts)]


def grade_claims(client, item_id: str, verdicts, note: str = ""):
    body = {"claims": verdicts if verdicts and isinstance(verdicts[0], dict) else claims(*verdicts), "note": note}
    return client.post(f"/api/v1/grading/items/{item_id}/grades", body, format="json")


def test_a_long_routes_item_comes_split_into_its_claims(long_route, grader):
    pooled([record(question="How do I reset MFA?", claim=ANSWER)])
    response = grader.post("/api/v1/grading/next", {}, format="json")
    item = response.json()["item"]
    assert set(item) == {"id", "question", "answer", "passages", "guidelines", "claims"}
    assert item["answer"] == ANSWER
    assert item["claims"] == [{"index": i, "text": text} for i, text in enumerate(CLAIMS)]
    assert response["Cache-Control"] == "no-store"


def test_graders_mark_the_claims_the_answering_system_sent_and_never_see_their_citations(long_route, grader):
    [decision_id] = pooled([record(claim=ANSWER)])
    sent = [{"text": "Settings holds it", "citations": ["kb/secret-id"]}, {"text": "Reset is the button"}]
    Decision.objects.filter(pk=decision_id).update(claims=sent)
    response = grader.post("/api/v1/grading/next", {}, format="json")
    assert [c["text"] for c in response.json()["item"]["claims"]] == ["Settings holds it", "Reset is the button"]
    assert "kb/secret-id" not in response.content.decode()


def test_a_short_routes_item_keeps_its_shape_and_refuses_claim_verdicts(route, grader):
    pooled([record(claim=ANSWER)])
    item = next_item(grader)
    assert "claims" not in item
    response = grade_claims(grader, item["id"], ["supported", "supported", "supported"])
    assert response.status_code == 400 and response.json()["error"]["code"] == "claims_not_expected"
    assert grade(grader, item["id"], "correct").status_code == 201


def test_a_claim_grade_must_name_every_claim_exactly_once_and_the_lease_survives_a_refusal(long_route, grader):
    pooled([record(claim=ANSWER)])
    item = next_item(grader)
    assert grade(grader, item["id"], "correct").json()["error"]["code"] == "claims_required"
    missing = grade_claims(grader, item["id"], ["supported", "supported"])
    assert missing.status_code == 400
    assert [d["code"] for d in missing.json()["error"]["details"]] == ["missing_claims"]
    twice = grade_claims(grader, item["id"], [*claims("supported", "supported"), {"index": 1, "verdict": "supported"}])
    assert [d["code"] for d in twice.json()["error"]["details"]] == ["duplicate_claim"]
    beyond = grade_claims(
        grader, item["id"], [*claims("supported", "supported", "supported"), {"index": 3, "verdict": "supported"}]
    )
    assert [(d["code"], d["index"]) for d in beyond.json()["error"]["details"]] == [("unknown_claim", 3)]
    wrong = grade_claims(grader, item["id"], [{"index": 0, "verdict": "correct"}])
    assert wrong.status_code == 400
    assert Grade.objects.count() == 0
    response = grade_claims(grader, item["id"], ["supported", "unsupported", "unverifiable"])
    assert response.status_code == 201, response.content
    assert response.json() == {
        "item": item["id"],
        "verdict": "incorrect",
        "note": "",
        "claims": claims("supported", "unsupported", "unverifiable"),
    }
    assert list(ClaimGrade.objects.order_by("index").values_list("index", "verdict")) == [
        (0, "supported"),
        (1, "unsupported"),
        (2, "unverifiable"),
    ]
    event = AuditEvent.objects.filter(action="grade_submitted").get()
    assert event.payload["claims"] == {"old": None, "new": ["supported", "unsupported", "unverifiable"]}


def test_agreeing_graders_make_the_label_with_its_claim_counts_and_claim_rows(long_route, graders):
    [decision_id] = pooled([record(claim=ANSWER)])
    first, second, _ = graders
    for client in (first, second):
        item = next_item(client)
        assert grade_claims(client, item["id"], ["supported", "unverifiable", "supported"]).status_code == 201
    label = FinalLabel.objects.get(decision_id=decision_id)
    assert (label.method, label.claims_supported, label.claims_verifiable, label.correct) == ("unanimous", 2, 2, True)
    assert list(label.claim_labels.order_by("index").values_list("verdict", flat=True)) == [
        "supported",
        "unverifiable",
        "supported",
    ]
    assert GradingItem.objects.get().status == ItemStatus.LABELLED
    event = AuditEvent.objects.filter(action="label_decided").get()
    assert event.payload["claims_supported"] == {"old": None, "new": 2}
    assert event.payload["claims"]["new"] == ["supported", "unverifiable", "supported"]


def test_one_unsupported_claim_makes_the_answer_incorrect_and_all_unverifiable_is_not_correct(long_route, graders):
    pooled([record(claim=ANSWER), record(claim=ANSWER)])
    first, second, _ = graders
    for verdicts in (["supported", "unsupported", "supported"], ["unverifiable"] * 3):
        for client in (first, second):
            item = next_item(client)
            assert grade_claims(client, item["id"], verdicts).status_code == 201
    counts = sorted(FinalLabel.objects.values_list("claims_supported", "claims_verifiable", "correct"))
    assert counts == [(0, 0, False), (2, 3, False)]


def test_graders_who_differ_on_some_claims_send_only_those_to_the_reviewer(long_route, graders, reviewer):
    [decision_id] = pooled([record(claim=ANSWER)])
    first, second, _ = graders
    item = next_item(first)
    grade_claims(first, item["id"], ["supported", "supported", "unsupported"])
    next_item(second)
    grade_claims(second, item["id"], ["supported", "unverifiable", "supported"])
    assert GradingItem.objects.get().status == ItemStatus.ADJUDICATION
    requested = AuditEvent.objects.filter(action="adjudication_requested").get()
    assert requested.payload["reason"] == "claims_disagree" and requested.payload["claims"] == [1, 2]

    url = f"/api/v1/grading/items/{item['id']}/adjudication"
    shown = reviewer.get(url).json()
    assert [(c["index"], c["text"]) for c in shown["claims"]] == [(1, "Choose Security."), (2, "Press Reset.")]
    assert [g["verdict"] for g in shown["claims"][0]["grades"]] == ["supported", "unverifiable"]

    agreed_claim = reviewer.post(url, {"claims": claims("supported", "supported", "supported")}, format="json")
    assert agreed_claim.status_code == 400
    assert [(d["code"], d["index"]) for d in agreed_claim.json()["error"]["details"]] == [("unknown_claim", 0)]
    one_verdict = reviewer.post(url, {"verdict": "correct"}, format="json")
    assert one_verdict.status_code == 400 and one_verdict.json()["error"]["code"] == "claims_required"

    decided = reviewer.post(
        url,
        {"claims": [{"index": 1, "verdict": "supported"}, {"index": 2, "verdict": "unsupported"}], "note": "kb 2"},
        format="json",
    )
    assert decided.status_code == 201, decided.content
    assert decided.json() == {
        "item": item["id"],
        "verdict": "incorrect",
        "method": "adjudicated",
        "claims_supported": 2,
        "claims_verifiable": 3,
    }
    label = FinalLabel.objects.get(decision_id=decision_id)
    assert list(label.claim_labels.order_by("index").values_list("verdict", flat=True)) == [
        "supported",
        "supported",
        "unsupported",
    ]
    event = AuditEvent.objects.filter(action="label_adjudicated").get()
    assert event.payload["claims_adjudicated"] == {"old": None, "new": [1, 2]}


def test_the_adjudication_page_lists_only_the_disputed_claims_and_decides_them(long_route, graders, page_of):
    pooled([record(claim=ANSWER)])
    first, second, _ = graders
    item = next_item(first)
    grade_claims(first, item["id"], ["supported", "supported", "unsupported"])
    next_item(second)
    grade_claims(second, item["id"], ["supported", "supported", "supported"])
    pages = page_of(make_user("rae", "reviewer"))
    html = pages.get(f"/grading/adjudication/{item['id']}/").content.decode()
    assert re.findall(r'name="claim-(\d+)" value="supported"', html) == ["2"]
    assert "Press Reset." in html
    refused = pages.post(f"/grading/adjudication/{item['id']}/", {"note": ""})
    assert refused.status_code == 200 and FinalLabel.objects.count() == 0
    response = pages.post(f"/grading/adjudication/{item['id']}/", {"claim-2": "supported"})
    assert response.status_code == 302
    label = FinalLabel.objects.get()
    assert (label.method, label.claims_supported, label.claims_verifiable, label.correct) == ("adjudicated", 3, 3, True)
    assert FinalClaimLabel.objects.count() == 3


def test_undo_takes_back_the_claim_verdicts_with_the_grade(long_route, grader):
    pooled([record(claim=ANSWER)])
    item = next_item(grader)
    grade_claims(grader, item["id"], ["supported", "unsupported", "supported"])
    pages_user = grader.user
    from django.test import Client

    pages = Client()
    pages.force_login(pages_user)
    fragment = pages.post(f"/grading/items/{item['id']}/undo", **HX).content.decode()
    assert "grade this item again" in fragment and 'name="claim-0"' in fragment
    assert ClaimGrade.objects.count() == 0 and Grade.objects.count() == 0
    event = AuditEvent.objects.filter(action="grade_withdrawn").get()
    assert event.payload["claims"] == {"old": ["supported", "unsupported", "supported"], "new": None}
    assert grade_claims(grader, item["id"], ["supported"] * 3).status_code == 201


def test_the_queue_page_grades_claim_by_claim_and_keeps_the_item_when_a_claim_is_left_unmarked(long_route, page_of):
    pooled([record(claim=ANSWER), record(claim="Reboot. Wait.")])
    pages = page_of(make_user("gia", "grader"))
    html = pages.post("/grading/next", **HX).content.decode()
    [item_id] = re.findall(r'action="/grading/items/([0-9a-f-]{36})/grade"', html)
    count = len(re.findall(r'name="claim-(\d+)" value="supported"', html))
    assert 'name="form" value="claims"' in html and count in (2, 3)
    assert 'name="verdict"' not in html  # no whole-answer buttons on a long route

    partial = pages.post(f"/grading/items/{item_id}/grade", {"form": "claims", "claim-0": "supported"}, **HX)
    assert "Mark every claim" in partial.content.decode() or "not recorded" in partial.content.decode()
    assert item_id in partial.content.decode() and Grade.objects.count() == 0

    body = {"form": "claims", "note": "", **{f"claim-{i}": "supported" for i in range(count)}}
    saved = pages.post(f"/grading/items/{item_id}/grade", body, **HX).content.decode()
    assert f"{count} of {count} claims supported" in saved
    assert Grade.objects.get().verdict == "correct" and ClaimGrade.objects.count() == count


def _page_text_without_the_scale(text: str) -> str:
    # "not verifiable" is the claim scale, the same on every item whatever its origin; the detector's
    # verif\w* is there for the span verifier's results.
    return re.sub(r"(?i)not verifiable|unverifiable", "", text)


def test_claim_grading_reveals_no_score_outcome_or_origin(long_route):
    refused_score, refused_cutoff = SCORES["refused"]
    served_score, served_cutoff = SCORES["served"]
    pooled(
        [
            record(claim=ANSWER, gate={"name": "nli", "score": refused_score, "cutoff": refused_cutoff}),
            record(
                outcome="served",
                claim="Press Reset. Then sign in.",
                served_answer="Press Reset. Then sign in.",
                gate={"name": "nli", "score": served_score, "cutoff": served_cutoff},
            ),
        ]
    )
    user = make_user("blind-claims", "grader")
    from django.test import Client

    pages = Client()
    pages.force_login(user)
    response = pages.post("/grading/next", **HX)
    for _ in range(2):
        text = _page_text_without_the_scale(response.content.decode())
        assert_blind(text, "the claim item fragment")
        assert_blind(" ".join(f"{k}: {v}" for k, v in response.items()), "its headers")
        [item_id] = re.findall(r'action="/grading/items/([0-9a-f-]{36})/grade"', response.content.decode())
        count = len(re.findall(r'name="claim-(\d+)" value="supported"', response.content.decode()))
        body = {"form": "claims", **{f"claim-{i}": "unsupported" for i in range(count)}}
        response = pages.post(f"/grading/items/{item_id}/grade", body, **HX)
    assert_blind(_page_text_without_the_scale(response.content.decode()), "the last fragment")
    assert_blind(_page_text_without_the_scale(pages.get("/grading/").content.decode()), "the queue page")

    api = api_client(make_user("blind-claims-api", "grader"))
    while (handed := api.post("/api/v1/grading/next", {}, format="json")).status_code == 200:
        assert_blind(_page_text_without_the_scale(handed.content.decode()), "POST /api/v1/grading/next")
        item = handed.json()["item"]
        done = grade_claims(api, item["id"], ["supported"] * len(item["claims"]))
        assert_blind(_page_text_without_the_scale(done.content.decode()), "POST .../grades")


def test_overlap_and_leases_hold_on_a_long_route(long_route, graders):
    pooled([record(claim=ANSWER)])
    first, second, third = graders
    item = next_item(first)
    assert next_item(second)["id"] == item["id"]
    assert next_item(third) is None
    assert grade_claims(first, item["id"], ["supported"] * 3).status_code == 201
    assert grade_claims(first, item["id"], ["supported"] * 3).status_code == 409
    assert grade_claims(third, item["id"], ["supported"] * 3).status_code == 409


def test_agreement_is_reported_claim_by_claim_beside_the_answer_agreement(long_route, page_of):
    make_route("it-support")
    pooled([record(claim=ANSWER) for _ in range(6)])
    ann, bo = api_client(make_user("ann", "grader")), api_client(make_user("bo", "grader"))
    patterns = [
        (["supported", "supported", "unsupported"], ["supported", "supported", "unsupported"]),
        (["supported", "unverifiable", "supported"], ["supported", "supported", "supported"]),
        (["unsupported", "unsupported", "supported"], ["unsupported", "unsupported", "supported"]),
        (["supported", "supported", "supported"], ["supported", "supported", "supported"]),
        (["unverifiable", "supported", "unsupported"], ["unverifiable", "supported", "supported"]),
        (["supported", "unsupported", "supported"], ["supported", "unsupported", "supported"]),
    ]
    for first, second in patterns:
        item = next_item(ann)
        assert grade_claims(ann, item["id"], first).status_code == 201
        assert next_item(bo)["id"] == item["id"]
        assert grade_claims(bo, item["id"], second).status_code == 201
    reviewer = api_client(make_user("rev", "reviewer"))
    body = reviewer.get("/api/v1/routes/it-support/agreement").json()
    assert body["items_multiply_graded"] == 6  # the answer-level report stays beside it
    by_claim = body["claims"]
    assert (by_claim["claims_multiply_graded"], by_claim["answers"], by_claim["claims_graded"]) == (18, 6, 18)
    kappa = by_claim["fleiss_kappa"]
    assert kappa["n"] == 18 and kappa["interval"].startswith("percentile cluster bootstrap")
    assert kappa["low"] <= kappa["value"] <= kappa["high"]
    html = page_of(make_user("rev2", "reviewer")).get("/grading/agreement/").content.decode()
    assert "Claim by claim" in html and "kappa over claims" in html, html[html.find("Coefficients") :][:3000]


def test_a_short_routes_agreement_keeps_its_shape(route, reviewer):
    assert "claims" not in reviewer.get("/api/v1/routes/it-support/agreement").json()


def test_claim_grading_costs_the_same_queries_whatever_the_number_of_claims(
    long_route, graders, django_assert_num_queries
):
    from tests.factories import make_token

    answers = [ANSWER, " ".join(f"Step {n} holds." for n in range(12))]
    pooled([record(claim=answer) for answer in answers])
    first, second, _ = graders
    counts = {"next": [], "first grade": [], "last grade": []}
    for _ in answers:
        for client in (first, second):
            client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(client.user)}")
        with django_assert_num_queries(7) as handed:  # as on a short route: the claims come with the claim
            item = next_item(first)
        counts["next"].append(len(handed.captured_queries))
        assert next_item(second)["id"] == item["id"]
        for client, key in ((first, "first grade"), (second, "last grade")):
            client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(client.user)}")
            with django_assert_num_queries(30, exact=False) as graded:
                assert grade_claims(client, item["id"], ["supported"] * len(item["claims"])).status_code == 201
            counts[key].append(len(graded.captured_queries))
    assert {key: len(set(values)) for key, values in counts.items()} == {"next": 1, "first grade": 1, "last grade": 1}
