"""Question vectors live in one partition per space, and a retired embedder version's go whole."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from console.ledger.models import Decision
from console.similarity.models import EmbedderState, EmbedderVersion, QuestionVector
from console.similarity.services import builtin, partitions, vectors
from tests import factories
from tests.similarity.test_embedder import TOPICS, _ingest, _questions

pytestmark = pytest.mark.django_db


def _leaves(table: str) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relid::text, pg_total_relation_size(relid) FROM pg_partition_tree(%s) WHERE isleaf", [table]
        )
        return dict(cursor.fetchall())


# Partitions a test that committed left behind (a flush empties tables, it drops none). In one
# process those tests run after all others; under pytest-xdist one may run earlier in the same
# database, so each test here looks only at the partitions made in its own transaction.
_BEFORE: set[str] = set()


@pytest.fixture(autouse=True)
def _committed_before() -> None:
    _BEFORE.clear()
    _BEFORE.update(_leaves("similarity_questionvector"))


def _partitions() -> dict[str, int]:
    """Each partition of the vector table the test made, and its bytes on disk (heap, indexes, TOAST)."""
    return {name: size for name, size in _leaves("similarity_questionvector").items() if name not in _BEFORE}


def test_a_refit_drops_the_old_versions_partition_and_lookups_still_answer(reviewer):
    ids = _ingest(_questions(4))
    route_id = Decision.objects.get(pk=ids[0]).route_id
    v1 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route_id)
    assert list(_partitions()) == [f"similarity_questionvector_v{v1.pk}"]
    v2 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route_id)
    v1.refresh_from_db()
    assert v1.state == EmbedderState.RETIRED
    # Nothing of version 1 is left on disk: the table is version 2's partition alone.
    assert list(_partitions()) == [f"similarity_questionvector_v{v2.pk}"]
    assert QuestionVector.objects.filter(space=v2.space_key).count() == len(ids)
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [v1.index_name])
        assert cursor.fetchone()[0] is None
    for position in range(len(TOPICS)):
        body = reviewer.get(f"/api/v1/decisions/{ids[position]}/similar?k=3").json()
        assert body["vectors"]["embedder_version"] == 2
        assert [r["question"][: len(TOPICS[position])] for r in body["results"]] == [TOPICS[position]] * 3


def test_sent_vectors_live_in_their_routes_partition(integrator):
    vectors = np.random.default_rng(3).normal(size=(5, 8)).astype(np.float32)
    records = [factories.record(question=f"q{i}", question_embedding=v.tolist()) for i, v in enumerate(vectors)]
    assert integrator.post("/api/v1/decisions", {"decisions": records}, format="json").status_code == 201
    route_id = factories.make_route().pk
    assert list(_partitions()) == [f"similarity_questionvector_r{route_id}"]
    assert set(QuestionVector.objects.values_list("space", flat=True)) == {f"r{route_id}"}


def test_a_decision_has_one_vector_per_space_and_its_space_follows_route_and_embedder(integrator, other_route):
    record = factories.record(question_embedding=[0.1, 0.2, 0.3])
    assert integrator.post("/api/v1/decisions", {"decisions": [record]}, format="json").status_code == 201
    row = QuestionVector.objects.get()
    (other,) = factories.ingest([factories.record()])
    fields = dict(route_id=row.route_id, refused=True, occurred_at=row.occurred_at, vector=[1, 2, 3], space=row.space)
    with pytest.raises(IntegrityError, match="duplicate key"), transaction.atomic():
        QuestionVector.objects.create(decision_id=row.decision_id, **fields)  # a second sent vector of the decision
    with pytest.raises(IntegrityError, match="vector_space_key"), transaction.atomic():
        QuestionVector.objects.create(decision_id=other, **{**fields, "route_id": other_route.pk})
    assert QuestionVector.objects.create(decision_id=other, **fields).space == row.space


def test_a_live_versions_partition_cannot_be_dropped(route):
    _ingest(_questions(2))
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    with pytest.raises(DatabaseError, match="not the space of a retired"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT similarity_space_drop(%s)", [version.space_key])
    assert QuestionVector.objects.filter(space=version.space_key).count() == 12


def test_vectors_of_a_version_retired_meanwhile_are_not_stored(route):
    """An after-ingest job that read the versions before a refit finished must not fail on the
    retired version's dropped partition (nor bring its vectors back)."""
    _ingest(_questions(2))
    v1 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    model = builtin._model_load(v1)
    builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    v1.refresh_from_db()
    later = _ingest(["Laptop battery drains overnight"])
    rows = list(Decision.objects.filter(pk__in=later).values_list("pk", "question", "outcome", "occurred_at"))
    with transaction.atomic():
        assert builtin._embed_and_store(v1, model, rows) == 0
    assert not QuestionVector.objects.filter(embedder=v1).exists()
    assert builtin._model_load(v1) is None
    assert builtin.vectors_embed(decision_ids=later) == 1  # the current version's vector alone


def test_the_sweeper_drops_what_a_retired_version_left_behind(route):
    _ingest(_questions(2))
    v1 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    # A promotion cut short after its commit: retired, its partitions still there.
    EmbedderVersion.objects.filter(pk=v1.pk).update(state=EmbedderState.RETIRED)
    assert partitions.spaces_retired_drop() == 1
    assert _partitions() == {}
    assert partitions.spaces_retired_drop() == 0


