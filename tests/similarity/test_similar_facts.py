"""What each similar refusal shows beside its similarity: its dispute status (from disputes) and its
final label (from grading), in the API, on the refusal's page and on the dispute form; who sees
which; and a query count that does not grow with the neighbours."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.similarity.models import QuestionVector
from tests import factories
from tests.conftest import _client
from tests.worlds import RouteWorld, build_world, route_world_start

pytestmark = pytest.mark.django_db

# Twelve refusals around one direction: decision 0 is the one looked at, 1..11 its neighbours,
# nearest first (a growing second coordinate turns each a little further away).
BASE = np.eye(8, dtype=np.float32)[0]
VECTORS = [BASE + np.eye(8, dtype=np.float32)[1] * 0.05 * i for i in range(12)]
QUESTIONS = [f"How do I reach the VPN from site {chr(65 + i)}?" for i in range(12)]


def _post_refusals(integrator) -> list[int]:
    records = [
        factories.record(
            request_id=f"sim-{i}", question=q, question_embedding=v.tolist(), occurred_at=factories.recent()
        )
        for i, (q, v) in enumerate(zip(QUESTIONS, VECTORS, strict=True))
    ]
    assert integrator.post("/api/v1/decisions", {"decisions": records}, format="json").status_code == 201
    return list(QuestionVector.objects.order_by("decision_id").values_list("decision_id", flat=True))


@pytest.fixture
def refusals(integrator) -> list[int]:
    return _post_refusals(integrator)


@dataclass(frozen=True, kw_only=True)
class DisputedRefusals(RouteWorld):
    refusals: tuple[int, ...]


def _disputed_build() -> DisputedRefusals:
    """Neighbour 1 disputed and still open; neighbour 2 disputed twice, both overturned; neighbour 3
    graded correct and neighbour 4 incorrect (imported labels)."""
    _route, integrator, made = route_world_start()
    reviewer_user = factories.make_user("reviewer", "reviewer")
    reviewer = _client(reviewer_user)
    refusals = _post_refusals(integrator)
    body = {"kind": "other", "reason": "It was answerable.", "evidence": None}
    assert reviewer.post(f"/api/v1/decisions/{refusals[1]}/disputes", body, format="json").status_code == 201
    second = _client(factories.make_user("second-reviewer", "reviewer"))
    for client in (reviewer, second):
        dispute = client.post(f"/api/v1/decisions/{refusals[2]}/disputes", body, format="json").json()["id"]
        resolved = reviewer.post(
            f"/api/v1/disputes/{dispute}/resolve", {"resolution": "overturned", "note": "Answerable."}, format="json"
        )
        assert resolved.status_code == 200, resolved.json()
    labels = [
        {"route": "it-support", "request_id": "sim-3", "verdict": "correct", "source": "audit"},
        {"route": "it-support", "request_id": "sim-4", "verdict": "incorrect", "source": "audit"},
    ]
    assert integrator.post("/api/v1/labels", {"labels": labels}, format="json").status_code == 201
    return DisputedRefusals(**{**vars(made), "reviewer_id": reviewer_user.pk}, refusals=tuple(refusals))


@pytest.fixture(scope="module")
def disputed_world(django_db_setup, django_db_blocker, tmp_path_factory):
    """The twelve refusals with their disputes and labels, built once for the module (tests/worlds.py)."""
    yield from build_world(django_db_blocker, tmp_path_factory, _disputed_build)


@pytest.fixture
def disputed(disputed_world, db, request) -> list[int]:
    """The refusals' ids, nearest first, as `_disputed_build` disputed and labelled them; the test's
    `route`, `integrator` and `reviewer` are the world's."""
    return list(disputed_world.enter(request).refusals)


def _results(client, decision_id: int) -> list[dict]:
    response = client.get(f"/api/v1/decisions/{decision_id}/similar?k=10")
    assert response.status_code == 200, response.json()
    return response.json()["results"]


def test_each_neighbour_in_the_api_carries_its_dispute_status_and_label(disputed, reviewer):
    results = _results(reviewer, disputed[0])
    assert [r["id"] for r in results] == disputed[1:11]
    by_id = {r["id"]: r for r in results}
    assert by_id[disputed[1]]["dispute"] == {"status": "open", "count": 1}
    assert by_id[disputed[2]]["dispute"] == {"status": "overturned", "count": 2}
    assert all(by_id[pk]["dispute"] is None for pk in disputed[3:11])
    assert by_id[disputed[3]]["label"] == "correct" and by_id[disputed[4]]["label"] == "incorrect"
    assert by_id[disputed[5]]["label"] is None
    assert {"similarity", "occurred_at", "no_supporting_passage"} <= set(results[0])


