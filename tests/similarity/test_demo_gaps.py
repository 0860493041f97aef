"""The demo workspace: HR policy sends vectors, IT support uses the built-in embedder, and the
two planted topics the corpus lacks are the top corpus gaps of each route."""

import pytest
from django.core.management import call_command

from console.review.demo import _GAPS
from console.similarity.models import GapRun, RouteEmbedding
from tests.worlds import build_world


@pytest.fixture(scope="module")
def demo_world(django_db_setup, django_db_blocker, tmp_path_factory):
    """The demo workspace (300 decisions a route), loaded once for the module's tests (tests/worlds.py)."""
    yield from build_world(django_db_blocker, tmp_path_factory, lambda: call_command("load_demo", "--decisions", "300"))


@pytest.fixture
def demo(demo_world, db, request, settings):
    demo_world.enter(request)
    settings.DATA_DIR = demo_world.data_dir


def test_the_demo_plants_two_gaps_per_route_at_the_top(demo):
    sources = dict(RouteEmbedding.objects.values_list("route__slug", "source"))
    assert sources == {"hr-policy": "sent", "it-support": "builtin"}
    for slug, topics in _GAPS.items():
        run = GapRun.objects.filter(route__slug=slug).latest()
        top = list(run.clusters.order_by("rank")[:2])
        found = set()
        for cluster in top:
            questions = [e["question"] for e in cluster.examples]
            matches = {t for t in topics if all(t in q for q in questions)}
            assert len(matches) == 1, (slug, questions)
            found |= matches
            assert cluster.no_support_share == 1.0
        assert found == set(topics)


def test_gap_clusters_carry_the_share_graded_correct_when_answered(demo, client):
    """HR policy's demo decisions come with an imported graded set; the planted gaps have none."""
    from console.similarity.selectors import gap_clusters
    from grading.models import FinalLabel
    from tests import factories

    run = GapRun.objects.filter(route__slug="hr-policy").latest()
    clusters = gap_clusters(run)
    top, graded = clusters[0], [c for c in clusters if c.graded]
    assert top.graded == 0 and top.correct_share is None
    assert graded
    cluster = graded[0]
    members = cluster.__class__.objects.get(pk=cluster.pk).decision_ids
    labels = FinalLabel.objects.filter(decision_id__in=members)
    assert cluster.graded == labels.count()
    assert cluster.correct_share == labels.filter(correct=True).count() / labels.count()
    client.force_login(factories.make_user("gap-reviewer", "reviewer"))
    body = client.get("/api/v1/routes/hr-policy/gaps").json()
    by_id = {c["id"]: c for c in body["clusters"]}
    assert by_id[cluster.pk]["graded"] == cluster.graded