def test_a_drop_that_would_wait_for_the_vector_table_is_left_to_the_sweeper(route, settings):
    from django.db import connections

    settings.SIMILARITY_PARTITION_DROP_LOCK_TIMEOUT = "100ms"
    _ingest(_questions(2))
    v1 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    reader = connections.create_connection("default")  # a long reader of the vector table
    try:
        reader.set_autocommit(False)
        with reader.cursor() as cursor:
            cursor.execute("LOCK TABLE similarity_questionvector IN ACCESS SHARE MODE")
        v2 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
        v1.refresh_from_db()
        assert v1.state == EmbedderState.RETIRED  # promoted all the same
        assert f"similarity_questionvector_v{v1.pk}" in _partitions()
        assert partitions.spaces_retired_drop() == 0  # still in use
    finally:
        reader.rollback()
        reader.close()
    assert partitions.spaces_retired_drop() == 1
    assert list(_partitions()) == [f"similarity_questionvector_v{v2.pk}"]


def _stored(space: str) -> list[tuple[str, int, list[float]]]:
    """(type, bytes, numbers) of each stored vector of a space."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_typeof(vector)::text, pg_column_size(vector), vector::text FROM similarity_questionvector "
            "WHERE space = %s ORDER BY decision_id",
            [space],
        )
        return [(kind, size, [float(x) for x in text.strip("[]").split(",")]) for kind, size, text in cursor]


def test_sent_vectors_are_kept_at_unit_length_in_half_precision_whatever_their_scale(integrator, reviewer):
    # Numbers far beyond half precision's range (65,504) and far below its smallest: each vector is
    # scaled to length 1 first, which changes no cosine.
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(50, 12)) * np.repeat([1e200, 1e-200, 1e-30, 1.0, 7e4], 10)[:, None]
    records = [factories.record(question=f"q{i}", question_embedding=v.tolist()) for i, v in enumerate(vectors)]
    assert integrator.post("/api/v1/decisions", {"decisions": records}, format="json").status_code == 201
    ids = list(Decision.objects.order_by("pk").values_list("pk", flat=True))
    route_id = factories.make_route().pk
    stored = _stored(f"r{route_id}")
    assert {kind for kind, _, _ in stored} == {"halfvec"}
    assert max(size for _, size, _ in stored) <= 8 + 2 * 12  # a header and two bytes a number
    scaled = vectors / np.abs(vectors).max(axis=1, keepdims=True)
    unit = scaled / np.linalg.norm(scaled, axis=1, keepdims=True)
    assert np.array([numbers for *_, numbers in stored]) == pytest.approx(unit, abs=1e-3)
    results = reviewer.get(f"/api/v1/decisions/{ids[0]}/similar?k=5").json()["results"]
    expected = np.argsort(-(unit[1:] @ unit[0]))[:5] + 1
    assert [r["id"] for r in results] == [ids[i] for i in expected]


@pytest.mark.parametrize(
    ("vector", "expected"),
    [([3e5, 4e5, 0], [0.6, 0.8, 0]), ([1e300, 1e300], [0.5**0.5] * 2), ([1e-320, 0], [1, 0]), ([0, 0], [0, 0])],
)
def test_unit_scales_any_finite_vector_to_length_one_and_leaves_zero_alone(vector, expected):
    assert vectors.unit(vector) == pytest.approx(expected, abs=1e-12)


def test_a_built_in_vector_takes_two_bytes_a_dimension(route):
    _ingest(_questions(2))
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    stored = _stored(version.space_key)
    assert {(kind, size) for kind, size, _ in stored} == {("halfvec", 8 + 2 * version.dimension)}
    for *_, numbers in stored:
        assert np.linalg.norm(numbers) == pytest.approx(1, abs=2e-3)


@pytest.mark.slow  # migrates the test database back and forth: seconds, for the full suite (tests/conftest.py)
@pytest.mark.django_db(transaction=True)
def test_the_half_precision_migration_rescales_old_vectors_and_rebuilds_their_index(integrator):
    from django.core.management import call_command

    records = [factories.record(question=f"q{i}", question_embedding=[3e5 * (i + 1), 4e5, 0.0]) for i in range(3)]
    assert integrator.post("/api/v1/decisions", {"decisions": records}, format="json").status_code == 201
    route_id = factories.make_route().pk
    partitions.space_index_create(route_id=route_id)
    try:
        call_command("migrate", "similarity", "0008", verbosity=0)
        with connection.cursor() as cursor:  # as a database before this stage held them: float32, any length
            cursor.execute("UPDATE similarity_questionvector SET vector = '[300000,400000,0]'")
    finally:
        call_command(
            "migrate", verbosity=0
        )  # every app forward again: taking similarity back took later ledger migrations too
    for *_, numbers in _stored(f"r{route_id}"):
        assert numbers == pytest.approx([0.6, 0.8, 0.0], abs=1e-3)
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [f"similarity_sent_r{route_id}_hnsw"])
        assert "halfvec_cosine_ops" in cursor.fetchone()[0]
