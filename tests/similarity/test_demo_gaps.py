"""The demo workspace: HR policy sends vectors, IT support uses the built-in embedder, and the
two planted topics the corpus lacks are the top corpus gaps of each route."""

from django.core.management import call_command

from console.review.demo import _GAPS
from console.similarity.models import GapRun, RouteEmbedding


def test_the_demo_plants_two_gaps_per_route_at_the_top(db, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    call_command("load_demo", "--decisions", "300")
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
