"""A built-in version's HNSW graph holds the leading components of its vectors, and lookups re-rank
the graph's candidates by the whole vector (similarity migration 0014)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from django.db import DatabaseError, connection, transaction

from console.similarity import selectors
from console.similarity.models import EmbedderVersion, RouteEmbedding
from console.similarity.services import builtin, partitions
from tests import factories
from tests.similarity.test_embedder import TOPICS, _ingest, _questions
from tests.similarity.test_similar_api import _ingest_vectors

pytestmark = pytest.mark.django_db


def _indexdef(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        return cursor.fetchone()[0]


def _plan(space, query: str, exclude: int, k: int = 10) -> str:
    sql, params, _ = selectors._nearest_sql(space, "refused", literal=query, exclude=exclude, k=k)
    with transaction.atomic(), connection.cursor() as cursor:
        # A few dozen rows are cheapest to sort whole; at scale the planner walks the graph itself.
        # Sorting is priced out here instead (the re-rank's own sort of the candidates stays).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _stored_vector(decision_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT vector::text FROM similarity_questionvector WHERE decision_id = %s", [decision_id])
        return cursor.fetchone()[0]


def _fitted(settings, graph_dimension: int) -> tuple[list[int], EmbedderVersion]:
    settings.SIMILARITY_BUILTIN_GRAPH_DIMENSION = graph_dimension
    ids = _ingest(_questions(5))
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=factories.make_route().pk)
    version.refresh_from_db()
    return ids, version


def test_a_new_versions_graph_holds_the_leading_components_and_lookups_walk_it(reviewer, settings):
    ids, version = _fitted(settings, 128)
    assert (version.dimension, version.graph_dimension) == (256, 128)
    assert "hnsw (((subvector(vector, 1, 128))::halfvec(128)) halfvec_cosine_ops)" in _indexdef(version.index_name)
    space = selectors.active_space(version.route)
    assert space.graph_dimension == 128
    assert version.index_name in _plan(space, _stored_vector(ids[0]), ids[0])
    # Near-duplicates are still each other's neighbours, through the API as before.
    for position in range(len(TOPICS)):
        results = reviewer.get(f"/api/v1/decisions/{ids[position]}/similar?k=4").json()
        questions = [r["question"] for r in results["results"]]
        assert len(questions) == 4 and all(q.startswith(TOPICS[position]) for q in questions), questions


def test_with_no_graph_dimension_set_a_version_graphs_the_whole_vector(route, settings):
    _, version = _fitted(settings, 0)
    assert version.graph_dimension == 256
    assert "hnsw (((vector)::halfvec(256)) halfvec_cosine_ops)" in _indexdef(version.index_name)


def test_a_version_built_before_keeps_its_whole_vector_graph_and_lookups_use_it(route, settings):
    ids, version = _fitted(settings, 128)
    # As migration 0014 found it: a graph of the whole vector, and no graph dimension recorded.
    with connection.cursor() as cursor:
        cursor.execute("SELECT similarity_index_drop(%s)", [version.index_name])
    partitions.index_create(name=version.index_name, dimension=256, space=version.space_key)
    EmbedderVersion.objects.filter(pk=version.pk).update(graph_dimension=None)
    space = selectors.active_space(version.route)
    assert space.graph_dimension is None
    assert "(vector)::halfvec(256)" in _indexdef(version.index_name)
    own = _stored_vector(ids[0])
    plan = _plan(space, own, ids[0])
    assert version.index_name in plan and "subvector" not in plan, plan
    assert len(selectors.nearest(space, own, exclude=ids[0], k=4)) == 4


def test_the_graphs_candidates_are_re_ranked_by_the_whole_vector(integrator):
    # `close` agrees with the query on the first half only, `near` on the whole vector, less closely
    # on the first half: by the leading four components `close` comes first, by the whole vector
    # `near`, and the lookup must answer by the whole vector.
    query = np.array([1, 0, 0, 0, 1, 0, 0, 0], dtype=np.float32)
    close = np.array([1, 0, 0, 0, -1, 0, 0, 0], dtype=np.float32)
    near = np.array([0.9, 0.3, 0, 0, 0.9, 0.3, 0, 0], dtype=np.float32)
    filler = np.random.default_rng(3).normal(size=(30, 8)).astype(np.float32) * [0, 0, 1, 1, 0, 0, 1, 1]
    ids = _ingest_vectors(integrator, np.vstack([query, close, near, filler]))
    space = selectors.active_space(RouteEmbedding.objects.get().route)
    graphed = dataclasses.replace(space, graph_dimension=4)
    found = selectors.nearest(graphed, query, exclude=ids[0], k=2)
    assert [pk for pk, _ in found] == [ids[2], ids[1]]
    assert found[0][1] == pytest.approx(0.949, abs=0.01) and found[1][1] == pytest.approx(0.0, abs=0.01)
    # The whole vector's own walk agrees.
    assert [pk for pk, _ in selectors.nearest(space, query, exclude=ids[0], k=2)] == [ids[2], ids[1]]


@pytest.mark.parametrize("graph_dimension", [0, 257, -1])
def test_the_index_function_refuses_a_graph_longer_than_the_vector_or_empty(graph_dimension):
    with pytest.raises(DatabaseError, match="bad arguments"), connection.cursor() as cursor:
        cursor.execute(
            "SELECT similarity_index_create(%s, %s, %s, %s, %s, %s)",
            ["similarity_builtin_v1_hnsw", "v1", 256, 24, 128, graph_dimension],
        )


def test_the_graph_is_asked_for_enough_candidates_and_never_more_than_it_may_return(settings):
    settings.SIMILARITY_GRAPH_CANDIDATES = 100
    space = selectors.Space(1, "builtin", 256, 1, 1, "similarity_builtin_v1_hnsw", 128)
    asked = {
        k: selectors._nearest_sql(space, "refused", literal="[1]", exclude=0, k=k)[2] for k in (10, 200, 600, 1200)
    }
    # Twice k or the setting, within hnsw.ef_search's 1,000, and never fewer than k itself.
    assert asked == {10: 100, 200: 400, 600: 1000, 1200: 1200}


def _options(index_name: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [index_name])
        return set(cursor.fetchone()[0])


def test_a_versions_graph_has_the_built_in_links_and_inserts_search_twice_as_many(route, settings):
    settings.SIMILARITY_BUILTIN_HNSW_M = 12
    settings.SIMILARITY_HNSW_M, settings.SIMILARITY_HNSW_EF_INSERT = 20, 44
    _, version = _fitted(settings, 128)
    # Built with the long list; later refusals' inserts search 2 x m, the least pgvector allows.
    assert _options(version.index_name) >= {"m=12", "ef_construction=24"}
    # A refit's graph too, when the setting has changed since.
    settings.SIMILARITY_BUILTIN_HNSW_M = 8
    refit = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=version.route_id)
    assert _options(refit.index_name) >= {"m=8", "ef_construction=16"}


def test_a_sent_graph_keeps_the_general_links_and_insert_list(integrator, settings):
    settings.SIMILARITY_BUILTIN_HNSW_M = 12
    settings.SIMILARITY_HNSW_M, settings.SIMILARITY_HNSW_EF_INSERT = 20, 44
    _ingest_vectors(integrator, np.random.default_rng(8).normal(size=(30, 8)).astype(np.float32))
    space = RouteEmbedding.objects.get()
    assert partitions.space_index_create(route_id=space.route_id)
    assert _options(space.index_name) >= {"m=20", "ef_construction=44"}
