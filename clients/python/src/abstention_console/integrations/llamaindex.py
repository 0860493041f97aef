"""A LlamaIndex instrumentation event handler that records each query as one decision.

    pip install "abstention-console-client[llamaindex]"

    from abstention_console import Console
    from abstention_console.integrations.llamaindex import ConsoleEventHandler
    from llama_index.core.instrumentation.dispatcher import instrument_tags

    handler = ConsoleEventHandler.attach(console, route="it-support", gate_name="nli", versions={...})
    with instrument_tags({"abstention_console": {"request_id": request_id}}):
        response = query_engine.query(question)
    handler.gate(score=my_gate(question, response), cutoff=policy["cutoff"], request_id=request_id)

`attach()` adds the handler to the root dispatcher (or the one given), so every query engine
reports to it; `detach()` takes it off. The question comes from QueryStartEvent, the passages from
each RetrievalEndEvent of the query (node id, text, score, rank in the retriever's order), the draft
from SynthesizeEndEvent and the answer from QueryEndEvent. A query run inside another (a
sub-question engine's) belongs to the outer one: one decision per top-level query.

The gate decision comes from `handler.gate(...)` (during or after the query) or from the
instrument tag `{"abstention_console": {"gate": {...}}}`, which may also set the query's
`request_id` (default: a new UUID), `route`, `segments` and `versions`.

A query is recorded once, when it has ended and its gate is known, with `console.record()`, which
never waits for the network. The dispatcher swallows a handler's errors silently; this one logs
them on the `abstention_console.integrations` logger. A query that fails records nothing.

The events of one query are tied together by a context variable set at QueryStartEvent: LlamaIndex
dispatches events synchronously in the caller's context, and its own threads and tasks copy it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from llama_index.core.instrumentation import Dispatcher, get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.query import QueryEndEvent, QueryStartEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent
from llama_index.core.instrumentation.events.span import SpanDropEvent
from llama_index.core.instrumentation.events.synthesis import SynthesizeEndEvent
from llama_index.core.schema import MetadataMode
from pydantic import PrivateAttr

from abstention_console.integrations._trace import TAG, Cutoff, Gating, Recorder, Recording, Trace, never_raises

__all__ = ["ConsoleEventHandler"]


def _query_text(query: Any) -> str | None:
    """A query is a string or a QueryBundle."""
    if isinstance(query, str):
        return query
    text = getattr(query, "query_str", None)
    return text if isinstance(text, str) else None


def _response_text(response: Any) -> str | None:
    """The text of a Response or PydanticResponse; a streaming response's once it has been read
    (`str()` of an unread one would consume the caller's stream, so it is not called)."""
    text = getattr(response, "response", None)
    if isinstance(text, str):
        return text
    if text is not None and hasattr(text, "model_dump_json"):
        return text.model_dump_json()
    text = getattr(response, "response_txt", None)
    return text if isinstance(text, str) else None


class ConsoleEventHandler(Gating, BaseEventHandler):
    """Records each top-level query it sees as one gated decision (see the module's docstring)."""

    _recorder: Recorder = PrivateAttr()
    _current: ContextVar[tuple[str | None, Trace] | None] = PrivateAttr()

    def __init__(
        self,
        console: Recording,
        *,
        route: str,
        gate_name: str = "gate",
        cutoff: Cutoff = None,
        versions: Mapping[str, str] | None = None,
        segments: Mapping[str, Any] | None = None,
        max_waiting: int = 1000,
    ) -> None:
        super().__init__()
        self._recorder = Recorder(
            console,
            route=route,
            gate_name=gate_name,
            cutoff=cutoff,
            versions=versions,
            segments=segments,
            max_waiting=max_waiting,
        )
        # One variable per handler: two handlers (two consoles) never see each other's queries.
        self._current = ContextVar(f"abstention_console_query_{id(self)}", default=None)

    @classmethod
    def class_name(cls) -> str:
        return "AbstentionConsoleEventHandler"

    @classmethod
    def attach(cls, console: Recording, *, dispatcher: Dispatcher | None = None, **options: Any) -> ConsoleEventHandler:
        """A handler added to `dispatcher` (default: LlamaIndex's root dispatcher, which every
        module's dispatcher propagates to)."""
        handler = cls(console, **options)
        (dispatcher or get_dispatcher()).add_event_handler(handler)
        return handler

    def detach(self, dispatcher: Dispatcher | None = None) -> None:
        dispatcher = dispatcher or get_dispatcher()
        dispatcher.event_handlers = [h for h in dispatcher.event_handlers if h is not self]

    @property
    def recorder(self) -> Recorder:
        return self._recorder

    def _open_trace(self) -> tuple[str | None, Trace] | None:
        current = self._current.get()
        return current if current is not None and not current[1].finished else None

    @never_raises
    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        current = self._open_trace()
        if isinstance(event, QueryStartEvent):
            if current is None:  # else a query inside a query: its events belong to the outer one
                trace = self._recorder.start()
                trace.question = _query_text(event.query)
                old_request_id = trace.request_id
                trace.configure(event.tags.get(TAG))
                self._recorder.rename(trace, old_request_id)
                self._current.set((event.span_id, trace))
            return
        if current is None:
            return
        span_id, trace = current
        if isinstance(event, RetrievalEndEvent):
            for position, scored in enumerate(event.nodes, start=1):
                node = scored.node
                trace.add_passage(
                    passage_id=node.node_id,
                    text=node.get_content(metadata_mode=MetadataMode.NONE),
                    score=scored.score,
                    rank=position,
                    metadata=node.metadata,
                )
        elif isinstance(event, SynthesizeEndEvent):
            trace.draft = _response_text(event.response)
        elif isinstance(event, QueryEndEvent) and event.span_id == span_id:
            trace.answer = _response_text(event.response)
            self._recorder.finish(trace)
        elif isinstance(event, SpanDropEvent) and event.span_id == span_id:
            trace.finished = True
            self._recorder.drop(trace, f"the query failed ({event.err_str[:200]})")
