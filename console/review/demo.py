"""Synthetic but plausible decision records in the API's shape.

Used by `load_demo`, the benchmarks and tests. Deterministic for a given seed. Scores follow the
pattern a real gate shows: answers that would grade correct tend to score high, wrong ones low,
with overlap in the middle — which is what makes the cutoff a trade-off. Claims are supported by
the passages word for word, partly or not at all, in the mix a real gate produces (see
`_ANSWERABLE` and the note above it).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import numpy as np

from console.shadow.pipelines import PipelinePassage, PipelineRequest, ReferencePipeline
from console.verification.spans import split_claim_units

# The demo's generator starts from the extractive writer's answer (the reference shadow pipeline's,
# which both demo routes re-run their refusals with) and rewords some of it (see below); its gate
# refuses every rewording, so the served answers graders see beside shadow answers are written the
# same way.
_WRITER = ReferencePipeline()


class Topic(NamedTuple):
    """One question topic of a route's corpus.

    `passage` answers it in two sentences, each sharing a word (beyond stopwords) with every question
    on the topic. Topics come in pairs (`near_miss` names the other): each sentence of a topic's
    passage also shares exactly one word with its pair's questions, as articles on neighbouring
    subjects do, so a lexical retriever that misses a topic's passage returns its pair's, and the
    extractive writer then answers with the pair's two sentences: a real answer to another
    question, never text written only to be wrong. No other passage of the route shares a word with
    the topic's questions. `reworded` says each sentence of the passage another way (same meaning,
    other words, about as long), as a generator writes when it does not copy.
    """

    name: str
    passage: str
    near_miss: str
    reworded: tuple[str, str]


_TOPICS = {
    "it-support": [
        Topic(
            "reset MFA",
            "To reset MFA, open Settings > Security and choose Reset multi-factor authentication; your password "
            "stays as it is. The MFA reset signs you out of every device, as changing a password does.",
            "change my password",
            (
                "Go to Settings > Security and select Reset multi-factor authentication; the sign-in secret you "
                "use is kept.",
                "Afterwards you are signed out on all your devices, just as after a new login secret.",
            ),
        ),
        Topic(
            "change my password",
            "To change your password, use the password page of the portal before it expires; the page also links "
            "to the MFA page. A password expires every 90 days, while MFA does not.",
            "reset MFA",
            (
                "Use the portal's page for sign-in secrets before the current one runs out; it also links to "
                "the second-factor page.",
                "Each one lasts 90 days, whereas the second factor never lapses.",
            ),
        ),
        Topic(
            "connect to the VPN",
            "To connect to the VPN, install the client from the self-service portal and sign in with your badge "
            "number to reach each file share. The VPN asks for a one-time code by text message before any file opens.",
            "recover a deleted file",
            (
                "Get the client from the self-service portal, then log in with your badge number to reach the "
                "shared drives from outside.",
                "A one-time code is sent to your phone by text when you log in to the remote network.",
            ),
        ),
        Topic(
            "recover a deleted file",
            "To recover a deleted file, restore it from the share's recycle bin within 30 days, also over the "
            "VPN. Only the owner of the share can recover a file from its recycle bin, on site or over the VPN.",
            "connect to the VPN",
            (
                "Restore it from the recycle bin of the share, which keeps removed items for 30 days, from the "
                "office or from home.",
                "Only the share's owner is allowed to restore things from that bin.",
            ),
        ),
        Topic(
            "request a new laptop",
            "To request a new laptop, open a hardware ticket in the service desk under Devices. Your manager "
            "approves the laptop request before it ships.",
            "return an old laptop",
            (
                "Open a hardware ticket in the service desk, filed under the Devices category.",
                "Once your manager has approved it, the device is shipped to you.",
            ),
        ),
        Topic(
            "return an old laptop",
            "To return an old laptop, bring it to the walk-in desk on the ground floor with its charger. The "
            "walk-in desk wipes the laptop and gives you a receipt.",
            "request a new laptop",
            (
                "Bring the device and its charger to the walk-in desk on the ground floor.",
                "The desk erases its disk and hands you a receipt for it.",
            ),
        ),
    ],
    "hr-policy": [
        Topic(
            "carry over holiday",
            "Up to five unused holiday days carry over to the next calendar year, but parental days do not. "
            "Holiday days carried over must be used by March 31; leave not used by then lapses.",
            "take parental leave",
            (
                "At most five unused days of annual vacation move into the next calendar year, except days for "
                "new parents.",
                "Days moved this way must be taken by March 31, or they are lost.",
            ),
        ),
        Topic(
            "take parental leave",
            "Employees take parental leave of 16 weeks at full pay within the first year, on top of their holiday. "
            "Parental leave dates are confirmed by HR in writing, holiday included.",
            "carry over holiday",
            (
                "Parents get 16 weeks off at full pay in the child's first year, in addition to annual vacation.",
                "HR confirms the dates of the time off in writing, vacation days included.",
            ),
        ),
        Topic(
            "claim travel expenses",
            "To claim travel expenses, submit the receipts in the expenses tool within 60 days of the trip, also "
            "for trips abroad. Travel expenses are reimbursed with the next salary, wherever you work.",
            "work from abroad",
            (
                "Submit your receipts in the expenses tool no later than 60 days after the trip, in any country.",
                "The money is paid back with your next salary, whichever office you are based at.",
            ),
        ),
        Topic(
            "work from abroad",
            "To work from abroad for more than 20 days a year, ask HR and your manager for approval; travel there "
            "is not paid. Shorter stays abroad need no approval, and no expenses are refunded for them.",
            "claim travel expenses",
            (
                "Stays of more than 20 days a year outside the country need approval from HR and your manager, "
                "and the journey is at your cost.",
                "For fewer days no approval is needed, and nothing is paid back for them.",
            ),
        ),
    ],
}
_FILLER = (
    "This article is maintained by the service owners and reviewed every quarter. ",
    "Related articles are listed at the end of this page. ",
    "If the steps above fail, contact the service desk. ",
)
_PHRASINGS = ("How do I {t}?", "how to {t}", "Can I {t}?", "What is the process to {t}", "{t} — help")

# How the demo's generator writes a claim, and how the gate scores it. The verifier is exact (claim
# units found word for word, case aside), so a faithful rewording is "not found" though it means the
# same: the refusals list's support column reads support, not truth. The story of a real
# retrieval-augmented system, in the demo's terms:
# - The topic's passage was retrieved (80%): the generator copies its two sentences (79%), rewords
#   one of them (13%: partly supported) or both (8%: no supporting passage, yet right). The gate
#   scores a copy high and any rewording below the cutoff (an entailment model at this cutoff loses
#   paraphrases), so the gate's false abstentions are mostly rewordings of the right passage.
# - It was not (20%): the retriever returned the topic's near miss (its pair's passage). The
#   generator copies it (45%: fully supported, but it answers another question), mixes one of its
#   sentences with the answer from memory (35%: partly supported) or answers from memory alone
#   (20%: no supporting passage). The gate scores all of these low. Graded against the passages
#   shown (the guidelines' rule), only answers drawn from the topic's passage are correct.
# Why these proportions: what a gate serves is its evidence copied (the gate is there to make sure
# of that), while what it refuses mixes retrieval misses, partial evidence and answers it was too
# strict with, so the support column of the refusals list must show all three. What they give
# (600 decisions a route, cutoff 0.7): served answers all fully supported; refusals about 33% / 42%
# / 25% (full / partly / none) before the planted corpus gaps (all unsupported) and, on IT support,
# the model upgrade's refusals (mostly copies its lower scores pushed under the cutoff) join them.
# In the loaded demo (`load_demo --decisions 300`) each kind is 15-55% of a route's refusals, and
# served answers are at least 80% fully supported and at most 5% unsupported:
# tests/review/test_demo_story.py keeps it so.
# Why no rewording is served: graders read a refusal's shadow answer, which the demo's pipeline
# (the extractive writer) never rewords; a served answer reworded in the generator's own words was
# a style only served answers carried, and the blindness probe read it (0.60 on IT support, 0.62 on
# HR policy). docs/statistics.md, "Blindness probe", says what the probe reads now.
_ANSWERABLE = 0.8
_WHEN_RETRIEVED = (("copy", 0.79), ("reword_one", 0.13), ("reword_both", 0.08))
_WHEN_MISSED = (("copy_near_miss", 0.45), ("mixed", 0.35), ("memory", 0.20))
_SCORE = {"copy": (9, 1.3), "reword_one": (5, 2.5), "reword_both": (3, 3)}
_SCORE_MISSED = (2, 4)
_REWORDED = frozenset({"reword_one", "reword_both", "mixed", "memory"})  # a sentence in the generator's words


def _topics(route: str) -> list[Topic]:
    return _TOPICS.get(route) or _TOPICS["it-support"]


def _pick(rng: random.Random, choices: tuple[tuple[str, float], ...]) -> str:
    draw, total = rng.random(), 0.0
    for name, probability in choices:
        total += probability
        if draw < total:
            return name
    return choices[-1][0]


def _claim(topic: Topic, style: str, copied: str, rng: random.Random) -> str:
    """The generator's answer: the extractive writer's (`copied`), or the topic's sentences reworded."""
    first, second = topic.reworded
    if style in ("copy", "copy_near_miss"):
        return copied
    if style == "reword_one":
        units = split_claim_units(copied)
        which = rng.randrange(len(units))
        units[which] = topic.reworded[which]
        return " ".join(units)
    if style == "mixed":
        return f"{split_claim_units(copied)[0]} {second}"
    return f"{first} {second}"  # reword_both, memory