def test_an_appeal_made_before_ingest_counts_as_a_dispute_of_its_neighbour(route, integrator, reviewer):
    from console.disputes import services

    services.appeal_open(route=route, request_id="sim-1", message="Please answer me.", email="")
    cache.clear()
    records = [
        factories.record(request_id=f"sim-{i}", question=QUESTIONS[i], question_embedding=VECTORS[i].tolist())
        for i in range(3)
    ]
    assert integrator.post("/api/v1/decisions", {"decisions": records}, format="json").status_code == 201
    first = QuestionVector.objects.order_by("decision_id").values_list("decision_id", flat=True)[0]
    results = _results(reviewer, first)
    assert results[0]["request_id"] == "sim-1" and results[0]["dispute"] == {"status": "open", "count": 1}


def test_a_reader_sees_dispute_status_but_never_labels(disputed, route):
    reader = _client(factories.make_user("support-agent", "reader", route))
    results = _results(reader, disputed[0])
    assert results[0]["dispute"] == {"status": "open", "count": 1}
    assert all("label" not in r for r in results)


def test_the_dispute_form_shows_similar_refusals_with_their_dispute_status(disputed, route, client):
    client.force_login(factories.make_user("support-agent", "reader", route))
    html = client.get(f"/decisions/{disputed[0]}/").content.decode()
    form_at = html.index('action="/decisions/')
    similar_at = html.index('class="similar-beside-form"')
    disputes_at = html.index('id="disputes"')
    panel_at = html.index('id="dispute-open"')
    # the dispute form's own panel, after the disputes, with the similar refusals beside the form
    assert disputes_at < panel_at < form_at < similar_at
    panel = html[similar_at : html.index("</section>", similar_at)]
    assert QUESTIONS[1] in panel and QUESTIONS[10] in panel and QUESTIONS[11] not in panel
    assert 'class="pill dispute-open">open</span>' in panel
    assert 'class="pill dispute-overturned">overturned</span>' in panel and "(2 disputes)" in panel
    assert "Final label" not in panel and "verdict correct" not in panel  # a reader never sees grades
    assert html.count('id="similar-refusals"') == 1  # not a second time as a card of its own


def test_the_dispute_form_shown_again_after_an_error_keeps_the_similar_refusals(disputed, route, client):
    client.force_login(factories.make_user("support-agent", "reader", route))
    response = client.post(f"/decisions/{disputed[0]}/dispute/", {"kind": "other", "source": "none"})
    assert response.status_code == 400  # no reason given
    html = response.content.decode()
    assert "Dispute this refusal" in html and QUESTIONS[1] in html
    assert 'class="pill dispute-open">open</span>' in html


def test_a_reviewer_sees_labels_beside_the_dispute_status_on_the_refusal_page(disputed, client):
    client.force_login(factories.make_user("page-reviewer", "reviewer"))
    html = client.get(f"/decisions/{disputed[0]}/").content.decode()
    similar_at = html.index('class="similar-beside-form"')
    panel = html[similar_at : html.index("</section>", similar_at)]
    assert "Final label" in panel and '<span class="verdict correct">correct</span>' in panel
    assert '<span class="verdict incorrect">incorrect</span>' in panel


def test_a_served_decision_shows_its_similar_refusals_as_a_card_of_their_own(refusals, integrator, client):
    served = factories.served_record(question="VPN from site A?", question_embedding=VECTORS[0].tolist())
    assert integrator.post("/api/v1/decisions", {"decisions": [served]}, format="json").status_code == 201
    served_id = QuestionVector.objects.order_by("-decision_id").values_list("decision_id", flat=True)[0]
    client.force_login(factories.make_user("page-reviewer", "reviewer"))
    html = client.get(f"/decisions/{served_id}/").content.decode()
    assert "similar-beside-form" not in html  # no dispute form on a served decision
    assert '<section class="card" id="similar-refusals">' in html and QUESTIONS[0] in html


def test_a_grader_never_sees_similar_refusals(disputed, route, client):
    grader = factories.make_user("route-grader", "grader", route)
    assert _client(grader).get(f"/api/v1/decisions/{disputed[0]}/similar").status_code == 403
    client.force_login(grader)
    for response in (
        client.get(f"/decisions/{disputed[0]}/"),
        client.post(f"/decisions/{disputed[0]}/dispute/", {"kind": "other", "source": "none"}),
    ):
        assert response.status_code in (403, 404)
        assert QUESTIONS[1] not in response.content.decode()


