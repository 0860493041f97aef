"""Question vectors sent with decisions, and the similar-refusals API, tested over HTTP."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from console.similarity import selectors
from console.similarity.models import QuestionVector, RouteEmbedding
from console.similarity.services import partitions
from tests import factories

pytestmark = pytest.mark.django_db


def _post(client, records):
    return client.post("/api/v1/decisions", {"decisions": records}, format="json")


def _vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def _ingest_vectors(client, vectors, route="it-support", **overrides) -> list[int]:
    records = [
        factories.record(route=route, question=f"question {i}", question_embedding=v.tolist(), **overrides)
        for i, v in enumerate(vectors)
    ]
    response = _post(client, records)
    assert response.status_code == 201, response.json()
    return list(
        QuestionVector.objects.filter(route__slug=route).order_by("decision_id").values_list("decision_id", flat=True)
    )


def test_the_first_vector_fixes_the_route_dimension_and_another_is_400_naming_the_item(integrator):
    assert _post(integrator, [factories.record(question_embedding=[0.1, 0.2, 0.3])]).status_code == 201
    assert RouteEmbedding.objects.get(route__slug="it-support").dimension == 3
    response = _post(
        integrator,
        [factories.record(question_embedding=[0.1, 0.2, 0.3]), factories.record(question_embedding=[0.1, 0.2])],
    )
    assert response.status_code == 400
    body = response.json()["error"]
    assert body["code"] == "embedding_dimension"
    assert body["details"] == [
        {
            "field": "question_embedding",
            "index": 1,
            "code": "embedding_dimension",
            "message": "has 2 numbers; route 'it-support' takes 3",
            "value": 2,
        }
    ]
    assert QuestionVector.objects.count() == 1  # the batch was rolled back whole


def test_a_first_batch_of_mixed_dimensions_names_the_odd_item(integrator):
    response = _post(
        integrator, [factories.record(question_embedding=[1.0] * 4), factories.record(question_embedding=[1.0] * 5)]
    )
    assert response.status_code == 400
    assert [d["index"] for d in response.json()["error"]["details"]] == [1]
    assert not RouteEmbedding.objects.exists()


@pytest.mark.parametrize("bad", [[], "0.1,0.2", [0.1, "x"], [0.1, True], [1e400], [0.0] * 4097, {"a": 1}])
def test_a_malformed_question_embedding_is_400(integrator, bad):
    record = factories.record()
    record["question_embedding"] = bad if bad != [1e400] else [float("inf")]
    response = (
        integrator.post("/api/v1/decisions", {"decisions": [record]}, format="json")
        if bad != [1e400]
        else _post_raw(integrator, record)
    )
    assert response.status_code == 400
    if bad == [1e400]:  # the parser refuses a number no double holds, before any field is read
        assert "too large for a double" in response.json()["error"]["message"]
    else:
        assert response.json()["error"]["details"][0]["field"] == "question_embedding"


def _post_raw(client, record):
    import json

    body = json.dumps({"decisions": [record]}).replace("Infinity", "1e400")
    return client.post("/api/v1/decisions", body, content_type="application/json")


def test_a_replay_with_another_embedding_is_a_conflict(integrator):
    record = factories.record(question_embedding=[0.1, 0.2])
    assert _post(integrator, [record]).status_code == 201
    assert _post(integrator, [record]).json() == {"created": 0, "unchanged": 1}
    record["question_embedding"] = [0.2, 0.1]
    assert _post(integrator, [record]).status_code == 409


def _as_stored(vectors: np.ndarray) -> np.ndarray:
    """The vectors as the table keeps them: scaled to length 1, then rounded to half precision."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit.astype(np.float16).astype(np.float64)


def test_nearest_refusals_equal_an_exact_numpy_search(integrator, reviewer):
    vectors = _vectors(300, 16)
    ids = _ingest_vectors(integrator, vectors)
    unit = _as_stored(vectors)
    for query in (0, 17, 123):
        response = reviewer.get(f"/api/v1/decisions/{ids[query]}/similar?k=10")
        assert response.status_code == 200
        results = response.json()["results"]
        similarity = unit @ unit[query] / np.linalg.norm(unit, axis=1) / np.linalg.norm(unit[query])
        similarity[query] = -np.inf
        expected = np.argsort(-similarity, kind="stable")[:10]
        assert [r["id"] for r in results] == [ids[i] for i in expected]
        assert [r["similarity"] for r in results] == pytest.approx(similarity[expected].tolist(), abs=1e-5)


