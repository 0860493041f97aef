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

_TOPICS = {
    "it-support": [
        ("reset MFA", "Open Settings > Security and choose Reset multi-factor authentication.",
         "To reset multi-factor authentication, open Settings > Security and choose Reset multi-factor "
         "authentication. You will be asked to sign in again."),
        ("connect to the VPN", "Install the client from the portal and sign in with your badge number.",
         "The VPN client is installed from the self-service portal. Sign in with your badge number and "
         "the one-time code."),
        ("request a new laptop", "File a hardware request in the service desk under Devices.",
         "Laptops are replaced every four years. File a hardware request in the service desk under "
         "Devices; approval by your manager is required."),
        ("recover a deleted file", "Deleted files stay in the recycle bin of the share for 30 days.",
         "Files deleted from a network share stay in the share's recycle bin for 30 days and can be "
         "restored by the owner."),
        ("change my password", "Use the password page of the portal; passwords expire every 90 days.",
         "Passwords expire every 90 days. Use the password page of the portal to change yours before "
         "it expires."),
    ],
    "hr-policy": [
        ("carry over holiday", "Up to five unused days carry over to the next year.",
         "Up to five unused holiday days carry over to the next calendar year and must be used by "
         "March 31."),
        ("claim travel expenses", "Submit receipts in the expenses tool within 60 days.",
         "Travel expenses are reimbursed when receipts are submitted in the expenses tool within 60 "
         "days of the trip."),
        ("take parental leave", "Parental leave is 16 weeks at full pay.",
         "Employees are entitled to 16 weeks of parental leave at full pay, to be taken within the "
         "first year."),
        ("work from abroad", "Working abroad needs approval for stays over 20 days.",
         "Working from another country for more than 20 days a year needs approval from HR and "
         "your manager."),
    ],
}
_FILLER = (
    "This article is maintained by the service owners and reviewed every quarter. ",
    "Related articles are listed at the end of this page. ",
    "If the steps above do not work, contact the service desk. ",
)
_PHRASINGS = ("How do I {t}?", "how to {t}", "Can I {t}?", "What is the process to {t}", "{t} — help")


def demo_records(route: str, count: int, *, seed: int = 7, start: datetime | None = None,
                 days: int = 14, passages_per_decision: int = 5, cutoff: float = 0.7,
                 prefix: str = "demo", embed: bool = False) -> Iterator[dict]:
    """`embed` adds a `question_embedding` (hashed_embedding of the question), as an integrator
    sending its retriever's query vector would; it draws nothing from the generator's randomness."""
    rng = random.Random(f"{route}:{seed}")
    topics = _TOPICS.get(route) or _TOPICS["it-support"]
    start = start or datetime.now(UTC).replace(microsecond=0) - timedelta(days=days)
    for n in range(count):
        topic, claim, passage_text = rng.choice(topics)
        answerable = rng.random() < 0.8
        score = rng.betavariate(9, 1.3) if answerable else rng.betavariate(2, 4)
        score = round(score, 4)
        outcome = "refused" if score < cutoff else "served"
        passages = []
        for rank in range(1, passages_per_decision + 1):
            if rank == 1 and answerable:
                text = passage_text + " " + rng.choice(_FILLER)
                pid = f"kb/{topic.replace(' ', '-')}#{rng.randint(1, 3)}"
            else:
                other = rng.choice(topics)
                text = other[2] + " " + rng.choice(_FILLER) + rng.choice(_FILLER)
                pid = f"kb/{other[0].replace(' ', '-')}#{rng.randint(1, 6)}"
            passages.append({"id": pid, "text": text, "rank": rank,
                             "retrieval_score": round(max(0.0, 0.95 - 0.08 * rank - rng.random() * 0.1), 3),
                             "source": "knowledge-base", "uri": f"https://intranet.example/{pid}"})
        record = {
            "request_id": f"{prefix}-{route}-{seed}-{n:07d}",
            "route": route,
            "occurred_at": (start + timedelta(seconds=rng.uniform(0, days * 86400))).isoformat(),
            "question": rng.choice(_PHRASINGS).format(t=topic),
            "claim": claim if answerable else f"I believe you can {topic} from the main menu.",
            "gate": {"name": "entailment", "score": score, "cutoff": cutoff},
            "outcome": outcome,
            "served_answer": None if outcome == "refused" else claim,
            "passages": passages,
            "versions": {"model": rng.choice(["gen-2026-10", "gen-2026-11"]), "retriever": "hybrid-3",
                         "corpus": "snap-2026-11-01", "gate": "nli-4"},
            "segments": {"query_type": rng.choice(["how-to", "policy", "troubleshooting"]),
                         "language": rng.choice(["en", "en", "en", "de"])},
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
_GAP_PHRASINGS = ("How do I {t}?", "how to {t}", "Can I {t}?", "{t} - is that possible?", "Question: {t}",
                  "Who can tell me how to {t}?", "{t}, please help")
_GAP_TAILS = ("", " today", " this week", " as a contractor", " from home", " next month")


def gap_records(route: str, count: int, *, seed: int = 7, start: datetime | None = None, days: int = 14,
                cutoff: float = 0.7, prefix: str = "demo-gap", embed: bool = False) -> Iterator[dict]:
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
            passages.append({"id": pid, "text": other[2] + " " + rng.choice(_FILLER), "rank": rank,
                             "retrieval_score": round(0.5 - 0.08 * rank, 3), "source": "knowledge-base",
                             "uri": f"https://intranet.example/{pid}"})
        record = {
            "request_id": f"{prefix}-{route}-{seed}-{n:07d}",
            "route": route,
            "occurred_at": (start + timedelta(seconds=rng.uniform(0, days * 86400))).isoformat(),
            "question": question,
            "claim": f"Perhaps you could {topic} by asking your manager.",
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