def test_an_appellant_through_the_link_never_sees_other_questions(disputed, integrator):
    cache.clear()
    url = integrator.get("/api/v1/routes/it-support/decisions/sim-0/appeal-link").json()["url"]
    appellant = Client()
    pages = [
        appellant.get(url),
        appellant.post(url, {"message": "", "email": ""}),  # an error shows the form again
        appellant.post(url, {"message": "Please answer my question.", "email": ""}, follow=True),
    ]
    for response in pages:
        html = response.content.decode()
        assert QUESTIONS[0] in html  # their own question, and nobody else's
        assert not any(question in html for question in QUESTIONS[1:])
        assert "similar" not in html.lower() and "overturned" not in html


def test_the_api_costs_the_same_queries_however_many_neighbours_are_disputed_or_graded(
    refusals, reviewer, integrator, settings, django_assert_num_queries
):
    settings.SIMILARITY_SAME_FORM_MIN = 0.999  # one walk of the index (the deeper one is tested below)
    reviewer.get(f"/api/v1/decisions/{refusals[0]}/similar")  # the token's first use records when
    # token, grants, decision (no passages), space with the own vector, the walk (SET LOCAL inside a test's
    # transaction; outside one, nothing once the connection holds the value), and the neighbours
    # with their support, dispute status and label in one query
    with django_assert_num_queries(7):
        assert _results(reviewer, refusals[0])[0]["dispute"] is None
    body = {"kind": "other", "reason": "It was answerable.", "evidence": None}
    for pk in refusals[1:8]:
        assert reviewer.post(f"/api/v1/decisions/{pk}/disputes", body, format="json").status_code == 201
    labels = [
        {"route": "it-support", "request_id": f"sim-{i}", "verdict": "correct", "source": "audit"} for i in range(1, 8)
    ]
    assert integrator.post("/api/v1/labels", {"labels": labels}, format="json").status_code == 201
    with django_assert_num_queries(7):
        results = _results(reviewer, refusals[0])
    assert sum(r["dispute"] is not None for r in results) == 7 and sum(r["label"] == "correct" for r in results) == 7


def test_the_30_day_count_walks_deeper_only_when_every_neighbour_found_is_in_similar_form(
    refusals, reviewer, settings, monkeypatch
):
    from console.similarity import selectors

    walks: list[int] = []
    walk = selectors._walk
    monkeypatch.setattr(selectors, "_walk", lambda *args, **kwargs: walks.append(kwargs["k"]) or walk(*args, **kwargs))
    settings.SIMILARITY_SAME_FORM_MIN = 0.85  # neighbours 1..11 are all at cosine >= 0.87
    assert reviewer.get(f"/api/v1/decisions/{refusals[0]}/similar?k=3").json()["similar_form_30d"]["count"] == 11
    assert walks == [3, settings.SIMILARITY_SAME_FORM_DEPTH]
    walks.clear()
    settings.SIMILARITY_SAME_FORM_MIN = 0.997  # only neighbour 1 (0.9988) is that close: the first walk suffices
    assert reviewer.get(f"/api/v1/decisions/{refusals[0]}/similar?k=3").json()["similar_form_30d"]["count"] == 1
    assert walks == [3]


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_ef_search_is_set_once_per_connection_and_never_lost_to_a_rollback(integrator, settings):
    from django.db import transaction

    from console.accounts.models import Route
    from console.similarity import selectors

    records = [factories.record(question=f"q{i}", question_embedding=v.tolist()) for i, v in enumerate(VECTORS)]
    assert integrator.post("/api/v1/decisions", {"decisions": records}, format="json").status_code == 201
    space = selectors.active_space(Route.objects.get(slug="it-support"))
    connection.close()  # a new connection holds pgvector's default

    def show() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW hnsw.ef_search")
            return cursor.fetchone()[0]

    with CaptureQueriesContext(connection) as first:
        selectors.nearest(space, VECTORS[0], k=3)
    with CaptureQueriesContext(connection) as second:
        selectors.nearest(space, VECTORS[0], k=3)
    assert [q["sql"] for q in first.captured_queries][0] == f"SET hnsw.ef_search = {settings.SIMILARITY_EF_SEARCH}"
    assert len(second.captured_queries) == 1 and show() == str(settings.SIMILARITY_EF_SEARCH)
    with transaction.atomic():
        selectors.nearest(space, VECTORS[0], k=3, ef_search=250)
        assert show() == "250"
        transaction.set_rollback(True)
    assert show() == str(settings.SIMILARITY_EF_SEARCH)  # SET LOCAL ended with its transaction
