import pytest

from audit.models import AuditEvent
from grading.models import FinalLabel, GradingItem, ItemStatus
from tests.factories import make_token, make_user, record, served_record
from tests.grading.helpers import api_client, grade, next_item, pooled


def _grade_one_item(clients, verdicts):
    items = [next_item(client) for client in clients]
    assert len({i["id"] for i in items}) == 1
    for client, item, verdict in zip(clients, items, verdicts, strict=True):
        assert grade(client, item["id"], verdict).status_code == 201
    return GradingItem.objects.get(public_id=items[0]["id"])


def test_two_agreeing_grades_make_a_unanimous_final_label(route, graders):
    [decision_id] = pooled([record()])
    item = _grade_one_item(graders[:2], ["correct", "correct"])
    label = FinalLabel.objects.get(decision_id=decision_id)
    assert (label.correct, label.method, label.item_id, item.status) == (True, "unanimous", item.pk, "labelled")
    assert AuditEvent.objects.filter(action="label_decided", payload__objects__decision=[decision_id]).exists()


def test_one_grade_is_not_enough_for_a_label(route, graders):
    [decision_id] = pooled([record()])
    item = next_item(graders[0])
    grade(graders[0], item["id"], "incorrect")
    assert not FinalLabel.objects.filter(decision_id=decision_id).exists()


def test_unsure_is_no_vote(route, graders):
    [decision_id] = pooled([record()])
    _grade_one_item(graders[:2], ["unsure", "incorrect"])
    label = FinalLabel.objects.get(decision_id=decision_id)
    assert (label.correct, label.method) == (False, "unanimous")


def test_when_every_grader_is_unsure_a_reviewer_decides(route, graders):
    [decision_id] = pooled([record()])
    item = _grade_one_item(graders[:2], ["unsure", "unsure"])
    assert item.status == ItemStatus.ADJUDICATION
    assert not FinalLabel.objects.filter(decision_id=decision_id).exists()
    event = AuditEvent.objects.get(action="adjudication_requested")
    assert event.payload["reason"] == "all_unsure"


def test_disagreeing_graders_send_the_item_to_adjudication_and_a_reviewer_decides(route, graders, reviewer):
    [decision_id] = pooled([record()])
    item = _grade_one_item(graders[:2], ["correct", "incorrect"])
    assert item.status == ItemStatus.ADJUDICATION

    listing = reviewer.get("/api/v1/grading/adjudications").json()["items"]
    assert listing == [{"id": str(item.public_id), "route": "it-support", "grades": 2}]
    shown = reviewer.get(f"/api/v1/grading/items/{item.public_id}/adjudication").json()
    assert sorted(g["verdict"] for g in shown["grades"]) == ["correct", "incorrect"]
    assert "gate" not in shown and "score" not in str(shown)

    response = reviewer.post(
        f"/api/v1/grading/items/{item.public_id}/adjudication",
        {"verdict": "incorrect", "note": "passage 2 contradicts it"},
        format="json",
    )
    assert response.status_code == 201
    label = FinalLabel.objects.get(decision_id=decision_id)
    assert (label.correct, label.method, label.decided_by, label.note) == (
        False,
        "adjudicated",
        reviewer.user,
        "passage 2 contradicts it",
    )
    again = reviewer.post(f"/api/v1/grading/items/{item.public_id}/adjudication", {"verdict": "correct"}, format="json")
    assert again.status_code == 409


def test_graders_cannot_adjudicate_and_a_reviewer_cannot_decide_an_item_they_graded(route, graders, make_grader):
    pooled([record()])
    grading_reviewer = make_grader("grading-reviewer", role="reviewer")
    item = _grade_one_item([graders[0], grading_reviewer], ["correct", "incorrect"])
    url = f"/api/v1/grading/items/{item.public_id}/adjudication"
    assert graders[1].post(url, {"verdict": "correct"}, format="json").status_code == 403
    assert graders[1].get("/api/v1/grading/adjudications").status_code == 403
    response = grading_reviewer.post(url, {"verdict": "correct"}, format="json")
    assert response.status_code == 403 and response.json()["error"]["code"] == "own_grade"


def test_the_lookup_shows_grades_and_final_label_to_readers(route, graders, reviewer):
    [decision_id] = pooled([record()])
    _grade_one_item(graders[:2], ["correct", "unsure"])
    body = reviewer.get(f"/api/v1/decisions/{decision_id}").json()
    assert sorted((g["grader"], g["verdict"]) for g in body["grades"]) == [
        ("grader-1", "correct"),
        ("grader-2", "unsure"),
    ]
    assert body["final_label"]["verdict"] == "correct" and body["final_label"]["method"] == "unanimous"


def test_the_refusal_page_shows_grades_and_final_label(route, graders, page_of):
    [decision_id] = pooled([record()])
    _grade_one_item(graders[:2], ["incorrect", "incorrect"])
    page = page_of(make_user("page-reader", "reviewer")).get(f"/decisions/{decision_id}/").content.decode()
    assert "Grades and final label" in page and "grader-1" in page and "unanimous" in page


# --------------------------------------------------------------------------- POST /api/v1/labels


@pytest.fixture
def importer(route):
    return api_client(make_user("label-importer", "integrator"))


def _labels(*rows):
    return {"labels": [dict(zip(("route", "request_id", "verdict", "source"), row, strict=True)) for row in rows]}


