"""Corpus gaps: planted groups of refused questions come back as the top clusters."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone
from sklearn.metrics import adjusted_rand_score

from console.ledger.models import Decision
from console.similarity import topics
from console.similarity.models import GapRun
from console.similarity.services import gaps
from console.verification.models import DecisionSupport, SupportStatus
from tests import factories
from tests.conftest import _client

pytestmark = pytest.mark.django_db

DIM = 32
# (size, share with no supporting passage, words): the first two are topics the corpus lacks.
PLANT = [
    (40, 1.0, "parental leave abroad"),
    (30, 1.0, "pension transfer rules"),
    (50, 0.0, "vpn password reset"),
    (25, 0.2, "printer paper jam"),
]


def _plant(rng, now):
    centres = rng.normal(size=(len(PLANT), DIM))
    records, truth, no_support = [], [], []
    for group, (size, share, words) in enumerate(PLANT):
        for i in range(size):
            vector = centres[group] + rng.normal(scale=0.15, size=DIM)
            when = now - timedelta(days=int(i % 14), hours=1)
            records.append(
                factories.record(
                    question=f"{words} question {i}", question_embedding=vector.tolist(), occurred_at=when.isoformat()
                )
            )
            truth.append(group)
            no_support.append(i < round(size * share))
    for i in range(60):  # one-off refusals, each on its own
        records.append(
            factories.record(
                question=f"one-off topic number {i}",
                question_embedding=rng.normal(size=DIM).tolist(),
                occurred_at=(now - timedelta(days=3)).isoformat(),
            )
        )
        truth.append(-1)
        no_support.append(False)
    ids = factories.ingest(records)
    moments = dict(Decision.objects.filter(pk__in=ids).values_list("pk", "occurred_at"))
    DecisionSupport.objects.bulk_create(
        [
            DecisionSupport(
                decision_id=pk,
                decision_occurred_at=moments[pk],
                status=SupportStatus.DONE,
                units=1,
                units_supported=0 if bare else 1,
                expected_support=0.0 if bare else 1.0,
                fully_supported=not bare,
                no_supporting_passage=bare,
            )
            for pk, bare in zip(ids, no_support, strict=True)
        ]
    )
    return ids, np.array(truth)


def test_planted_groups_are_recovered_and_the_uncovered_topics_rank_first(route, reviewer):
    now = timezone.now()
    ids, truth = _plant(np.random.default_rng(0), now)
    run = gaps.gaps_compute(actor=factories.TEST_ACTOR, route_id=route.pk, now=now)
    clusters = list(run.clusters.order_by("rank"))
    label_of = {pk: c.rank for c in clusters for pk in c.decision_ids}
    found = np.array([label_of.get(pk, -1) for pk in ids])
    planted = truth >= 0
    assert adjusted_rand_score(truth[planted], found[planted]) >= 0.9
    assert (found[~planted] == -1).mean() >= 0.9  # one-offs stay out of the groups
    assert [(c.size, c.no_support_share) for c in clusters[:2]] == [(40, 1.0), (30, 1.0)]
    assert {"parental", "leave"} <= set(" ".join(clusters[0].terms).split())
    assert clusters[0].size_this_week + clusters[0].size_last_week == 40

    body = reviewer.get("/api/v1/routes/it-support/gaps").json()
    assert body["computed_at"] == run.computed_at.isoformat()
    top = body["clusters"][0]
    assert (top["size"], top["no_support_share"]) == (40, 1.0)
    assert all(e["question"].startswith("parental leave abroad") for e in top["examples"])


def test_gaps_clustering_scales_past_the_sample(route):
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(3, 16))
    vectors = np.vstack([centres[g] + rng.normal(scale=0.1, size=(400, 16)) for g in range(3)])
    truth = np.repeat(np.arange(3), 400)
    found = topics.cluster(vectors, sample_max=300, seed=1)
    assert found.sampled == 300
    assert adjusted_rand_score(truth, found.labels) >= 0.9


def test_clustering_accepts_rows_whose_general_product_is_not_symmetric():
    # Found on an AMD EPYC: OpenBLAS's general product of these rows with a copy of themselves
    # differs from its transpose by 4e-7, and HDBSCAN refused the matrix ("appear to be asymmetric").
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(205, 32)).astype(np.float32)
    found = topics.cluster(vectors, min_cluster_size=5, seed=0)
    assert found.sampled == 205 and len(found.labels) == 205


def test_cosine_distances_are_exactly_symmetric_and_match_scikit_learn():
    from sklearn.metrics.pairwise import cosine_distances as reference

    rng = np.random.default_rng(1)
    unit = topics.normalise(rng.normal(size=(300, 64)))
    rows = unit[rng.permutation(300)[:257]]  # taken by index, as the clustering samples them
    distances = topics.cosine_distances(rows)
    assert distances.dtype == np.float64 and np.array_equal(distances, distances.T)
    assert np.all(np.diag(distances) == 0.0)
    np.testing.assert_allclose(distances, reference(rows.astype(np.float64)), atol=1e-6)


def test_gaps_pages_csv_and_permissions(route, other_route, client):
    _plant(np.random.default_rng(1), timezone.now())
    run = gaps.gaps_compute(actor=factories.TEST_ACTOR, route_id=route.pk)
    owner = factories.make_user("gap-owner", "policy_owner", route, password="pw-12345678")
    client.force_login(owner)
    page = client.get("/gaps/")
    assert page.status_code == 200 and b"parental leave" in page.content
    cluster = run.clusters.get(rank=1)
    detail = client.get(f"/gaps/clusters/{cluster.pk}/")
    assert detail.status_code == 200 and detail.content.count(b"parental leave abroad question") == 40
    rows = list(csv.reader(io.StringIO(client.get("/gaps.csv?route=it-support").content.decode())))
    assert rows[0][:3] == ["rank", "cluster_id", "size"] and rows[1][2] == "40"
    # another route's owner sees neither the route's gaps nor its clusters
    client.force_login(factories.make_user("hr-lead", "policy_owner", other_route))
    assert client.get("/gaps/?route=it-support").status_code == 404
    assert client.get(f"/gaps/clusters/{cluster.pk}/").status_code == 404
    assert _client(factories.make_user("hr-lead")).get("/api/v1/routes/it-support/gaps").status_code == 404
    client.force_login(factories.make_user("g1", "grader"))
    assert client.get("/gaps/").status_code == 403
    assert _client(factories.make_user("g1")).get("/api/v1/routes/it-support/gaps").status_code == 403


def test_recompute_queues_a_run(route, client, django_capture_on_commit_callbacks):
    _plant(np.random.default_rng(2), timezone.now())
    client.force_login(factories.make_user("rev", "reviewer"))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/gaps/recompute", {"route": "it-support"})
    assert response.status_code == 302
    assert GapRun.objects.filter(route=route).count() == 1


def test_graders_queue_shows_nothing_of_similarity(route, integrator):
    """Blindness: the grading pages never carry similar refusals or gaps."""
    from tests.similarity.test_similar_api import _ingest_vectors, _vectors

    _ingest_vectors(integrator, _vectors(5, 4))
    grader = factories.make_user("blind", "grader", password="pw-12345678")
    from django.test import Client

    browser = Client()
    browser.force_login(grader)
    queue = browser.get("/grading/", follow=True)
    assert queue.status_code == 200
    assert b"Similar refusals" not in queue.content and b"Corpus gaps" not in queue.content
    assert browser.get("/gaps/").status_code == 403
