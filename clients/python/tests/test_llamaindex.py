"""The LlamaIndex instrumentation handler, on LlamaIndex's own fakes: MockLLM and MockEmbedding over a
VectorStoreIndex of a few Documents. No network, no weights; the console is the stand-in of
conftest.py behind httpx's MockTransport."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging

import pytest

pytest.importorskip("llama_index.core", reason="the [llamaindex] extra is not installed")

from abstention_console import Console  # noqa: E402
from abstention_console.integrations.llamaindex import ConsoleEventHandler  # noqa: E402
from llama_index.core import Document, VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.instrumentation.dispatcher import instrument_tags  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import MetadataMode  # noqa: E402

VERSIONS = {"model": "mock-llm", "retriever": "vector-2", "corpus": "kb-2026-12", "gate": "nli-4"}
DOCUMENTS = [
    Document(text="To reset MFA, open Settings > Security.", id_="kb/mfa", metadata={"source": "runbook"}),
    Document(text="Printers are on the second floor.", id_="kb/printers"),
    Document(text="The service desk is open from 8 to 18.", id_="kb/desk", metadata={"url": "https://intranet/desk"}),
]


@pytest.fixture(scope="module")
def index():
    return VectorStoreIndex.from_documents(DOCUMENTS, embed_model=MockEmbedding(embed_dim=8))


@pytest.fixture
def console(fake, tmp_path):
    with Console("http://console", "secret", spool_dir=tmp_path, flush_interval=0.01, transport=fake.transport()) as c:
        yield c


@pytest.fixture
def handler(console):
    handler = ConsoleEventHandler.attach(console, route="it-support", gate_name="nli", versions=VERSIONS)
    yield handler
    handler.detach()  # the root dispatcher outlives the test


def test_a_query_is_recorded_with_its_question_passages_answer_and_gate(fake, console, handler, index):
    engine = index.as_query_engine(llm=MockLLM(max_tokens=6), similarity_top_k=3)
    with instrument_tags({"abstention_console": {"request_id": "q-000123"}}):
        response = engine.query("How do I reset MFA?")
    assert handler.gate(score=0.91, cutoff=0.85, request_id="q-000123") == "q-000123"
    assert console.flush(timeout=5)

    recorded = fake.records["q-000123"]
    assert recorded["question"] == "How do I reset MFA?"
    assert recorded["claim"] == response.response == "text text text text text text"
    assert recorded["served_answer"] == response.response
    assert recorded["gate"] == {"name": "nli", "score": 0.91, "cutoff": 0.85}
    assert recorded["outcome"] == "served"
    assert recorded["versions"] == VERSIONS
    expected = [
        {
            "id": scored.node.node_id,
            "text": scored.node.get_content(metadata_mode=MetadataMode.NONE),
            "rank": rank,
            "retrieval_score": scored.score,
        }
        for rank, scored in enumerate(response.source_nodes, start=1)
    ]
    assert [{k: p[k] for k in ("id", "text", "rank", "retrieval_score")} for p in recorded["passages"]] == expected
    assert {p["text"] for p in recorded["passages"]} == {d.text for d in DOCUMENTS}
    by_text = {p["text"]: p for p in recorded["passages"]}
    assert by_text[DOCUMENTS[0].text]["source"] == "runbook"
    assert by_text[DOCUMENTS[2].text]["uri"] == "https://intranet/desk"


def test_a_query_waits_for_its_gate_then_is_recorded_once(fake, console, handler, index):
    engine = index.as_query_engine(llm=MockLLM(max_tokens=3), similarity_top_k=1)
    engine.query("Where are the printers?")
    assert console.flush(timeout=5)
    assert fake.records == {}

    request_id = handler.gate(score=0.1, cutoff=0.85)  # the last query without a gate
    assert console.flush(timeout=5)
    recorded = fake.records[request_id]
    assert recorded["outcome"] == "refused"
    assert recorded["served_answer"] is None
    assert recorded["claim"] == "text text text"
    assert len(recorded["passages"]) == 1
    assert handler.gate(score=0.1, cutoff=0.85, request_id=request_id) is None
    assert fake.accepted[request_id] == 1


def test_the_instrument_tag_can_carry_the_gate(fake, console, handler, index):
    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=2)
    tag = {
        "request_id": "q-7",
        "segments": {"language": "en"},
        "gate": {"score": 0.7, "cutoff": 0.8, "band_lower": 0.5},
    }
    with instrument_tags({"abstention_console": tag}):
        engine.query("When is the desk open?")
    assert console.flush(timeout=5)
    recorded = fake.records["q-7"]
    assert recorded["outcome"] == "served_with_evidence"
    assert recorded["segments"] == {"language": "en"}


def test_concurrent_async_queries_keep_their_own_passages(fake, console, handler, index):
    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=1)
    questions = {f"q-{n}": f"Question number {n}?" for n in range(6)}

    async def ask(request_id: str, question: str):
        with instrument_tags({"abstention_console": {"request_id": request_id, "gate": {"score": 0.9, "cutoff": 0.5}}}):
            return await engine.aquery(question)

    async def main():
        return await asyncio.gather(*(ask(rid, q) for rid, q in questions.items()))

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:  # see test_async.run for why
        pool.submit(asyncio.run, main()).result()
    assert console.flush(timeout=5)
    assert sorted(fake.records) == sorted(questions)
    for request_id, question in questions.items():
        assert fake.records[request_id]["question"] == question
        assert len(fake.records[request_id]["passages"]) == 1


class BrokenRetriever(BaseRetriever):
    def _retrieve(self, query_bundle):
        raise ConnectionError("the vector store is down")


def test_a_failing_query_records_nothing_and_the_next_one_is_its_own(fake, console, handler, index):
    from llama_index.core.query_engine import RetrieverQueryEngine

    broken = RetrieverQueryEngine.from_args(BrokenRetriever(), llm=MockLLM(max_tokens=2))
    with pytest.raises(ConnectionError):
        broken.query("How do I reset MFA?")
    assert handler.gate(score=0.9, cutoff=0.85) is None

    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=1)
    with instrument_tags({"abstention_console": {"request_id": "q-after", "gate": {"score": 0.9, "cutoff": 0.5}}}):
        engine.query("Where are the printers?")
    assert console.flush(timeout=5)
    assert list(fake.records) == ["q-after"]
    assert fake.records["q-after"]["question"] == "Where are the printers?"


def test_the_handler_logs_instead_of_raising_when_recording_fails(fake, console, handler, index, caplog):
    console.close()
    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=1)
    with caplog.at_level(logging.ERROR, logger="abstention_console.integrations"):
        with instrument_tags({"abstention_console": {"gate": {"score": 0.9, "cutoff": 0.5}}}):
            assert engine.query("Where are the printers?").response == "text text"
    assert "not recorded" in caplog.text