def test_labels_import_as_imported_with_their_source(route, importer):
    first, second = record(), served_record()
    decision_ids = pooled([first, second])
    response = importer.post(
        "/api/v1/labels",
        _labels(
            ("it-support", first["request_id"], "correct", "audit-2025"),
            ("it-support", second["request_id"], "incorrect", "audit-2025"),
        ),
        format="json",
    )
    assert response.status_code == 201 and response.json() == {"created": 2, "unchanged": 0}
    labels = FinalLabel.objects.order_by("decision_id")
    assert [(lbl.decision_id, lbl.correct, lbl.method, lbl.source) for lbl in labels] == [
        (decision_ids[0], True, "imported", "audit-2025"),
        (decision_ids[1], False, "imported", "audit-2025"),
    ]
    assert set(GradingItem.objects.values_list("status", flat=True)) == {ItemStatus.LABELLED}  # out of the queue
    event = AuditEvent.objects.get(action="labels_imported")
    assert event.payload["objects"] == {"decision": decision_ids} and event.payload["sources"] == ["audit-2025"]


def test_replaying_an_import_changes_nothing(route, importer):
    sent = record()
    pooled([sent])
    body = _labels(("it-support", sent["request_id"], "correct", "audit-2025"))
    assert importer.post("/api/v1/labels", body, format="json").status_code == 201
    replay = importer.post("/api/v1/labels", body, format="json")
    assert replay.status_code == 201 and replay.json() == {"created": 0, "unchanged": 1}
    assert AuditEvent.objects.filter(action="labels_imported").count() == 1


def test_a_bad_batch_lists_every_problem_and_writes_nothing(route, importer):
    sent = record()
    pooled([sent])
    body = {
        "labels": [
            {"route": "it-support", "request_id": sent["request_id"], "verdict": "correct", "source": "s"},
            {"route": "it-support", "request_id": sent["request_id"], "verdict": "unsure", "source": "s"},
            {"route": "it-support", "request_id": "x", "verdict": "correct"},
            {"route": "it-support", "request_id": "x", "verdict": "correct", "source": "s", "extra": 1},
            "not an object",
        ]
    }
    response = importer.post("/api/v1/labels", body, format="json")
    assert response.status_code == 400
    problems = {(d["index"], d["field"]) for d in response.json()["error"]["details"]}
    assert problems == {(1, "verdict"), (2, "source"), (3, "extra"), (4, None)}  # null: the whole item
    assert not FinalLabel.objects.exists()


def test_an_unknown_decision_is_400_naming_it(route, importer):
    sent = record()
    pooled([sent])
    response = importer.post(
        "/api/v1/labels",
        _labels(("it-support", sent["request_id"], "correct", "s"), ("it-support", "q-missing", "correct", "s")),
        format="json",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unknown_decision" and "it-support/q-missing" in error["message"]
    assert error["details"][0]["index"] == 1
    assert not FinalLabel.objects.exists()


def test_an_unknown_route_is_400_naming_it(route, importer):
    response = importer.post("/api/v1/labels", _labels(("nowhere", "q-1", "correct", "s")), format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_route" and "nowhere" in response.json()["error"]["message"]


def test_a_label_that_contradicts_a_stored_one_is_409_and_nothing_is_written(route, importer, graders):
    graded, fresh = record(), record()
    pooled([graded, fresh])
    _grade_one_item(graders[:2], ["correct", "correct"])
    graded_id = FinalLabel.objects.get().decision.request_id
    response = importer.post(
        "/api/v1/labels",
        _labels(("it-support", fresh["request_id"], "correct", "s"), ("it-support", graded_id, "correct", "s")),
        format="json",
    )
    assert response.status_code == 409
    assert response.json()["error"]["details"][0]["request_id"] == graded_id
    assert FinalLabel.objects.count() == 1


def test_the_same_decision_twice_in_one_batch_must_agree(route, importer):
    sent = record()
    pooled([sent])
    same = _labels(
        ("it-support", sent["request_id"], "correct", "s"), ("it-support", sent["request_id"], "correct", "s")
    )
    assert importer.post("/api/v1/labels", same, format="json").json() == {"created": 1, "unchanged": 1}
    other = record()
    pooled([other])
    differ = _labels(
        ("it-support", other["request_id"], "correct", "s"), ("it-support", other["request_id"], "incorrect", "s")
    )
    assert importer.post("/api/v1/labels", differ, format="json").status_code == 409


def test_who_may_import_labels(route, other_route, grader, reviewer, auditor):
    sent = record()
    pooled([sent])
    body = _labels(("it-support", sent["request_id"], "correct", "s"))
    assert grader.post("/api/v1/labels", body, format="json").status_code == 403
    assert auditor.post("/api/v1/labels", body, format="json").status_code == 403
    elsewhere = api_client(make_user("hr-integrator", "integrator", other_route))
    # A route the caller may not import into reads as unknown: the answer reveals nothing about it.
    refused = elsewhere.post("/api/v1/labels", body, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "unknown_route"
    assert reviewer.post("/api/v1/labels", body, format="json").status_code == 201


def test_oversized_and_malformed_label_batches(route, importer):
    assert importer.post("/api/v1/labels", {"labels": []}, format="json").status_code == 400
    assert importer.post("/api/v1/labels", {"nope": 1}, format="json").status_code == 400
    big = _labels(*[("it-support", f"q{n}", "correct", "s") for n in range(1001)])
    assert importer.post("/api/v1/labels", big, format="json").status_code == 413


def test_a_grader_still_holding_a_lease_on_an_imported_item_may_finish(route, importer, grader):
    sent = record()
    pooled([sent])
    item = next_item(grader)
    importer.credentials(HTTP_AUTHORIZATION=f"Token {make_token(importer.user)}")
    importer.post("/api/v1/labels", _labels(("it-support", sent["request_id"], "incorrect", "s")), format="json")
    assert grade(grader, item["id"], "correct").status_code == 201
    label = FinalLabel.objects.get()
    assert (label.correct, label.method) == (False, "imported")
