"""A worker that consumes the similarity queue imports the embedder's libraries before its pool
forks; the other workers never load them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from console.similarity import tasks


def _worker(*queues: str):
    return SimpleNamespace(app=SimpleNamespace(amqp=SimpleNamespace(queues=SimpleNamespace(consume_from=queues))))


@pytest.mark.parametrize(
    ("queues", "preloaded"),
    [(("similarity", "shadow", "monitoring"), True), (("verification", "pool"), False), (("trials", "refits"), False)],
)
def test_only_the_worker_that_embeds_preloads_the_embedder(monkeypatch, queues, preloaded):
    calls = []
    monkeypatch.setattr(tasks.embedder, "preload", lambda: calls.append(True))
    tasks._embedder_before_fork(sender=_worker(*queues))
    assert bool(calls) is preloaded


def test_preloading_imports_what_loading_a_model_needs():
    import sys

    tasks.embedder.preload()
    assert {"joblib", "sklearn.pipeline", "sklearn.decomposition", "sklearn.feature_extraction.text"} <= set(
        sys.modules
    )
