"""A worker process keeps the last embedder model it loaded: the next job of the same version takes it
without reading or unpacking the stored model again, and never once that version has retired."""

from __future__ import annotations

import pytest

from console.similarity.models import EmbedderModel, QuestionVector
from console.similarity.services import builtin
from tests import factories
from tests.similarity.test_embedder import _ingest, _questions


@pytest.fixture
def unpacked(monkeypatch) -> list[int]:
    """The process starts with no model kept; each entry is one stored model unpacked."""
    monkeypatch.setattr(builtin, "_kept_model", None, raising=False)
    seen: list[int] = []
    real = builtin.embedder.loads
    monkeypatch.setattr(builtin.embedder, "loads", lambda data: seen.append(len(data)) or real(data))
    return seen


def test_jobs_of_one_version_unpack_its_model_once_and_embed_as_a_fresh_load_would(route, unpacked):
    _ingest(_questions(3))
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    version.refresh_from_db()
    unpacked.clear()

    first = _ingest(["Laptop battery drains overnight"])
    assert builtin.vectors_embed(decision_ids=first) == 1
    second = _ingest(["Docking station is not found"])
    assert builtin.vectors_embed(decision_ids=second) == 1

    assert len(unpacked) == 1
    kept = builtin._model_load(version)
    assert kept is builtin._model_load(version)
    stored = builtin.embedder.loads(EmbedderModel.objects.get(version=version).data)
    fresh = builtin.embedder.transform(stored, ["Docking station is not found"], dimension=version.dimension)
    vector = list(QuestionVector.objects.get(decision_id=second[0]).vector)
    assert vector == pytest.approx(list(fresh[0]), abs=1e-3)  # half precision as stored


def test_a_kept_model_is_not_used_once_its_version_has_retired(route, unpacked):
    _ingest(_questions(3))
    v1 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    v1.refresh_from_db()
    assert builtin._model_load(v1) is not None
    builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)  # v2 current, v1's model gone

    assert builtin._model_load(v1) is None


def test_another_version_is_loaded_from_its_own_stored_model(route, unpacked):
    _ingest(_questions(3))
    v1 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    v1.refresh_from_db()
    builtin._model_load(v1)
    v2 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk, seed=1)
    v2.refresh_from_db()
    unpacked.clear()

    model = builtin._model_load(v2)

    assert len(unpacked) == 1
    assert builtin._kept_model == ((v2.pk, v2.fitted_at), model)