def demo_answer_is_correct(record: dict) -> bool:
    """Whether a demo record's claim is right for its question, graded against the passages shown:
    the topic's passage was retrieved and every unit of the claim is one of its sentences, copied or
    reworded (the demo's questions each name one topic)."""
    for topic in _topics(record["route"]):
        if topic.name in record["question"]:
            shown = any(p["text"].startswith(topic.passage) for p in record["passages"])
            allowed = {*split_claim_units(topic.passage), *topic.reworded}
            return shown and all(unit in allowed for unit in split_claim_units(record["claim"]))
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
    """Decision records of one route. The claim is the built-in extractive pipeline's answer
    (`ReferencePipeline`, the reference shadow pipeline of the demo's IT support route) from the
    record's question and passages, copied or partly or wholly reworded as described above; served
    answers are the claim. The gate score follows whether the topic's passage was retrieved and
    whether the claim was copied: one with a reworded sentence scores below `cutoff`, so every
    served answer is written as the extractive pipeline writes a refusal's shadow answer.
    `embed` adds a `question_embedding` (hashed_embedding of the question), as an integrator sending
    its retriever's query vector would; it draws nothing from the generator's randomness.
    """
    rng = random.Random(f"{route}:{seed}")
    topics = _topics(route)
    start = start or datetime.now(UTC).replace(microsecond=0) - timedelta(days=days)
    for n in range(count):
        topic = rng.choice(topics)
        answerable = rng.random() < _ANSWERABLE
        style = _pick(rng, _WHEN_RETRIEVED if answerable else _WHEN_MISSED)
        score = rng.betavariate(*(_SCORE[style] if answerable else _SCORE_MISSED))
        if style in _REWORDED:
            score *= cutoff - 0.001  # below the cutoff, as the note above _ANSWERABLE says why
        score = round(score, 4)
        outcome = "refused" if score < cutoff else "served"
        others = [t for t in topics if t.name != topic.name]
        near_miss = next(t for t in topics if t.name == topic.near_miss)
        top = (topic.name, topic.passage) if answerable else (near_miss.name, near_miss.passage)
        shown = [top] + [
            (other.name, other.passage) for other in (rng.choice(others) for _ in range(1, passages_per_decision))
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
        question = rng.choice(_PHRASINGS).format(t=topic.name)
        request_id = f"{prefix}-{route}-{seed}-{n:07d}"
        copied = _WRITER.run(
            PipelineRequest(request_id, question, tuple(PipelinePassage(p["id"], p["text"]) for p in passages))
        )
        answer = _claim(topic, style, copied, rng)
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
# What the retriever finds for them instead: a near miss sharing their words, as for a covered topic.
_GAP_DECOYS = {
    "get into the building after hours with my badge": "Badge photos are taken at the reception desk on the "
    "first floor every Monday. The building car park closes two hours after the last shift ends.",
    "install the printer driver on Linux": "The printer on each floor prints double-sided by default to save "
    "paper. Linux laptops receive security updates from the central update server every night.",
    "pension contributions when I work part-time": "Pension statements are sent by post every spring to your "
    "home address. Part-time contracts are drawn up by HR together with the hiring manager.",
    "bring my dog to the office": "A guide dog is welcome in every building of the company. Office plants are "
    "watered by the facilities team on Fridays.",
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
        near_miss = f"kb/{topic.split()[-1].lower()}-notes#{rng.randint(1, 6)}"
        shown = [(near_miss, _GAP_DECOYS[topic])]
        for _ in range(2):
            other = rng.choice(corpus)
            shown.append((f"kb/{other.name.replace(' ', '-')}#{rng.randint(1, 6)}", other.passage))
        passages = [
            {
                "id": pid,
                "text": text + " " + rng.choice(_FILLER),
                "rank": rank,
                "retrieval_score": round(0.5 - 0.08 * rank, 3),
                "source": "knowledge-base",
                "uri": f"https://intranet.example/{pid}",
            }
            for rank, (pid, text) in enumerate(shown, start=1)
        ]
        record = {
            "request_id": f"{prefix}-{route}-{seed}-{n:07d}",
            "route": route,
            "occurred_at": (start + timedelta(seconds=rng.uniform(0, days * 86400))).isoformat(),
            "question": question,
            # An answer in the form of every other demo answer, from a passage that was not retrieved:
            # the generator answered from elsewhere, so no logged passage supports it.
            "claim": _unretrieved_answer(corpus, passages, rng),
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


def _unretrieved_answer(corpus: list[Topic], passages: list[dict], rng: random.Random) -> str:
    """The two sentences of a topic passage that was not retrieved: an answer from elsewhere."""
    shown = " ".join(p["text"] for p in passages)
    candidates = [topic.passage for topic in corpus if topic.passage not in shown]
    return rng.choice(candidates or [corpus[0].passage])


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
