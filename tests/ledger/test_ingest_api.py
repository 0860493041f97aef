import json

import pytest

from audit.models import AuditEvent
from console.ledger.models import Decision, Passage
from tests.factories import make_route, make_token, make_user, record, served_record

URL = "/api/v1/decisions"


def post(client, records, **extra):
    return client.post(URL, {"decisions": records}, format="json", **extra)


def assert_envelope(response, status, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    if code:
        assert body["error"]["code"] == code
    return body["error"]


def test_a_valid_batch_is_stored_with_its_passages(integrator):
    response = post(integrator, [record(), served_record()])
    assert response.status_code == 201
    assert response.json() == {"created": 2, "unchanged": 0}
    assert Decision.objects.count() == 2
    assert [len(ids) for ids in Decision.objects.values_list("passage_ids", flat=True)] == [2, 2]
    # Both decisions logged the same two passages: stored once each.
    assert Passage.objects.count() == 2


def test_an_identical_replay_is_unchanged_not_an_error(integrator):
    batch = [record(), record()]
    assert post(integrator, batch).json() == {"created": 2, "unchanged": 0}
    response = post(integrator, batch)
    assert response.status_code == 201
    assert response.json() == {"created": 0, "unchanged": 2}
    assert Decision.objects.count() == 2


def test_a_replay_with_the_same_instant_in_another_timezone_is_unchanged(integrator):
    first = record(occurred_at="2026-11-01T12:00:00Z")
    again = dict(first, occurred_at="2026-11-01T13:00:00+01:00")
    post(integrator, [first])
    assert post(integrator, [again]).json() == {"created": 0, "unchanged": 1}


def test_same_request_id_with_different_content_is_409_and_nothing_is_written(integrator):
    stored = record()
    post(integrator, [stored])
    fresh = record()
    changed = dict(stored, question="A different question")
    response = post(integrator, [fresh, changed])
    error = assert_envelope(response, 409, "conflict")
    assert error["details"][0]["index"] == 1
    assert error["details"][0]["request_id"] == stored["request_id"]
    assert not Decision.objects.filter(request_id=fresh["request_id"]).exists()
    assert Decision.objects.get(request_id=stored["request_id"]).question == stored["question"]


def test_the_same_request_id_twice_in_one_batch_with_different_content_is_409(integrator):
    one = record()
    response = post(integrator, [one, dict(one, claim="other claim")])
    assert_envelope(response, 409, "conflict")
    assert Decision.objects.count() == 0


def test_one_bad_item_rejects_the_whole_batch_naming_every_bad_item_and_field(integrator):
    good = record()
    bad_score = record(gate={"name": "nli", "score": "high", "cutoff": 0.85})
    bad_many = record(question="", outcome="maybe")
    del bad_many["versions"]
    response = post(integrator, [good, bad_score, bad_many])
    error = assert_envelope(response, 400, "invalid")
    problems = {(d["index"], d["field"]) for d in error["details"]}
    assert problems == {(1, "gate.score"), (2, "question"), (2, "outcome"), (2, "versions")}
    assert "2 of 3" in error["message"]
    assert Decision.objects.count() == 0
    assert Passage.objects.count() == 0


def test_an_unknown_route_is_400_naming_it_and_nothing_is_written(integrator):
    response = post(integrator, [record(), record(route="no-such-route")])
    error = assert_envelope(response, 400, "unknown_route")
    assert "no-such-route" in error["message"]
    assert error["details"][0]["index"] == 1 and error["details"][0]["field"] == "route"
    assert Decision.objects.count() == 0


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"question": "x" * 10_001}, "question"),
        ({"claim": "x" * 20_001}, "claim"),
        ({"passages": [{"id": "p", "text": "x" * 100_001}]}, "passages[0].text"),
        ({"passages": [{"id": f"p{i}", "text": "t"} for i in range(101)]}, "passages"),
        ({"gate": {"name": "g", "score": True, "cutoff": 0.5}}, "gate.score"),
        ({"occurred_at": "2026-11-01T12:00:00"}, "occurred_at"),
        ({"occurred_at": "yesterday"}, "occurred_at"),
        ({"outcome": "served", "served_answer": None}, "served_answer"),
        ({"served_answer": "an answer"}, "served_answer"),
        ({"passages": [{"id": "a", "text": "t", "rank": 1}, {"id": "b", "text": "u", "rank": 1}]}, "passages[1].rank"),
        ({"surprise": 1}, "surprise"),
        ({"segments": {"language": ["en"]}}, "segments.language"),
        ({"question": "nul\x00byte"}, "question"),
    ],
)
def test_each_limit_and_rule_is_a_400_naming_the_field(integrator, overrides, field):
    response = post(integrator, [record(**overrides)])
    error = assert_envelope(response, 400)
    assert field in {d["field"] for d in error["details"]}
    assert Decision.objects.count() == 0


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_non_finite_score_is_rejected(integrator, literal):
    body = json.dumps({"decisions": [record()]}).replace('"score": 0.62', f'"score": {literal}')
    response = integrator.post(URL, body, content_type="application/json")
    assert_envelope(response, 400)
    assert Decision.objects.count() == 0


