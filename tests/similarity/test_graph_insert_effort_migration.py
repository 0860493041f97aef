"""Similarity 0013 gives every similarity HNSW index the insert's shorter candidate list; going
back puts the build's list back and drops the function that sets it."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from console.core.db_roles import as_owner
from console.similarity.models import RouteEmbedding
from console.similarity.services import partitions
from tests import factories


def _options(name: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [name])
        return set(cursor.fetchone()[0])


def _function_exists() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regprocedure('similarity_index_insert_effort(text, integer)') IS NOT NULL")
        return cursor.fetchone()[0]


@pytest.mark.slow  # migrates the test database back and forth: seconds, for the full suite (tests/conftest.py)
@pytest.mark.django_db(transaction=True)
def test_going_back_gives_the_build_list_back_and_forward_the_insert_list_again(integrator):
    records = [factories.record(question=f"question {i}", question_embedding=[1.0, float(i), 0.5]) for i in range(5)]
    response = integrator.post("/api/v1/decisions", {"decisions": records}, format="json")
    assert response.status_code == 201, response.json()
    space = RouteEmbedding.objects.get()
    assert partitions.space_index_create(route_id=space.route_id)
    assert _options(space.index_name) >= {"m=24", "ef_construction=48"}
    try:
        with as_owner():  # migrations run as the tables' owner
            MigrationExecutor(connection).migrate([("similarity", "0012_embedder_versions_frontier")])
            assert _options(space.index_name) >= {"m=24", "ef_construction=128"}
            assert not _function_exists()
            MigrationExecutor(connection).migrate([("similarity", "0013_graph_inserts_with_a_shorter_candidate_list")])
            assert _options(space.index_name) >= {"m=24", "ef_construction=48"}
            assert _function_exists()
    finally:
        call_command("migrate", verbosity=0)  # every app forward again