def test_the_build_takes_the_long_candidate_list_and_later_inserts_the_short_one(integrator, settings):
    settings.SIMILARITY_HNSW_EF_CONSTRUCTION = 96
    settings.SIMILARITY_HNSW_EF_INSERT = 40
    vectors = _vectors(60, 16, seed=4)
    ids = _ingest_vectors(integrator, vectors)
    space = RouteEmbedding.objects.get()
    with CaptureQueriesContext(connection) as queries:
        assert partitions.space_index_create(route_id=space.route_id)
    calls = [q["sql"] for q in queries.captured_queries if "similarity_index_" in q["sql"]]
    # The graph is built with the build's list, and only then does the index take the insert's.
    assert [("_create(" in sql, "_insert_effort(" in sql) for sql in calls] == [(True, False), (False, True)]
    assert ", 96, 16)" in calls[0] and calls[1].endswith(", 40)")  # a sent graph holds all 16 dimensions
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [space.index_name])
        assert set(cursor.fetchone()[0]) >= {"m=24", "ef_construction=40"}
    # A vector inserted afterwards goes through the graph, and is found through it.
    more = _vectors(1, 16, seed=5)
    [new_id] = set(_ingest_vectors(integrator, more)) - set(ids)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # so few rows would be sorted, not walked
        cursor.execute("SET LOCAL enable_sort = off")
        found = selectors.nearest(selectors.active_space(space.route), more[0], exclude=ids[0], k=3)
    assert found[0][0] == new_id and found[0][1] > 0.999


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("name", "ef"),
    [
        ("ledger_decision_pkey", 48),  # not a similarity index: the app's role may not touch it
        ("similarity_sent_r1_hnsw; DROP TABLE ledger_decision", 48),
        ("similarity_builtin_v0_hnsw", 48),
        ("similarity_sent_r1_hnsw", 3),
        ("similarity_sent_r1_hnsw", 1001),
    ],
)
def test_the_insert_effort_function_sets_only_a_similarity_index_and_only_a_sane_list(name, ef):
    from django.db import DatabaseError

    with pytest.raises(DatabaseError, match="bad arguments"), connection.cursor() as cursor:
        cursor.execute("SELECT similarity_index_insert_effort(%s, %s)", [name, ef])


def test_the_hnsw_index_answers_and_agrees_with_exact_search(integrator):
    vectors = _vectors(400, 24, seed=1)
    ids = _ingest_vectors(integrator, vectors)
    route_id = RouteEmbedding.objects.get().route_id
    assert partitions.space_index_create(route_id=route_id)
    space = selectors.active_space(RouteEmbedding.objects.get().route)
    from console.similarity.selectors import _nearest_sql

    literal = "[" + ",".join(str(x) for x in vectors[0].tolist()) + "]"
    sql, params, _ = _nearest_sql(space, "refused", literal=literal, exclude=ids[0], k=10)
    with transaction.atomic(), connection.cursor() as cursor:
        # 400 rows are few enough that sorting them all is cheapest; at scale the planner picks
        # HNSW itself (bench/similarity.py prints the plan). Here sorting is priced out instead.
        cursor.execute("ANALYZE similarity_questionvector")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert space.index_name in plan, plan
    with connection.cursor() as cursor:
        # Built with the denser graph a million vectors need (m 24, a candidate list of 128: see
        # test_the_build_takes_the_long_candidate_list_and_later_inserts_the_short_one); later
        # inserts search the shorter list the index's options now hold.
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [space.index_name])
        assert set(cursor.fetchone()[0]) >= {"m=24", "ef_construction=48"}
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    exact = np.argsort(-(unit @ unit[0]))[1:11]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        found = selectors.nearest(space, vectors[0], exclude=ids[0], k=10)
    assert len({pk for pk, _ in found} & {ids[i] for i in exact}) >= 9


def test_another_routes_refusals_never_appear(integrator, reviewer, other_route):
    vectors = _vectors(50, 8, seed=2)
    ids = _ingest_vectors(integrator, vectors)
    other_ids = _ingest_vectors(integrator, vectors, route="hr-policy")  # the very same vectors
    results = reviewer.get(f"/api/v1/decisions/{ids[0]}/similar?k=50").json()["results"]
    assert len(results) == 49
    assert not {r["id"] for r in results} & set(other_ids)


