"""What the framework handlers share: one run of a retrieval-augmented chain as it is collected
(question, passages, draft and answer, gate), the gate's outcome, and the one `record()` per run.

Nothing here imports a framework, so the core client stays free of them; `langchain.py` and
`llamaindex.py` only translate their framework's events into a `Trace`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

logger = logging.getLogger("abstention_console.integrations")

# The key under which a run carries its own settings: LangChain's `config["metadata"]`, LlamaIndex's
# `instrument_tags(...)`. Its value is a dict with any of request_id, route, gate, segments, versions.
TAG = "abstention_console"
OUTCOMES = ("refused", "served", "served_with_evidence")
Cutoff = float | Callable[[str], float] | None


class Recording(Protocol):
    def record(self, decision: Mapping[str, Any]) -> None: ...


def _number(value: Any) -> float | None:
    """A finite float from any number type a framework hands out (numpy's included), else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


@dataclass
class Trace:
    """One top-level run: what the console's ingest record is made of, filled as events arrive."""

    request_id: str
    occurred_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    question: str | None = None
    retrieval_query: str | None = None  # the question as the retriever got it, if the run's input had none
    passages: list[dict[str, Any]] = field(default_factory=list)
    draft: str | None = None  # the model's last output: the text the gate scores unless a claim is given
    answer: str | None = None  # the run's final output
    claim: str | None = None
    gate: dict[str, Any] | None = None
    route: str | None = None
    versions: dict[str, str] | None = None
    segments: dict[str, Any] | None = None
    finished: bool = False

    def configure(self, options: Any) -> None:
        """Apply a run's own settings (the TAG dict of its metadata or instrument tags)."""
        if not isinstance(options, Mapping):
            return
        if _text(options.get("request_id")):
            self.request_id = options["request_id"]
        if _text(options.get("route")):
            self.route = options["route"]
        if isinstance(options.get("gate"), Mapping):
            self.gate = dict(options["gate"])
        for name in ("versions", "segments"):
            if isinstance(options.get(name), Mapping):
                setattr(self, name, dict(options[name]))

    def add_passage(
        self,
        *,
        passage_id: Any,
        text: Any,
        score: Any,
        rank: Any,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """One retrieved chunk. Ranks stay unique within the run (the console refuses a repeated
        rank): a retriever's own rank is kept when it is free, else the next free one is taken, so
        a second retrieval in the same run ranks after the first."""
        text = text if isinstance(text, str) else str(text or "")
        metadata = metadata or {}
        taken = {p["rank"] for p in self.passages}
        if not (isinstance(rank, int) and not isinstance(rank, bool) and rank >= 1 and rank not in taken):
            rank = len(self.passages) + 1
            while rank in taken:
                rank += 1
        if not _text(passage_id if isinstance(passage_id, str) else None):
            # A chunk without an id of its own is named by its text, so the same chunk gets the same id.
            passage_id = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]
        passage: dict[str, Any] = {"id": passage_id, "text": text, "rank": rank}
        score = _number(score)
        if score is not None:
            passage["retrieval_score"] = score
        source = metadata.get("source")
        if _text(source) and len(source) <= 200:
            passage["source"] = source
        uri = metadata.get("uri") or metadata.get("url")
        if _text(uri):
            passage["uri"] = uri
        self.passages.append(passage)


class Recorder:
    """Turns finished traces into ingest records and hands each to `console.record()` once.

    A trace finishes when its run ends; it is recorded then if its gate is known (given in the
    run's settings, in the run's output, or by `gate()` during the run), else it waits for
    `gate()`: the gate usually scores the draft after the chain has produced it. At most
    `max_waiting` traces wait; the oldest is dropped (and logged) beyond that.
    """

    def __init__(
        self,
        console: Recording,
        *,
        route: str,
        gate_name: str,
        cutoff: Cutoff,
        versions: Mapping[str, str] | None,
        segments: Mapping[str, Any] | None,
        max_waiting: int,
    ) -> None:
        if not _text(route):
            raise ValueError("route is the console's route slug, e.g. 'it-support'")
        self.console = console
        self.route = route
        self.gate_name = gate_name
        self.cutoff = cutoff
        self.versions = dict(versions or {})
        self.segments = dict(segments or {})
        self.max_waiting = max_waiting
        self._lock = threading.Lock()
        self._running: dict[str, Trace] = {}
        self._waiting: OrderedDict[str, Trace] = OrderedDict()

    def start(self, request_id: str | None = None) -> Trace:
        trace = Trace(request_id=request_id or str(uuid.uuid4()))
        with self._lock:
            self._running[trace.request_id] = trace
        return trace

    def rename(self, trace: Trace, old_request_id: str) -> None:
        """Keep the index right after a run's settings changed its request_id."""
        with self._lock:
            if self._running.get(old_request_id) is trace:
                del self._running[old_request_id]
                self._running[trace.request_id] = trace

    def drop(self, trace: Trace, reason: str) -> None:
        with self._lock:
            if self._running.get(trace.request_id) is trace:
                del self._running[trace.request_id]
        logger.info("run %s not recorded: %s", trace.request_id, reason)

    def finish(self, trace: Trace) -> None:
        """The run is over: record it now, or keep it until its gate is given."""
        with self._lock:
            if self._running.get(trace.request_id) is trace:
                del self._running[trace.request_id]
            trace.finished = True
            if trace.gate is None:
                self._waiting[trace.request_id] = trace
                while len(self._waiting) > self.max_waiting:
                    _, dropped = self._waiting.popitem(last=False)
                    logger.warning("run %s not recorded: no gate was given for it", dropped.request_id)
                return
        self._record(trace)

    def gate(
        self,
        *,
        score: float,
        cutoff: float | None = None,
        outcome: str | None = None,
        band_lower: float | None = None,
        name: str | None = None,
        request_id: str | None = None,
        answer: str | None = None,
    ) -> str | None:
        """Attach the gate's decision to a run (by `request_id`; else the last run that ended without
        one, else the last one still running) and record it once it has ended. Returns the run's
        request_id, or None (logged) when there is no such run: never raises on the answering path."""
        try:
            with self._lock:
                trace = self._find(request_id)
                if trace is None:
                    logger.error("gate() for %s: no such run waiting for its gate", request_id or "the last run")
                    return None
                trace.gate = {"score": score, "cutoff": cutoff, "outcome": outcome, "band_lower": band_lower}
                if name is not None:
                    trace.gate["name"] = name
                if answer is not None:
                    trace.answer = answer
                ready = trace.finished and self._waiting.pop(trace.request_id, None) is trace
            if ready:
                self._record(trace)
            return trace.request_id
        except Exception:
            logger.exception("could not attach the gate to run %s", request_id)
            return None

    def _find(self, request_id: str | None) -> Trace | None:
        if request_id is not None:
            return self._waiting.get(request_id) or self._running.get(request_id)
        if self._waiting:
            return next(reversed(self._waiting.values()))
        if self._running:
            return next(reversed(self._running.values()))
        return None

    def decision(self, trace: Trace) -> dict[str, Any] | None:
        """The ingest record of a finished trace, or None (logged) when it cannot make one."""
        route = trace.route or self.route
        question = _text(trace.question) or _text(trace.retrieval_query)
        claim = _text(trace.claim) or _text(trace.draft) or _text(trace.answer)
        gate = trace.gate or {}
        score = _number(gate.get("score"))
        cutoff = _number(gate.get("cutoff"))
        if cutoff is None and self.cutoff is not None:
            cutoff = _number(self.cutoff(route) if callable(self.cutoff) else self.cutoff)
        problems = [
            what
            for what, missing in (
                ("question", question is None),
                ("answer", claim is None),
                ("finite gate score", score is None),
                ("cutoff (give it to gate() or the handler)", cutoff is None),
            )
            if missing
        ]
        if problems:
            logger.error("run %s not recorded: it has no %s", trace.request_id, ", no ".join(problems))
            return None
        outcome = gate.get("outcome")
        if outcome is None:
            band_lower = _number(gate.get("band_lower"))
            if score >= cutoff:  # the console's tie policy: served when score >= cutoff
                outcome = "served"
            elif band_lower is not None and score >= band_lower:
                outcome = "served_with_evidence"
            else:
                outcome = "refused"
        if outcome not in OUTCOMES:
            logger.error("run %s not recorded: outcome %r is not one of %s", trace.request_id, outcome, OUTCOMES)
            return None
        record: dict[str, Any] = {
            "request_id": trace.request_id,
            "route": route,
            "occurred_at": trace.occurred_at,
            "question": question,
            "claim": claim,
            "gate": {"name": gate.get("name") or self.gate_name, "score": score, "cutoff": cutoff},
            "outcome": outcome,
            "served_answer": None if outcome == "refused" else (_text(trace.answer) or claim),
            "passages": trace.passages,
            "versions": {**self.versions, **(trace.versions or {})},
        }
        segments = {**self.segments, **(trace.segments or {})}
        if segments:
            record["segments"] = segments
        return record

    def _record(self, trace: Trace) -> None:
        try:
            record = self.decision(trace)
            if record is not None:
                self.console.record(record)
        except Exception:
            logger.exception("run %s not recorded", trace.request_id)


class Gating:
    """`gate()` for a handler that keeps its Recorder as `recorder`."""

    def gate(
        self,
        *,
        score: float,
        cutoff: float | None = None,
        outcome: str | None = None,
        band_lower: float | None = None,
        name: str | None = None,
        request_id: str | None = None,
        answer: str | None = None,
    ) -> str | None:
        """The gate's decision for a run: `score` against `cutoff` (default: the handler's `cutoff=`),
        served when score >= cutoff, `served_with_evidence` from `band_lower` up, else refused,
        unless `outcome` says otherwise. `request_id` names the run (see the handler's module);
        without it, the last run that ended without a gate, else the last one still running.
        `answer` replaces the answer taken from the run (a streamed one, say). The run is recorded
        as soon as it has ended. Returns its request_id, or None (logged) when no run matches."""
        recorder: Recorder = self.recorder  # type: ignore[attr-defined]
        return recorder.gate(
            score=score,
            cutoff=cutoff,
            outcome=outcome,
            band_lower=band_lower,
            name=name,
            request_id=request_id,
            answer=answer,
        )


def never_raises(method: Callable[..., Any]) -> Callable[..., Any]:
    """A framework callback that logs its own errors instead of raising them into the chain (both
    frameworks would swallow them; LlamaIndex without a word)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            method(*args, **kwargs)
        except Exception:
            logger.exception("%s failed; the run goes on", method.__name__)

    return wrapper
