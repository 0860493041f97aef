"""The LangChain callback handler, on LangChain's own fakes: a BaseRetriever returning fixed Documents,
FakeListChatModel / FakeListLLM, small LCEL chains. No network, no weights; the console is the
stand-in of conftest.py behind httpx's MockTransport."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("langchain_core", reason="the [langchain] extra is not installed")

from abstention_console import Console  # noqa: E402
from abstention_console.integrations.langchain import ConsoleCallbackHandler  # noqa: E402
from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models import FakeListChatModel, FakeListLLM  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnablePassthrough  # noqa: E402

VERSIONS = {"model": "fake-chat", "retriever": "fixed-3", "corpus": "kb-2026-12", "gate": "nli-4"}


class KnowledgeBase(BaseRetriever):
    """Two fixed Documents per question, the way a vector store returns them: scores in metadata,
    one with an id and a source, one without either."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [
            Document(
                id="kb/mfa#2",
                page_content=f"To reset MFA ({query}), open Settings > Security.",
                metadata={"score": 0.83, "source": "runbook", "url": "https://intranet/kb/mfa"},
            ),
            Document(page_content=f"The service desk answers about {query}.", metadata={"relevance_score": 0.41}),
        ]


class BrokenRetriever(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        raise ConnectionError("the vector store is down")


PROMPT = ChatPromptTemplate.from_template("Answer from the context.\nContext: {context}\nQuestion: {question}")


def rag_chain(model, retriever=None):
    return (
        {"context": retriever or KnowledgeBase(), "question": RunnablePassthrough()}
        | PROMPT
        | model
        | StrOutputParser()
    )


@pytest.fixture
def console(fake, tmp_path):
    with Console("http://console", "secret", spool_dir=tmp_path, flush_interval=0.01, transport=fake.transport()) as c:
        yield c


@pytest.fixture
def handler(console):
    return ConsoleCallbackHandler(console, route="it-support", gate_name="nli", versions=VERSIONS)


def test_a_chain_run_is_recorded_with_its_question_passages_answer_and_gate(fake, console, handler):
    chain = rag_chain(FakeListChatModel(responses=["Open Settings > Security and choose Reset MFA."]))
    run_id = uuid.uuid4()

    answer = chain.invoke("How do I reset MFA?", config={"callbacks": [handler], "run_id": run_id})
    assert handler.gate(score=0.91, cutoff=0.85, request_id=str(run_id)) == str(run_id)
    assert console.flush(timeout=5)

    recorded = fake.records[str(run_id)]
    assert recorded["route"] == "it-support"
    assert recorded["question"] == "How do I reset MFA?"
    assert recorded["claim"] == answer == "Open Settings > Security and choose Reset MFA."
    assert recorded["gate"] == {"name": "nli", "score": 0.91, "cutoff": 0.85}
    assert recorded["outcome"] == "served"
    assert recorded["served_answer"] == answer
    assert recorded["versions"] == VERSIONS
    unnamed = "The service desk answers about How do I reset MFA?."
    assert recorded["passages"] == [
        {
            "id": "kb/mfa#2",
            "text": "To reset MFA (How do I reset MFA?), open Settings > Security.",
            "rank": 1,
            "retrieval_score": 0.83,
            "source": "runbook",
            "uri": "https://intranet/kb/mfa",
        },
        {
            "id": "sha256:" + hashlib.sha256(unnamed.encode()).hexdigest()[:32],
            "text": unnamed,
            "rank": 2,
            "retrieval_score": 0.41,
        },
    ]
    assert recorded["occurred_at"].endswith("+00:00")


def test_a_run_waits_for_its_gate_and_is_recorded_once(fake, console, handler, caplog):
    chain = rag_chain(FakeListLLM(responses=["Draft answer."]))
    run_id = uuid.uuid4()
    chain.invoke("How do I reset MFA?", config={"callbacks": [handler], "run_id": run_id})
    assert console.flush(timeout=5)
    assert fake.records == {}  # the gate has not scored the draft yet

    assert handler.gate(score=0.2, cutoff=0.85) == str(run_id)  # the last run without a gate
    assert console.flush(timeout=5)
    recorded = fake.records[str(run_id)]
    assert recorded["outcome"] == "refused"
    assert recorded["served_answer"] is None
    assert recorded["claim"] == "Draft answer."

    with caplog.at_level(logging.ERROR, logger="abstention_console.integrations"):
        assert handler.gate(score=0.9, cutoff=0.85, request_id=str(run_id)) is None
    assert "no such run" in caplog.text
    assert console.flush(timeout=5)
    assert fake.accepted[str(run_id)] == 1


def test_a_gate_step_inside_the_chain_is_read_from_the_chains_output(fake, console, handler):
    def gate_step(draft: str) -> dict:
        score = 0.6
        return {"answer": draft, "gate": {"score": score, "cutoff": 0.85, "band_lower": 0.5}}

    chain = rag_chain(FakeListChatModel(responses=["Open Settings."])) | RunnableLambda(gate_step)
    run_id = uuid.uuid4()
    chain.invoke("How do I reset MFA?", config={"callbacks": [handler], "run_id": run_id})
    assert console.flush(timeout=5)

    recorded = fake.records[str(run_id)]
    assert recorded["outcome"] == "served_with_evidence"  # between the band's lower edge and the cutoff
    assert recorded["served_answer"] == "Open Settings."
    assert recorded["gate"] == {"name": "nli", "score": 0.6, "cutoff": 0.85}


def test_the_runs_metadata_names_its_request_id_route_segments_and_gate(fake, console, handler):
    chain = {"context": RunnableLambda(lambda x: x["question"]) | KnowledgeBase(), "question": lambda x: x["question"]}
    chain = chain | PromptTemplate.from_template("{context} {question}") | FakeListLLM(responses=["Settings."])
    options = {"request_id": "q-000123", "segments": {"language": "en"}, "gate": {"score": 0.3, "cutoff": 0.5}}

    chain.invoke(
        {"question": "How do I reset MFA?"},
        config={"callbacks": [handler], "metadata": {"abstention_console": options}},
    )
    assert console.flush(timeout=5)

    recorded = fake.records["q-000123"]
    assert recorded["question"] == "How do I reset MFA?"
    assert recorded["segments"] == {"language": "en"}
    assert recorded["outcome"] == "refused"
    assert [p["rank"] for p in recorded["passages"]] == [1, 2]


def test_concurrent_runs_keep_their_own_passages(fake, console, handler):
    questions = [f"How do I reset device {n}?" for n in range(8)]
    chain = rag_chain(FakeListChatModel(responses=["Use the portal."]))
    configs = [
        {"callbacks": [handler], "metadata": {"abstention_console": {"request_id": f"q-{n}", "gate": {"score": 0.9}}}}
        for n in range(len(questions))
    ]
    handler.recorder.cutoff = lambda route: 0.85  # the signed cutoff, e.g. console.policy(route)["cutoff"]

    chain.batch(questions, config=configs, max_concurrency=4)
    assert console.flush(timeout=5)

    assert sorted(fake.records) == sorted(f"q-{n}" for n in range(len(questions)))
    for n, question in enumerate(questions):
        recorded = fake.records[f"q-{n}"]
        assert recorded["question"] == question
        assert all(question in passage["text"] for passage in recorded["passages"])
        assert recorded["gate"]["cutoff"] == 0.85


def test_an_async_run_is_recorded_the_same_way(fake, console, handler):
    chain = rag_chain(FakeListChatModel(responses=["Open Settings."]))
    run_id = uuid.uuid4()

    async def main():
        return await chain.ainvoke("How do I reset MFA?", config={"callbacks": [handler], "run_id": run_id})

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:  # see test_async.run for why
        pool.submit(asyncio.run, main()).result()
    handler.gate(score=0.9, cutoff=0.85, request_id=str(run_id))
    assert console.flush(timeout=5)
    assert [p["id"] for p in fake.records[str(run_id)]["passages"]][0] == "kb/mfa#2"


def test_a_failing_chain_records_nothing_and_the_handler_never_raises(fake, console, handler, caplog):
    chain = rag_chain(FakeListChatModel(responses=["unused"]), retriever=BrokenRetriever())
    with pytest.raises(ConnectionError):  # the chain's own error, untouched
        chain.invoke("How do I reset MFA?", config={"callbacks": [handler]})
    assert handler.gate(score=0.9, cutoff=0.85) is None  # nothing waits for a gate

    console.close()  # record() now raises: the handler logs it, the chain answers
    chain = rag_chain(FakeListChatModel(responses=["Open Settings."]))
    with caplog.at_level(logging.ERROR, logger="abstention_console.integrations"):
        assert chain.invoke("How do I reset MFA?", config={"callbacks": [handler]}) == "Open Settings."
        handler.gate(score=0.9, cutoff=0.85)
    assert "not recorded" in caplog.text
    assert fake.records == {}


def test_the_client_imports_no_framework_until_an_integration_is_imported():
    code = "import sys, abstention_console, console_client, abstention_console.integrations; " + (
        "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'llama_index'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_src_env())
    assert out.stdout.strip() == "[]"


def _src_env():
    src = str(Path(__file__).resolve().parents[1] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}


class NumpyScoredRetriever(BaseRetriever):
    """Scores as vector stores hand them out: numpy floats, and a NaN from a degenerate distance."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        import numpy

        return [
            Document(id="a", page_content="first", metadata={"score": numpy.float32(0.5), "rank": 2}),
            Document(id="b", page_content="second", metadata={"score": float("nan"), "rank": 2}),
        ]


def test_numpy_scores_are_sent_as_numbers_a_nan_score_is_left_out_and_ranks_stay_unique(fake, console, handler):
    pytest.importorskip("numpy")
    chain = rag_chain(FakeListLLM(responses=["An answer."]), retriever=NumpyScoredRetriever())
    options = {"request_id": "q-numpy", "gate": {"score": 0.9, "cutoff": 0.5}}
    chain.invoke("Which?", config={"callbacks": [handler], "metadata": {"abstention_console": options}})
    assert console.flush(timeout=5)
    assert fake.records["q-numpy"]["passages"] == [
        {"id": "a", "text": "first", "rank": 2, "retrieval_score": 0.5},
        {"id": "b", "text": "second", "rank": 3},  # 2 is taken: the next free rank after those given
    ]
