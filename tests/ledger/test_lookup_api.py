from tests.factories import ingest, make_token, make_user, record


def test_lookup_by_id_returns_the_decision_with_passages_in_rank_order(route, reviewer):
    sent = record(passages=[{"id": "b", "text": "second", "rank": 2}, {"id": "a", "text": "first", "rank": 1}])
    [decision_id] = ingest([sent])
    response = reviewer.get(f"/api/v1/decisions/{decision_id}")
    assert response.status_code == 200
    body = response.json()
    assert body["request_id"] == sent["request_id"]
    assert body["gate"] == sent["gate"]
    assert [p["id"] for p in body["passages"]] == ["a", "b"]
    assert all(isinstance(p["passage_id"], int) for p in body["passages"])
    assert body["passages"][0]["text"] == "first"


def test_lookup_by_route_and_request_id_finds_the_same_decision(route, reviewer):
    sent = record(request_id="odd/id with spaces")
    [decision_id] = ingest([sent])
    response = reviewer.get("/api/v1/routes/it-support/decisions/odd/id%20with%20spaces")
    assert response.status_code == 200
    assert response.json()["id"] == decision_id


def test_lookup_costs_a_fixed_number_of_queries(route, reviewer, django_assert_num_queries):
    [few] = ingest([record(passages=[{"id": "x", "text": "t"}])])
    [many] = ingest([record(passages=[{"id": f"p{i}", "text": f"t{i}"} for i in range(40)])])
    # token (read, last used), grants, decision (with its support), passages, span checks, shadow run,
    # final label, grades, signed policy in force at the decision's time
    for decision_id in (few, many):
        reviewer.credentials(HTTP_AUTHORIZATION=f"Token {make_token(reviewer.user)}")
        with django_assert_num_queries(10):
            assert reviewer.get(f"/api/v1/decisions/{decision_id}").status_code == 200


def test_a_grader_never_sees_a_decision(route, grader):
    [decision_id] = ingest([record()])
    assert grader.get(f"/api/v1/decisions/{decision_id}").status_code == 403
    assert grader.get("/api/v1/routes/it-support/decisions/anything").status_code == 403
    assert grader.get("/api/v1/routes").status_code == 403


def test_a_reader_of_another_route_gets_404(route, other_route, anonymous):
    [decision_id] = ingest([record()])
    hr_owner = make_user("hr-owner", "policy_owner", other_route)
    anonymous.credentials(HTTP_AUTHORIZATION=f"Token {make_token(hr_owner)}")
    assert anonymous.get(f"/api/v1/decisions/{decision_id}").status_code == 404


def test_an_unknown_decision_is_404_in_the_envelope(reviewer):
    response = reviewer.get("/api/v1/decisions/999999")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_an_unknown_api_path_is_a_json_404(reviewer):
    response = reviewer.get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_routes_lists_only_what_the_caller_may_read(route, other_route, owner, reviewer):
    assert [r["slug"] for r in owner.get("/api/v1/routes").json()["routes"]] == ["it-support"]
    assert {r["slug"] for r in reviewer.get("/api/v1/routes").json()["routes"]} == {"it-support", "hr-policy"}


def test_passage_digests_take_32_bytes_on_disk_and_still_read_as_hex(route, reviewer):
    import hashlib

    from django.db import connection

    from console.ledger.models import Passage

    sent = record(passages=[{"id": "a", "text": "first"}])
    [decision_id] = ingest([sent])
    again = record(passages=[{"id": "a", "text": "first"}])
    ingest([again])  # the same chunk again: found by its key, not stored twice
    assert Passage.objects.count() == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT octet_length(content_key) FROM ledger_passage")
        assert cursor.fetchall() == [(32,)]
    digest = hashlib.sha256(b"first").hexdigest()
    passage = Passage.objects.get()
    assert passage.text_sha256 == digest and len(passage.content_key) == 64
    assert Passage.objects.filter(content_key=passage.content_key).exists()
    assert reviewer.get(f"/api/v1/decisions/{decision_id}").json()["passages"][0]["sha256"] == digest
