"""GET /api/v1/routes/{slug}/decisions: the refusals page's filters, paged by cursor."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from tests.factories import ingest, make_token, make_user, record, served_record


def _ids(response) -> list[str]:
    return [d["request_id"] for d in response.json()["results"]]


def _at(day: int, hour: int = 12) -> str:
    return f"2026-11-{day:02d}T{hour:02d}:00:00Z"


def test_the_list_gives_a_routes_decisions_newest_first_in_the_paging_shape(route, other_route, integrator):
    ingest([record(request_id="old", occurred_at=_at(1)), served_record(request_id="new", occurred_at=_at(2))])
    ingest([record(request_id="elsewhere", route="hr-policy", occurred_at=_at(3))])
    response = integrator.get("/api/v1/routes/it-support/decisions")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"results", "next"}
    assert _ids(response) == ["new", "old"]
    assert body["next"] is None
    first = body["results"][0]
    assert first["route"] == "it-support" and first["outcome"] == "served"
    assert {"id", "occurred_at", "question", "claim", "gate", "versions", "segments", "content_hash"} <= set(first)


def test_an_item_is_the_lookups_shape_without_what_other_apps_add(route, integrator, reviewer):
    [decision_id] = ingest([record(request_id="one")])
    item = integrator.get("/api/v1/routes/it-support/decisions").json()["results"][0]
    lookup = reviewer.get(f"/api/v1/decisions/{decision_id}").json()
    assert item == {key: lookup[key] for key in item}


def test_the_filters_are_the_refusals_pages(route, integrator):
    ingest(
        [
            record(request_id="low", occurred_at=_at(1), gate={"name": "nli", "score": 0.2, "cutoff": 0.85}),
            record(request_id="mid", occurred_at=_at(2), gate={"name": "nli", "score": 0.5, "cutoff": 0.85}),
            served_record(request_id="high", occurred_at=_at(3)),
            record(
                request_id="german",
                occurred_at=_at(4),
                question="Wie setze ich das Passwort zurück?",
                segments={"language": "de"},
                versions={"model": "gen-9"},
            ),
        ]
    )
    base = "/api/v1/routes/it-support/decisions"
    assert _ids(integrator.get(f"{base}?outcome=served")) == ["high"]
    assert _ids(integrator.get(f"{base}?outcome=refused&score_min=0.3&score_max=0.6")) == ["mid"]
    assert _ids(integrator.get(f"{base}?from=2026-11-02&to=2026-11-03")) == ["high", "mid"]
    assert _ids(integrator.get(f"{base}?segment.language=de")) == ["german"]
    assert _ids(integrator.get(f"{base}?version.model=gen-9")) == ["german"]
    assert _ids(integrator.get(f"{base}?q=passwort")) == ["german"]


def test_pages_follow_next_until_it_is_null_and_keep_the_filters(route, integrator):
    ingest([record(request_id=f"r{n}", occurred_at=_at(1 + n % 5, n % 20)) for n in range(7)])
    ingest([served_record(request_id="served")])
    url = "/api/v1/routes/it-support/decisions?outcome=refused&limit=3"
    seen, pages = [], 0
    while url:
        response = integrator.get(url)
        assert response.status_code == 200
        body = response.json()
        assert len(body["results"]) <= 3
        seen += [d["request_id"] for d in body["results"]]
        url, pages = body["next"], pages + 1
        if url:
            query = parse_qs(urlsplit(url).query)
            assert query["outcome"] == ["refused"] and query["limit"] == ["3"]
    assert pages == 3
    assert sorted(seen) == [f"r{n}" for n in range(7)]
    everything = _ids(integrator.get("/api/v1/routes/it-support/decisions?outcome=refused"))
    assert seen == everything


def test_a_decision_ingested_while_paging_neither_repeats_nor_shifts_a_page(route, integrator):
    ingest([record(request_id=f"r{n}", occurred_at=_at(1, n)) for n in range(4)])
    first = integrator.get("/api/v1/routes/it-support/decisions?limit=2").json()
    ingest([record(request_id="newest", occurred_at=_at(9))])
    second = integrator.get(first["next"]).json()
    assert [d["request_id"] for d in first["results"] + second["results"]] == ["r3", "r2", "r1", "r0"]


def test_bad_parameters_are_one_400_naming_each(route, integrator):
    response = integrator.get(
        "/api/v1/routes/it-support/decisions?outcome=maybe&score_min=x&from=2026-13-01&limit=0&colour=red"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_parameter"
    assert {d["field"] for d in error["details"]} == {"outcome", "score_min", "from", "limit", "colour"}
    assert all(set(d) >= {"field", "code", "message"} for d in error["details"])


def test_limit_runs_from_1_to_1000(route, integrator):
    ingest([record()])
    base = "/api/v1/routes/it-support/decisions"
    assert integrator.get(f"{base}?limit=1000").status_code == 200
    assert integrator.get(f"{base}?limit=1001").status_code == 400
    assert integrator.get(f"{base}?limit=1").status_code == 200


def test_a_cursor_not_given_out_by_this_list_is_a_400(route, integrator):
    response = integrator.get("/api/v1/routes/it-support/decisions?cursor=abc")
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["code"] == "invalid_cursor"


def test_a_route_the_token_may_not_read_answers_as_an_unknown_one(route, other_route):
    from tests.conftest import _client

    ingest([record(route="hr-policy")])
    stranger = _client(make_user("hr-only", "integrator", other_route))
    hidden = stranger.get("/api/v1/routes/it-support/decisions")
    unknown = stranger.get("/api/v1/routes/no-such-route/decisions")
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json()["error"]["code"] == unknown.json()["error"]["code"] == "not_found"
    assert stranger.get("/api/v1/routes/hr-policy/decisions").status_code == 200


def test_graders_may_not_list_decisions(route, grader, anonymous):
    assert grader.get("/api/v1/routes/it-support/decisions").status_code == 403
    assert anonymous.get("/api/v1/routes/it-support/decisions").status_code == 401


def test_a_page_costs_a_fixed_number_of_queries(route, integrator, django_assert_num_queries):
    for size in (2, 30):
        ingest([record() for _ in range(size)])
        integrator.credentials(HTTP_AUTHORIZATION=f"Token {make_token(integrator.user)}")
        # token (+ last used), the caller's grants, the route, the page
        with django_assert_num_queries(5):
            assert integrator.get("/api/v1/routes/it-support/decisions?limit=1000").status_code == 200


def test_the_pages_named_filters_are_flags(route, integrator, reviewer):
    [disputed, _] = ingest([record(request_id="disputed"), record(request_id="quiet")])
    opened = reviewer.post(
        f"/api/v1/decisions/{disputed}/disputes", {"kind": "other", "reason": "It was answerable."}, format="json"
    )
    assert opened.status_code == 201, opened.content
    base = "/api/v1/routes/it-support/decisions"
    assert _ids(integrator.get(f"{base}?disputed=true")) == ["disputed"]
    assert sorted(_ids(integrator.get(f"{base}?disputed=false"))) == ["disputed", "quiet"]
    assert _ids(integrator.get(f"{base}?no_supporting_passage=true")) == []  # nothing verified yet
    response = integrator.get(f"{base}?disputed=perhaps")
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["field"] == "disputed"
