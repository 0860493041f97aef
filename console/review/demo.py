"""Synthetic but plausible decision records in the API's shape.

Used by `load_demo`, the benchmarks and tests. Deterministic for a given seed. Scores follow the
pattern a real gate shows: answers that would grade correct tend to score high, wrong ones low,
with overlap in the middle — which is what makes the cutoff a trade-off.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np

from console.shadow.pipelines import PipelinePassage, PipelineRequest, ReferencePipeline

# The demo's one answer writer: served answers, refused claims and (on a route with the reference
# pipeline) shadow answers are all its output, so their form says nothing about the gate's decision.
_WRITER = ReferencePipeline()

# Each topic: (topic, its passage). The passage's first sentence answers the topic's question and is
# the only sentence of any passage sharing a word (beyond stopwords) with questions about it, so the
# extractive writer picks that sentence when the topic's passage is shown and the top passage's
# first sentence (a wrong answer) when it is not.
_TOPICS = {
    "it-support": [
        (
            "reset MFA",
            "To reset MFA, open Settings > Security and choose Reset multi-factor authentication. You will be "
            "asked to sign in again.",
        ),
        (
            "connect to the VPN",
            "To connect to the VPN, install the client from the self-service portal and sign in with your badge "
            "number. The one-time code arrives by text message.",
        ),
        (
            "request a new laptop",
            "To request a new laptop, open a hardware ticket in the service desk under Devices. Approval by your "
            "manager is required.",
        ),
        (
            "recover a deleted file",
            "To recover a deleted file, restore it from the share's recycle bin within 30 days. Only the owner "
            "of the share can restore items.",
        ),
        (
            "change my password",
            "To change your password, use the password page of the portal before it expires. Passwords expire "
            "every 90 days.",
        ),
    ],
    "hr-policy": [
        (
            "carry over holiday",
            "Up to five unused holiday days carry over to the next calendar year. They must be used by March 31.",
        ),
        (
            "claim travel expenses",
            "To claim travel expenses, submit the receipts in the expenses tool within 60 days of the trip. "
            "Reimbursement follows with the next salary.",
        ),
        (
            "take parental leave",
            "Employees take parental leave of 16 weeks at full pay within the first year. HR confirms the dates "
            "in writing.",
        ),
        (
            "work from abroad",
            "To work from abroad for more than 20 days a year, ask HR and your manager for approval. Shorter "
            "stays need no approval.",
        ),
    ],
}
_FILLER = (
    "This article is maintained by the service owners and reviewed every quarter. ",
    "Related articles are listed at the end of this page. ",
    "If the steps above fail, contact the service desk. ",
)
_PHRASINGS = ("How do I {t}?", "how to {t}", "Can I {t}?", "What is the process to {t}", "{t} — help")


def _first_sentence(passage: str) -> str:
    return passage.split(". ", 1)[0].rstrip(".") + "."


def _topics(route: str) -> list[tuple[str, str]]:
    return _TOPICS.get(route) or _TOPICS["it-support"]


def demo_answer_is_correct(record: dict) -> bool:
    """Whether a demo record's claim answers its question: it is the first sentence of the passage about
    the question's topic (the demo's questions each name one topic)."""
    for topic, passage in _topics(record["route"]):
        if topic in record["question"]:
            return record["claim"] == _first_sentence(passage)
    return False


def demo_records(
    route: str,
    count: int,
    *,
    seed: int = 7,
    start: datetime | None = None,
    days: int = 14,
    passages_per_decision: int = 5,
    cutoff: float = 0.7,
    prefix: str = "demo",
    embed: bool = False,
) -> Iterator[dict]:
    """Decision records of one route. Served answers and refused claims are written by the built-in
    extractive pipeline (`ReferencePipeline`, the reference shadow pipeline of the demo's IT support
    route) from the record's question and passages, so a grader cannot tell a refused item's answer
    from a served one by its form. The gate score follows whether the topic's passage was retrieved.
    `embed` adds a `question_embedding` (hashed_embedding of the question), as an integrator sending
    its retriever's query vector would; it draws nothing from the generator's randomness.
    """
    rng = random.Random(f"{route}:{seed}")
    topics = _topics(route)
    start = start or datetime.now(UTC).replace(microsecond=0) - timedelta(days=days)
    for n in range(count):
        topic, passage_text = rng.choice(topics)
        answerable = rng.random() < 0.8
        score = rng.betavariate(9, 1.3) if answerable else rng.betavariate(2, 4)
        score = round(score, 4)
        outcome = "refused" if score < cutoff else "served"
        others = [t for t in topics if t[0] != topic]
        shown = [
            (topic, passage_text) if rank == 1 and answerable else rng.choice(others)
            for rank in range(1, passages_per_decision + 1)
        ]
        passages = []
        for rank, (shown_topic, text) in enumerate(shown, start=1):
            filler = rng.choice(_FILLER) if rank == 1 and answerable else rng.choice(_FILLER) + rng.choice(_FILLER)
            pid = f"kb/{shown_topic.replace(' ', '-')}#{rng.randint(1, 3 if rank == 1 and answerable else 6)}"
            passages.append(
                {
                    "id": pid,
                    "text": text + " " + filler,
                    "rank": rank,
                    "retrieval_score": round(max(0.0, 0.95 - 0.08 * rank - rng.random() * 0.1), 3),
                    "source": "knowledge-base",
                    "uri": f"https://intranet.example/{pid}",
                }
            )
        occurred_at = (start + timedelta(seconds=rng.uniform(0, days * 86400))).isoformat()
        question = rng.choice(_PHRASINGS).format(t=topic)
        request_id = f"{prefix}-{route}-{seed}-{n:07d}"
        answer = _WRITER.run(
            PipelineRequest(request_id, question, tuple(PipelinePassage(p["id"], p["text"]) for p in passages))
        )
        record = {
            "request_id": request_id,
            "route": route,
            "occurred_at": occurred_at,
            "question": question,
            "claim": answer,
            "gate": {"name": "entailment", "score": score, "cutoff": cutoff},
            "outcome": outcome,
            "served_answer": None if outcome == "refused" else answer,
            "passages": passages,
            "versions": {
                "model": rng.choice(["gen-2026-10", "gen-2026-11"]),
                "retriever": "hybrid-3",
                "corpus": "snap-2026-11-01",
                "gate": "nli-4",
            },
            "segments": {
                "query_type": rng.choice(["how-to", "policy", "troubleshooting"]),
                "language": rng.choice(["en", "en", "en", "de"]),
            },
        }
        if embed:
            record["question_embedding"] = hashed_embedding(record["question"])
        yield record


# Two topics per route that the demo corpus does not cover: their questions retrieve only
# unrelated passages, so the verifier finds no supporting passage and /gaps/ ranks them first.
_GAPS = {
    "it-support": ["get into the building after hours with my badge", "install the printer driver on Linux"],
    "hr-policy": ["pension contributions when I work part-time", "bring my dog to the office"],
}
_GAP_PHRASINGS = (
    "How do I {t}?",
    "how to {t}",
    "Can I {t}?",
    "{t} - is that possible?",
    "Question: {t}",
    "Who can tell me how to {t}?",
    "{t}, please help",
)
_GAP_TAILS = ("", " today", " this week", " as a contractor", " from home", " next month")


def gap_records(
    route: str,
    count: int,
    *,
    seed: int = 7,
    start: datetime | None = None,
    days: int = 14,
    cutoff: float = 0.7,
    prefix: str = "demo-gap",
    embed: bool = False,
) -> Iterator[dict]:
    """`count` refused questions on the route's uncovered topics, half on each."""
    rng = random.Random(f"gaps:{route}:{seed}")
    start = start or datetime.now(UTC).replace(microsecond=0) - timedelta(days=days)
    corpus = _TOPICS.get(route) or _TOPICS["it-support"]
    topics = _GAPS.get(route) or _GAPS["it-support"]
    for n in range(count):
        topic = topics[n % len(topics)]
        question = rng.choice(_GAP_PHRASINGS).format(t=topic) + rng.choice(_GAP_TAILS)
        passages = []
        for rank in range(1, 4):
            other = rng.choice(corpus)
            pid = f"kb/{other[0].replace(' ', '-')}#{rng.randint(1, 6)}"
            passages.append(
                {
                    "id": pid,
                    "text": other[1] + " " + rng.choice(_FILLER),
                    "rank": rank,
                    "retrieval_score": round(0.5 - 0.08 * rank, 3),
                    "source": "knowledge-base",
                    "uri": f"https://intranet.example/{pid}",
                }
            )
        record = {
            "request_id": f"{prefix}-{route}-{seed}-{n:07d}",
            "route": route,
            "occurred_at": (start + timedelta(seconds=rng.uniform(0, days * 86400))).isoformat(),
            "question": question,
            # A sentence in the form of every other demo answer, from a passage that was not retrieved:
            # the generator answered from elsewhere, so no logged passage supports it.
            "claim": _unretrieved_sentence(corpus, passages, rng),
            "gate": {"name": "entailment", "score": round(rng.uniform(0.05, 0.4), 4), "cutoff": cutoff},
            "outcome": "refused",
            "served_answer": None,
            "passages": passages,
            "versions": {"model": "gen-2026-11", "retriever": "hybrid-3", "corpus": "snap-2026-11-01", "gate": "nli-4"},
            "segments": {"query_type": "policy", "language": "en"},
        }
        if embed:
            record["question_embedding"] = hashed_embedding(question)
        yield record


def _unretrieved_sentence(corpus, passages: list[dict], rng: random.Random) -> str:
    shown = " ".join(p["text"] for p in passages)
    candidates = [text.split(". ")[0].rstrip(".") + "." for _, text in corpus if text not in shown]
    return rng.choice(candidates or [corpus[0][1]])


def hashed_embedding(text: str, dimension: int = 64) -> list[float]:
    """A deterministic stand-in for a retriever's query vector: each lower-cased word maps, through
    its SHA-256, to a fixed random direction; the question is the normalised sum. Questions sharing
    most words are near; it knows nothing of meaning (the demo needs no model weights)."""
    total = np.zeros(dimension)
    for word in re.findall(r"\w+", text.lower()):
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
        total += np.random.default_rng(seed).normal(size=dimension)
    norm = np.linalg.norm(total)
    return [round(float(x), 6) for x in (total / norm if norm else total)]
