"""A LangChain callback handler that records each run of a retrieval-augmented chain as one decision.

    pip install "abstention-console-client[langchain]"

    from abstention_console import Console
    from abstention_console.integrations.langchain import ConsoleCallbackHandler

    handler = ConsoleCallbackHandler(console, route="it-support", gate_name="nli", versions={...})
    run_id = uuid.uuid4()
    draft = chain.invoke(question, config={"callbacks": [handler], "run_id": run_id})
    score = my_gate(question, draft)
    handler.gate(score=score, cutoff=policy["cutoff"], request_id=str(run_id))

The run's question comes from the chain's input (a string, or the `question_key` / "question" /
"query" / "input" entry of a dict; else the retriever's query), its passages from every retriever
the run calls (id, text, `score_key` score and rank from each Document), its draft from the last
model call and its answer from the chain's output. The gate decision comes from, in order:
`handler.gate(...)` (during or after the run), a "gate" entry of the chain's output dict (a gate step
inside the chain), or `config["metadata"]["abstention_console"]["gate"]`. The same metadata entry
may set the run's `request_id` (default: the run's id), `route`, `segments` and `versions`.

A run is recorded once, when it has ended and its gate is known, with `console.record()`, which
never waits for the network. Nothing here raises into the chain: errors are logged on the
`abstention_console.integrations` logger. A chain that fails records nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.outputs import LLMResult

from abstention_console.integrations._trace import TAG, Cutoff, Gating, Recorder, Recording, Trace, never_raises

__all__ = ["ConsoleCallbackHandler"]

_QUESTION_KEYS = ("question", "query", "input")
_ANSWER_KEYS = ("answer", "output", "result", "text")
_SCORE_FALLBACKS = ("score", "relevance_score", "similarity_score")


def _text_of(value: Any, keys: Sequence[str]) -> str | None:
    """A string from a chain's input or output: the string itself, a message's text content, or
    the first of `keys` in a dict that holds one."""
    if isinstance(value, str):
        return value
    content = getattr(value, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(value, Mapping):
        for key in keys:
            found = _text_of(value.get(key), keys)
            if found is not None:
                return found
        strings = [item for item in value.values() if isinstance(item, str)]
        if len(strings) == 1:  # a single-input chain whatever its key is called
            return strings[0]
    return None


class ConsoleCallbackHandler(Gating, BaseCallbackHandler):
    """Records each top-level run it sees as one gated decision (see the module's docstring)."""

    raise_error = False
    # Every method is a few dict operations and a non-blocking record(): no need for a thread hop
    # in async chains, and events of one run stay in order.
    run_inline = True

    def __init__(
        self,
        console: Recording,
        *,
        route: str,
        gate_name: str = "gate",
        cutoff: Cutoff = None,
        versions: Mapping[str, str] | None = None,
        segments: Mapping[str, Any] | None = None,
        question_key: str | None = None,
        answer_key: str | None = None,
        score_key: str = "score",
        max_waiting: int = 1000,
    ) -> None:
        super().__init__()
        self.recorder = Recorder(
            console,
            route=route,
            gate_name=gate_name,
            cutoff=cutoff,
            versions=versions,
            segments=segments,
            max_waiting=max_waiting,
        )
        self.question_keys = (question_key,) if question_key else _QUESTION_KEYS
        self.answer_keys = (answer_key,) if answer_key else _ANSWER_KEYS
        self.score_keys = (score_key, *(k for k in _SCORE_FALLBACKS if k != score_key))
        self._lock = threading.Lock()
        self._root_of: dict[UUID, UUID] = {}  # every run in progress -> its top-level run
        self._runs: dict[UUID, tuple[Trace, list[UUID]]] = {}  # top-level run -> its trace, the runs mapped to it

    # -- which run is which -------------------------------------------------------------------------

    def _trace(self, run_id: UUID) -> Trace | None:
        with self._lock:
            root = self._root_of.get(run_id)
            return self._runs[root][0] if root is not None else None

    def _join(self, run_id: UUID, parent_run_id: UUID | None) -> Trace | None:
        """Map a child run to its top-level run's trace."""
        with self._lock:
            root = self._root_of.get(parent_run_id) if parent_run_id is not None else None
            if root is None:
                return None
            trace, members = self._runs[root]
            self._root_of[run_id] = root
            members.append(run_id)
            return trace

    def _end(self, run_id: UUID) -> Trace | None:
        """The trace of `run_id` if it is a top-level run, forgotten with every run mapped to it."""
        with self._lock:
            entry = self._runs.pop(run_id, None)
            if entry is None:
                return None
            trace, members = entry
            for member in members:
                self._root_of.pop(member, None)
            return trace

    # -- events -------------------------------------------------------------------------------------

    @never_raises
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if self._join(run_id, parent_run_id) is not None:
            return
        # A run whose parent this handler never saw is a top-level run for it.
        trace = self.recorder.start(str(run_id))
        trace.question = _text_of(inputs, self.question_keys)
        old_request_id = trace.request_id
        trace.configure((metadata or {}).get(TAG))
        self.recorder.rename(trace, old_request_id)
        with self._lock:
            self._root_of[run_id] = run_id
            self._runs[run_id] = (trace, [run_id])

    @never_raises
    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        trace = self._join(run_id, parent_run_id)
        if trace is not None and trace.retrieval_query is None:
            trace.retrieval_query = query

    @never_raises
    def on_retriever_end(self, documents: Sequence[Document], *, run_id: UUID, **kwargs: Any) -> None:
        trace = self._trace(run_id)
        if trace is None:
            return
        with self._lock:  # two retrievers of one run may end at once (a RunnableParallel's threads)
            self._add_passages(trace, documents)

    def _add_passages(self, trace: Trace, documents: Sequence[Document]) -> None:
        for position, document in enumerate(documents, start=1):
            metadata = document.metadata or {}
            score = next((metadata[key] for key in self.score_keys if metadata.get(key) is not None), None)
            trace.add_passage(
                passage_id=document.id or metadata.get("id"),
                text=document.page_content,
                score=score,
                rank=metadata.get("rank", position),
                metadata=metadata,
            )

    @never_raises
    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._join(run_id, parent_run_id)

    @never_raises
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._join(run_id, parent_run_id)

    @never_raises
    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        trace = self._trace(run_id)
        if trace is not None and response.generations and response.generations[0]:
            trace.draft = response.generations[0][0].text

    @never_raises
    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        trace = self._end(run_id)
        if trace is None:
            return
        trace.answer = _text_of(outputs, self.answer_keys)
        if isinstance(outputs, Mapping):
            if isinstance(outputs.get("gate"), Mapping):
                trace.gate = dict(outputs["gate"])
            if isinstance(outputs.get("claim"), str):
                trace.claim = outputs["claim"]
        self.recorder.finish(trace)

    @never_raises
    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        trace = self._end(run_id)
        if trace is not None:
            self.recorder.drop(trace, f"the chain failed ({type(error).__name__})")