def test_more_than_1000_decisions_is_413(integrator):
    response = post(integrator, [record() for _ in range(1001)])
    assert_envelope(response, 413, "batch_too_large")
    assert Decision.objects.count() == 0


def test_a_body_larger_than_the_server_accepts_is_413(integrator, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    response = post(integrator, [record(question="q" * 5000)])
    assert_envelope(response, 413, "too_large")


def test_malformed_json_is_400_in_the_envelope(integrator):
    response = integrator.post(URL, '{"decisions": [', content_type="application/json")
    assert_envelope(response, 400, "malformed_json")


def test_a_body_without_a_decisions_list_is_400(integrator):
    assert_envelope(integrator.post(URL, {"items": []}, format="json"), 400, "invalid_body")
    assert_envelope(integrator.post(URL, [1, 2], format="json"), 400, "invalid_body")
    assert_envelope(post(integrator, []), 400, "empty_batch")


def test_without_a_token_ingest_is_401(anonymous, route):
    response = post(anonymous, [record()])
    assert_envelope(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Token"


def test_a_wrong_token_is_401(anonymous, route):
    anonymous.credentials(HTTP_AUTHORIZATION="Token arc_not-a-real-token")
    assert_envelope(post(anonymous, [record()]), 401)


def test_a_grader_may_not_ingest(grader):
    assert_envelope(post(grader, [record()]), 403, "forbidden")
    assert Decision.objects.count() == 0


def test_an_integrator_scoped_to_one_route_may_not_ingest_into_another(route, other_route, anonymous):
    scoped = make_user("scoped", "integrator", other_route)
    anonymous.credentials(HTTP_AUTHORIZATION=f"Token {make_token(scoped)}")
    assert_envelope(post(anonymous, [record(route="it-support")]), 400, "unknown_route")
    assert Decision.objects.count() == 0
    assert post(anonymous, [record(route="hr-policy")]).status_code == 201


def test_the_same_external_passage_id_with_other_text_is_another_passage(integrator):
    first = record(passages=[{"id": "kb/1", "text": "Version one."}])
    second = record(passages=[{"id": "kb/1", "text": "Version two."}])
    post(integrator, [first, second])
    assert Passage.objects.filter(external_id="kb/1").count() == 2


def test_ingest_writes_one_audit_event_listing_the_new_decisions(integrator):
    before = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
    post(integrator, [record(), record()])
    # Then the pool entry of the same transaction (grading's in-ingest hook), as the system's.
    event, entry = AuditEvent.objects.filter(seq__gt=before).order_by("seq")
    assert (event.action, entry.action, entry.actor) == (
        "decisions_ingested",
        "pool_entered",
        "system:grading_pool_enter",
    )
    assert event.actor.startswith("token:") and event.actor.endswith("/integrator")
    assert sorted(event.payload["objects"]["decision"]) == sorted(Decision.objects.values_list("pk", flat=True))


def test_a_rejected_batch_writes_no_audit_event(integrator):
    stored = record()
    post(integrator, [stored])
    before = AuditEvent.objects.count()
    post(integrator, [record(), dict(stored, claim="changed")])
    assert AuditEvent.objects.count() == before


def test_an_embedding_is_stored_as_a_pgvector(integrator):
    post(integrator, [record(passages=[{"id": "e", "text": "with vector", "embedding": [0.5, 0.25, 1]}])])
    passage = Passage.objects.get(external_id="e")
    assert list(passage.embedding) == [0.5, 0.25, 1.0]


def test_make_route_helper_is_idempotent(db):
    assert make_route("x-route").pk == make_route("x-route").pk


def test_routes_logging_the_same_passage_get_their_own_passage_and_embedding(route, other_route, integrator):
    shared = {
        "id": "kb/shared#1",
        "text": "Badges are collected at reception.",
        "rank": 1,
        "source": "kb",
        "uri": "https://intranet/kb/badges",
    }
    it_record = record(route="it-support", passages=[{**shared, "embedding": [1.0, 0.0]}])
    hr_record = record(route="hr-policy", passages=[{**shared, "embedding": [0.0, 1.0]}])
    assert post(integrator, [it_record]).status_code == 201
    assert post(integrator, [hr_record]).status_code == 201

    it_reader = make_user("it-lead", "policy_owner", route)
    hr_reader = make_user("hr-lead", "policy_owner", other_route)
    integrator.credentials(HTTP_AUTHORIZATION=f"Token {make_token(it_reader)}")
    it_passage = integrator.get(f"/api/v1/routes/it-support/decisions/{it_record['request_id']}").json()
    integrator.credentials(HTTP_AUTHORIZATION=f"Token {make_token(hr_reader)}")
    hr_passage = integrator.get(f"/api/v1/routes/hr-policy/decisions/{hr_record['request_id']}").json()
    it_id, hr_id = it_passage["passages"][0]["passage_id"], hr_passage["passages"][0]["passage_id"]
    assert it_id != hr_id
    assert list(Passage.objects.get(pk=it_id).embedding) == [1.0, 0.0]
    assert list(Passage.objects.get(pk=hr_id).embedding) == [0.0, 1.0]

    # The HR reader verifies against HR's passage, and cannot reach IT's through its id.
    claim = {"claim": "collected at reception"}
    assert integrator.post("/api/v1/verify", {"passage_id": hr_id, **claim}, format="json").status_code == 200
    assert integrator.post("/api/v1/verify", {"passage_id": it_id, **claim}, format="json").status_code == 404


@pytest.mark.parametrize(("field", "value"), [("source", []), ("source", 0), ("uri", False), ("uri", {})])
def test_a_passage_source_or_uri_that_is_not_text_is_refused_rather_than_stored_empty(integrator, field, value):
    # schemathesis: `raw.get("source") or ""` stored [] as an empty source.
    item = record()
    item["passages"][0][field] = value
    error = assert_envelope(post(integrator, [item]), 400, "invalid")
    assert [(d["index"], d["field"]) for d in error["details"]] == [(0, f"passages[0].{field}")]


def test_a_null_passage_source_or_uri_is_stored_empty(integrator):
    item = record()
    item["passages"][0].update(source=None, uri=None)
    assert post(integrator, [item]).status_code == 201


def test_a_batchs_decisions_get_new_ids_in_the_batchs_order(integrator):
    """Ids are drawn for the whole batch at once; the decisions take them in the order they were
    sent, after every id an earlier batch took."""
    post(integrator, [record()])
    first = Decision.objects.get().pk
    batch = [record() for _ in range(40)]
    assert post(integrator, batch).json()["created"] == 40
    stored = dict(Decision.objects.values_list("request_id", "pk"))
    ids = [stored[item["request_id"]] for item in batch]
    assert ids == sorted(ids) and len(set(ids)) == 40 and ids[0] > first
