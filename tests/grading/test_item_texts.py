"""Pool items read their question and answer from their decision unless they hold their own text:
graders see the same texts as when every item kept a copy, through the API, the page and the ORM."""

import pytest

from console.ledger.models import Decision
from console.shadow.models import ShadowRun
from grading import tasks
from grading.models import AnswerSource, GradingItem
from grading.services import pool as pool_services
from grading.services import queue
from tests.factories import TEST_ACTOR, ingest, make_route, make_user, record, served_record
from tests.grading.helpers import api_client, next_item, pooled

SOURCES = [AnswerSource.SERVED, AnswerSource.CLAIM, AnswerSource.SHADOW, AnswerSource.GOLD]


def _item_of(source: str, monkeypatch) -> tuple[GradingItem, str, str]:
    """The only item the queue hands out, of this source, with the question and answer it held when
    every item kept a copy: the decision's question, and its served answer, its claim, the shadow
    run's answer or the gold item's."""
    if source == AnswerSource.SERVED:
        [decision_id] = pooled(
            [served_record(question="How do I reset MFA?", claim="The gate's draft.", served_answer="Choose Reset.")]
        )
        return GradingItem.objects.get(decision_id=decision_id), "How do I reset MFA?", "Choose Reset."
    if source == AnswerSource.CLAIM:
        [decision_id] = pooled([record(question="Where is the printer?", claim="On floor two.")])
        return GradingItem.objects.get(decision_id=decision_id), "Where is the printer?", "On floor two."
    if source == AnswerSource.SHADOW:
        make_route("shadowed", shadow_config={"kind": "reference"})
        [decision_id] = ingest([record(route="shadowed", question="Who signs leave?", claim="HR does.")])
        ShadowRun.objects.create(
            decision_id=decision_id,
            pipeline="reference",
            status="succeeded",
            answer="Your manager signs it.",
            passages_sha256="0" * 64,
        )
        assert tasks.grading_pool_sweep() == 1
        return GradingItem.objects.get(decision_id=decision_id), "Who signs leave?", "Your manager signs it."
    [decision_id] = pooled([record(question="Is the VPN required?", claim="Yes, always.")])
    gold = pool_services.gold_item_create(
        actor=TEST_ACTOR, decision=Decision.objects.get(pk=decision_id), verdict="incorrect", answer="Never."
    )
    pool_services.grading_plan_set(actor=TEST_ACTOR, route=gold.route, bands=[], gold_rate=0.5)
    monkeypatch.setattr(queue._rng, "random", lambda: 0.0)  # the gold item replaces the regular one
    return gold, "Is the VPN required?", "Never."


@pytest.mark.parametrize("source", SOURCES)
def test_next_hands_out_the_texts_the_item_held(route, source, monkeypatch):
    item, question, answer = _item_of(source, monkeypatch)
    handed = next_item(api_client(make_user("text-grader", "grader")))
    assert (handed["id"], handed["question"], handed["answer"]) == (str(item.public_id), question, answer)


@pytest.mark.parametrize("source", SOURCES)
def test_the_grading_page_shows_the_texts_the_item_held(route, source, monkeypatch, page_of):
    _item, question, answer = _item_of(source, monkeypatch)
    pages = page_of(make_user("text-grader", "grader"))
    fragment = pages.post("/grading/next", HTTP_HX_REQUEST="true").content.decode()
    reload = pages.get("/grading/").content.decode()  # the lease in hand, read again
    for html in (fragment, reload):
        assert f'data-field="question">{question}</p>' in html
        assert f'data-field="answer">{answer}</p>' in html


@pytest.mark.parametrize("source", SOURCES)
def test_the_orm_reads_the_texts_the_item_held(route, source, monkeypatch):
    item, question, answer = _item_of(source, monkeypatch)
    assert GradingItem.objects.with_texts().values_list("question", "answer").get(pk=item.pk) == (question, answer)
    read = GradingItem.objects.with_texts().get(pk=item.pk)
    assert (read.question, read.answer) == (question, answer)
    plain = GradingItem.objects.get(pk=item.pk)  # without with_texts(): from its decision, on demand
    assert (plain.question, plain.answer) == (question, answer)
    assert GradingItem.objects.with_texts().filter(pk=item.pk, answer=answer, question=question).exists()


def test_items_made_from_a_decision_store_only_text_the_decision_does_not_hold(route, monkeypatch):
    stored = {}
    for source in SOURCES:
        item, _question, answer = _item_of(source, monkeypatch)
        item.refresh_from_db()
        stored[source] = (item.answer_source, item.own_question, item.own_answer)
    assert stored == {
        AnswerSource.SERVED: (AnswerSource.SERVED, "", ""),
        AnswerSource.CLAIM: (AnswerSource.CLAIM, "", ""),
        AnswerSource.SHADOW: (AnswerSource.SHADOW, "", "Your manager signs it."),
        AnswerSource.GOLD: (AnswerSource.GOLD, "", "Never."),
    }


def test_a_gold_item_without_an_answer_is_refused(route):
    from console.core.errors import InvalidInput

    [decision_id] = pooled([record()])
    with pytest.raises(InvalidInput):
        pool_services.gold_item_create(
            actor=TEST_ACTOR, decision=Decision.objects.get(pk=decision_id), verdict="correct", answer=""
        )


def test_an_item_text_is_not_a_constructor_argument(route):
    """Texts are written as own_question / own_answer; `question=` would be silently lost."""
    with pytest.raises(TypeError):
        GradingItem(route=route, question="q", answer_source=AnswerSource.GOLD, queue_key=1)