def test_only_readers_of_the_route_see_similar_refusals(integrator, grader, outsider, other_route):
    ids = _ingest_vectors(integrator, _vectors(5, 4))
    assert grader.get(f"/api/v1/decisions/{ids[0]}/similar").status_code == 403
    assert outsider.get(f"/api/v1/decisions/{ids[0]}/similar").status_code == 403
    hr_owner = factories.make_user("hr-owner", "policy_owner", other_route)
    from tests.conftest import _client

    assert _client(hr_owner).get(f"/api/v1/decisions/{ids[0]}/similar").status_code == 404


def test_served_neighbours_are_found_only_when_asked(integrator, reviewer):
    vectors = _vectors(20, 6, seed=3)
    refused = _ingest_vectors(integrator, vectors[:10])
    records = [
        factories.served_record(question=f"s{i}", question_embedding=v.tolist()) for i, v in enumerate(vectors[10:])
    ]
    assert _post(integrator, records).status_code == 201
    default = reviewer.get(f"/api/v1/decisions/{refused[0]}/similar?k=50").json()["results"]
    assert {r["outcome"] for r in default} == {"refused"} and len(default) == 9
    served = reviewer.get(f"/api/v1/decisions/{refused[0]}/similar?k=50&outcome=served").json()["results"]
    assert {r["outcome"] for r in served} == {"served"} and len(served) == 10
    assert reviewer.get(f"/api/v1/decisions/{refused[0]}/similar?k=0").status_code == 400
    assert reviewer.get(f"/api/v1/decisions/{refused[0]}/similar?outcome=x").status_code == 400


def test_refused_in_similar_form_counts_close_refusals_of_the_last_30_days(integrator, reviewer, settings):
    settings.SIMILARITY_SAME_FORM_MIN = 0.9
    base = np.zeros(8, dtype=np.float32)
    base[0] = 1.0
    near = [base + np.eye(8, dtype=np.float32)[1] * 0.1 * i for i in range(1, 4)]  # cosine > 0.95
    far = [np.eye(8, dtype=np.float32)[2]]
    from django.utils import timezone

    recent = timezone.now().isoformat()
    old = (timezone.now() - __import__("datetime").timedelta(days=40)).isoformat()
    ids = _ingest_vectors(integrator, np.stack([base, *near, *far]), occurred_at=recent)
    _ingest_vectors(integrator, np.stack([base]), occurred_at=old)
    body = reviewer.get(f"/api/v1/decisions/{ids[0]}/similar").json()
    assert body["similar_form_30d"] == {"count": 3, "at_least": False, "threshold": 0.9}


def test_the_refusal_page_lists_similar_refusals_for_readers_only(integrator, client, other_route):
    vectors = _vectors(12, 6, seed=4)
    ids = _ingest_vectors(integrator, vectors)
    client.force_login(factories.make_user("page-reviewer", "reviewer"))
    page = client.get(f"/decisions/{ids[0]}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Similar refusals of this route" in html and "in similar form" in html
    assert html.count('href="/decisions/') >= 10  # ten neighbours linked
    client.force_login(factories.make_user("hr-reader", "reviewer", other_route))
    assert client.get(f"/decisions/{ids[0]}/").status_code == 404


def test_the_similar_section_costs_the_same_queries_for_few_or_many_neighbours(integrator, client):
    few = _ingest_vectors(integrator, _vectors(4, 6, seed=5))
    client.force_login(factories.make_user("counting-reviewer", "reviewer"))
    client.get(f"/decisions/{few[0]}/")  # the session's first request loads what later ones reuse
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as first:
        client.get(f"/decisions/{few[0]}/")
    _ingest_vectors(integrator, _vectors(30, 6, seed=6))
    with CaptureQueriesContext(connection) as second:
        client.get(f"/decisions/{few[0]}/")

    def ours(context) -> list[str]:
        # The audit history's reads depend on the route's events, which the second ingest added.
        return [q["sql"] for q in context.captured_queries if "audit_auditevent" not in q["sql"]]

    assert len(ours(first)) == len(ours(second)) > 0
