"""Questions the embedder can give no direction (numbers, punctuation, emoji only), tested over HTTP:
similar decisions and corpus gaps answer 200 with what they can say, never a 500 and never a NaN."""

from __future__ import annotations

import json

import numpy as np
import pytest

from console.similarity.models import QuestionVector
from console.similarity.services import builtin
from tests import factories

pytestmark = pytest.mark.django_db

TOPICS = [
    "How do I reset my VPN password on the laptop",
    "Printer on floor three shows a paper jam error",
    "Request a new monitor for my desk",
    "Outlook calendar does not sync with my phone",
]
WITHOUT_WORDS = ["0", "?", "\U0001f600", "42 7", "!!"]


def _fitted_route() -> list[int]:
    """A route whose built-in embedder is fitted on ordinary questions (refused)."""
    tails = ["", " please", " today?", " again"]
    ids = factories.ingest([factories.record(question=f"{t}{tail}") for tail in tails for t in TOPICS])
    builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=factories.make_route().pk)
    return ids


def _later(questions: list[str], **overrides) -> list[int]:
    """Decisions ingested after the fit, embedded with it: words it never saw give a zero vector."""
    ids = factories.ingest([factories.record(question=q, **overrides) for q in questions])
    builtin.vectors_embed(decision_ids=ids)
    return ids


def _json(response) -> dict:
    assert response.status_code == 200, response.content[:2000]
    text = response.content.decode()
    assert "NaN" not in text and "Infinity" not in text
    return json.loads(text)


def test_served_neighbours_without_known_words_are_left_out_not_a_500(route, reviewer):
    refused = _fitted_route()
    served = _later(WITHOUT_WORDS + ["Reset my VPN password please"], outcome="served", served_answer="See the portal.")
    assert QuestionVector.objects.filter(decision_id__in=served).count() == len(served)
    body = _json(reviewer.get(f"/api/v1/decisions/{refused[0]}/similar?outcome=served&k=10"))
    assert [r["id"] for r in body["results"]] == [served[-1]]
    assert body["reason"] is None
    body = _json(reviewer.get(f"/api/v1/decisions/{refused[0]}/similar?outcome=any&k=50"))
    assert not set(served[:-1]) & {r["id"] for r in body["results"]}


def test_a_question_without_known_words_says_it_has_no_neighbours(route, reviewer, client):
    _fitted_route()
    (own,) = _later(["\U0001f600 ?"])
    for outcome in ("refused", "served", "any"):
        body = _json(reviewer.get(f"/api/v1/decisions/{own}/similar?outcome={outcome}"))
        assert body["results"] == []
        assert body["reason"] == "zero_vector"
        assert body["similar_form_30d"]["count"] == 0
    client.force_login(factories.make_user("page-reviewer", "reviewer"))
    page = client.get(f"/decisions/{own}/")
    assert page.status_code == 200
    assert "no word the route's embedder knows" in page.content.decode()


def test_a_zero_vector_sent_by_the_integrator_finds_no_neighbours_and_is_no_neighbour(route, integrator, reviewer):
    records = [factories.record(question=f"q{i}", question_embedding=[1.0, float(i), 0.5]) for i in range(4)]
    records.append(factories.record(question="zero", question_embedding=[0.0, 0.0, 0.0]))
    response = integrator.post("/api/v1/decisions", {"decisions": records}, format="json")
    assert response.status_code == 201, response.content
    ids = sorted(QuestionVector.objects.values_list("decision_id", flat=True))
    body = _json(reviewer.get(f"/api/v1/decisions/{ids[0]}/similar?outcome=any&k=50"))
    assert ids[-1] not in {r["id"] for r in body["results"]} and len(body["results"]) == 3
    assert _json(reviewer.get(f"/api/v1/decisions/{ids[-1]}/similar"))["reason"] == "zero_vector"


def _recompute_and_read(client, reviewer, django_capture_on_commit_callbacks) -> dict:
    """The recompute button (the job runs on commit), then the gaps API and page."""
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post("/gaps/recompute", {"route": "it-support"}).status_code == 302
    assert client.get("/gaps/?route=it-support").status_code == 200
    return _json(reviewer.get("/api/v1/routes/it-support/gaps"))


@pytest.mark.parametrize(
    "questions",
    [
        pytest.param([str(i) for i in range(12)], id="numbers only"),
        pytest.param(["\U0001f600", "\U0001f44d", "\U0001f937"] * 4, id="emoji only"),
        pytest.param(["?"] * 12, id="punctuation only, identical"),
        pytest.param(["How do I reset my password"] * 12, id="identical"),
    ],
)
def test_a_route_whose_questions_have_no_words_gets_vectors_and_gaps_without_an_error(
    route, reviewer, client, django_capture_on_commit_callbacks, questions
):
    ids = factories.ingest([factories.record(question=q, occurred_at=factories.recent()) for q in questions])
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    assert version is not None
    assert QuestionVector.objects.filter(decision_id__in=ids).count() == len(ids)
    ids += _later([questions[0]], occurred_at=factories.recent())  # embedded with the stored model
    assert QuestionVector.objects.filter(decision_id__in=ids).count() == len(ids)
    body = _json(reviewer.get(f"/api/v1/decisions/{ids[0]}/similar?k=5"))
    assert body["reason"] in (None, "zero_vector")
    client.force_login(factories.make_user("gap-reviewer", "reviewer"))
    gaps = _recompute_and_read(client, reviewer, django_capture_on_commit_callbacks)
    assert gaps["computed_at"] is not None and gaps["refusals"] == len(ids)
    for cluster in gaps["clusters"]:
        assert cluster["size"] >= 1 and isinstance(cluster["terms"], list)


def test_a_single_refusal_gives_a_run_without_clusters_and_says_why(
    route, reviewer, client, django_capture_on_commit_callbacks
):
    factories.ingest(
        [
            factories.record(
                question="Where is the printer", question_embedding=[1.0, 0.0], occurred_at=factories.recent()
            )
        ]
    )
    client.force_login(factories.make_user("gap-reviewer", "reviewer"))
    gaps = _recompute_and_read(client, reviewer, django_capture_on_commit_callbacks)
    assert gaps["refusals"] == 1 and gaps["clusters"] == []
    assert gaps["reason"] == "too_few_refusals"


def test_a_route_without_vectors_says_why_it_has_no_gaps(route, reviewer):
    body = _json(reviewer.get("/api/v1/routes/it-support/gaps"))
    assert body == {"computed_at": None, "clusters": [], "results": [], "next": None, "reason": "not_computed"}


@pytest.mark.parametrize("question", ["How do I reset my password", "?"])
def test_refusals_that_all_ask_the_same_question_are_one_gap_not_one_offs(
    route, reviewer, client, django_capture_on_commit_callbacks, question
):
    ids = factories.ingest([factories.record(question=question, occurred_at=factories.recent()) for _ in range(12)])
    builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    client.force_login(factories.make_user("gap-reviewer", "reviewer"))
    gaps = _recompute_and_read(client, reviewer, django_capture_on_commit_callbacks)
    assert gaps["reason"] is None and gaps["unclustered"] == 0
    assert [c["size"] for c in gaps["clusters"]] == [12]
    assert {e["id"] for e in gaps["clusters"][0]["examples"]} <= set(ids)


def test_refusals_without_direction_never_form_a_group_on_their_own():
    from console.similarity import topics

    found = topics.cluster(np.zeros((12, 8), dtype=np.float32), one_group_min=0.8)
    assert len(found.centres) == 0 and (found.labels == -1).all()
