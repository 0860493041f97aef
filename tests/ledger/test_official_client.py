"""The official client (clients/python/) against a live console: what an integrator runs."""

from __future__ import annotations

import pytest
from abstention_console import Console, NoSignedPolicy

from console.ledger.models import Decision
from tests import factories
from tests.monitoring.conftest import sign_policy

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ingest_token(route) -> str:
    return factories.make_token(factories.make_user("ingest-bot", "integrator", route))


def test_the_official_client_records_200_decisions_and_reads_the_signed_policy(
    live_server, route, owner, reviewer, ingest_token, tmp_path
):
    records = [factories.record(occurred_at=factories.recent()) for _ in range(200)]
    with Console(live_server.url, ingest_token, spool_dir=tmp_path, batch_size=64, flush_interval=0.05) as console:
        for record in records:
            console.record(record)
        assert console.flush(timeout=120)
        with pytest.raises(NoSignedPolicy):
            console.policy("it-support")

        signed = sign_policy(route, owner.user, reviewer.user, cutoff=0.6)
        policy = console.policy("it-support")
        assert policy["cutoff"] == 0.6 and policy["version"] == signed.version and policy["status"] == "active"
        assert console.policy("it-support") == policy  # revalidated: 304, same policy

        for record in records[:20]:  # a replay, as after an outage: stored once
            console.record(record)
        assert console.flush(timeout=60)
    stored = set(Decision.objects.filter(route=route).values_list("request_id", flat=True))
    assert stored == {record["request_id"] for record in records}
    assert not console.dead_letter_path.exists()


def test_a_rejected_decision_is_dead_lettered_and_the_rest_stored(live_server, route, ingest_token, tmp_path):
    good = [factories.record(occurred_at=factories.recent()) for _ in range(5)]
    bad = factories.record(occurred_at=factories.recent(), outcome="served", served_answer=None)
    with Console(live_server.url, ingest_token, spool_dir=tmp_path, flush_interval=60) as console:
        for record in [*good[:2], bad, *good[2:]]:
            console.record(record)
        assert console.flush(timeout=60)
    stored = set(Decision.objects.filter(route=route).values_list("request_id", flat=True))
    assert stored == {record["request_id"] for record in good}
    assert bad["request_id"] in console.dead_letter_path.read_text()


def _ranked_passages(decision: Decision) -> list[tuple[int, str, float | None]]:
    return [(link.rank, link.passage.external_id, link.retrieval_score) for link in decision.ranked_passages]


def test_a_langchain_chains_run_is_stored_with_its_ranked_passages(live_server, route, ingest_token, tmp_path):
    """The [langchain] extra's handler: what it records passes the console's own validation."""
    pytest.importorskip("langchain_core")
    from abstention_console.integrations.langchain import ConsoleCallbackHandler
    from langchain_core.documents import Document
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough

    class Retriever(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager):
            return [
                Document(id="kb/mfa#2", page_content="Open Settings > Security.", metadata={"score": 0.83}),
                Document(id="kb/desk", page_content="Ask the service desk.", metadata={"score": 0.41}),
            ]

    chain = (
        {"context": Retriever(), "question": RunnablePassthrough()}
        | ChatPromptTemplate.from_template("{context} {question}")
        | FakeListChatModel(responses=["Open Settings > Security and reset MFA."])
        | StrOutputParser()
    )
    options = {"request_id": "lc-1", "gate": {"score": 0.4, "cutoff": 0.85}}
    with Console(live_server.url, ingest_token, spool_dir=tmp_path, flush_interval=0.05) as console:
        handler = ConsoleCallbackHandler(console, route="it-support", gate_name="nli", versions={"model": "fake"})
        chain.invoke(
            "How do I reset MFA?", config={"callbacks": [handler], "metadata": {"abstention_console": options}}
        )
        assert console.flush(timeout=60)
    assert not console.dead_letter_path.exists()
    decision = Decision.objects.get(route=route, request_id="lc-1")
    assert (decision.question, decision.outcome, decision.gate_score) == ("How do I reset MFA?", "refused", 0.4)
    assert decision.claim == "Open Settings > Security and reset MFA."
    assert _ranked_passages(decision) == [(1, "kb/mfa#2", 0.83), (2, "kb/desk", 0.41)]


def test_a_llamaindex_query_is_stored_with_its_ranked_passages(live_server, route, ingest_token, tmp_path):
    """The [llamaindex] extra's handler: what it records passes the console's own validation."""
    pytest.importorskip("llama_index.core")
    from abstention_console.integrations.llamaindex import ConsoleEventHandler
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.instrumentation.dispatcher import instrument_tags
    from llama_index.core.llms import MockLLM

    documents = [Document(text="Open Settings > Security."), Document(text="Ask the service desk.")]
    engine = VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8)).as_query_engine(
        llm=MockLLM(max_tokens=4), similarity_top_k=2
    )
    with Console(live_server.url, ingest_token, spool_dir=tmp_path, flush_interval=0.05) as console:
        handler = ConsoleEventHandler.attach(console, route="it-support", gate_name="nli", versions={"model": "mock"})
        try:
            with instrument_tags({"abstention_console": {"request_id": "li-1"}}):
                response = engine.query("How do I reset MFA?")
            handler.gate(score=0.9, cutoff=0.85, request_id="li-1")
        finally:
            handler.detach()
        assert console.flush(timeout=60)
    assert not console.dead_letter_path.exists()
    decision = Decision.objects.get(route=route, request_id="li-1")
    assert (decision.outcome, decision.served_answer) == ("served", response.response)
    expected = [(rank, n.node.node_id, n.score) for rank, n in enumerate(response.source_nodes, start=1)]
    assert _ranked_passages(decision) == expected
