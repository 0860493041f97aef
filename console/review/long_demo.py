"""The demo's third route, Policy briefs: long answers, graded claim by claim (issue 31).

Each answer summarises a policy brief in 8 to 15 claims, each citing the passage it comes from, and
each supported by the passages with probability 0.94 (near the chapter's 0.95). The route's gate
scores the expected share of supported claims, E[S], and its harm model is all-or-nothing: the trap
of section 11.6 of the chapter behind the gate's economics ("80 % of what?"). Under independence
E[S] stays near 0.94 whatever the claim count n, while Pr(S = 1) = 0.94^n averages 0.496 over n = 8
to 15, so the operating-points page shows E[S] ~ 0.95 beside Pr(S = 1) ~ 0.5 at the same cutoff
(0.943 and 0.547 at the gate's cutoff with the default `--decisions`), and a policy draft on the
route carries the `functional_mismatch` warning. (At 0.95 the mean of 0.95^n is 0.558, and the
demo's draws read 0.60: more than "about a half".)

A supported claim is one of the cited passage's sentences, copied; an unsupported one changes its
figure, so the span verifier does not find it either. Claim verdicts come as a graded set imported
through the labels service, the path of the labels API.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from audit.services import Actor
from console.accounts.models import Route
from console.ledger import services
from console.ledger.validation import validate_batch

SLUG, NAME = "policy-briefs", "Policy briefs"
SETTINGS = {"answer_form": "long", "harm_model": "all_or_nothing", "gate_functional": "expected_support"}
CUTOFF = 0.85  # on the operating-points page's default grid, so its row shows without asking
MIN_CLAIMS, MAX_CLAIMS = 8, 15
# Most answers are written from their brief (per-claim support 0.94, a score near it); a few from a
# stale copy of it (per-claim support 0.6, a score near that, mostly refused).
_FAITHFUL = 0.9
_SUPPORT = {"faithful": 0.94, "stale": 0.6}
_SCORE = {"faithful": (60, 3), "stale": (6, 4)}  # beta parameters: means 0.952 and 0.6

_BRIEFS = ("remote work", "travel", "procurement", "data retention")
_SUBJECTS = (
    "permanent staff",
    "contractors",
    "team leads",
    "new starters",
    "part-time staff",
    "interns",
    "department heads",
    "the finance team",
)
_ACTIONS = (
    "must file a request",
    "receive written confirmation",
    "may appeal a decision",
    "have the rule reviewed",
)


def _facts(brief: str) -> list[tuple[str, str]]:
    """The brief's sentences and, for each, the same sentence with its figure changed."""
    facts = []
    for n in range(16):
        subject, action = _SUBJECTS[n % len(_SUBJECTS)], _ACTIONS[n % len(_ACTIONS)]
        days = 5 * (n + 2)
        stem = f"Under the {brief} policy, {subject} {action} within"
        facts.append((f"{stem} {days} days (section {n + 1}).", f"{stem} {days + 15} days (section {n + 1})."))
    return facts


def long_records(count: int, *, seed: int = 7, start: datetime | None = None, days: int = 14) -> Iterator[dict]:
    """`count` decisions of the route, each with its `claims` and, beside the record under the key
    `_verdicts`, the verdict of each claim (strip it before ingest)."""
    rng = random.Random(f"{SLUG}:{seed}")
    start = start or datetime.now(UTC).replace(microsecond=0) - timedelta(days=days)
    for n in range(count):
        brief = rng.choice(_BRIEFS)
        facts = _facts(brief)
        kind = "faithful" if rng.random() < _FAITHFUL else "stale"
        chosen = sorted(rng.sample(range(len(facts)), rng.randint(MIN_CLAIMS, MAX_CLAIMS)))
        supported = [rng.random() < _SUPPORT[kind] for _ in chosen]
        # The brief in four passages of four sentences each; a claim cites the passage holding its sentence.
        passages = [
            {
                "id": f"briefs/{brief.replace(' ', '-')}#{part + 1}",
                "text": " ".join(true for true, _ in facts[4 * part : 4 * part + 4]),
                "rank": part + 1,
                "retrieval_score": round(0.9 - 0.05 * part, 3),
                "source": "policy-briefs",
            }
            for part in range(4)
        ]
        claims = [
            {"text": facts[i][0] if ok else facts[i][1], "citations": [passages[i // 4]["id"]]}
            for i, ok in zip(chosen, supported, strict=True)
        ]
        score = round(rng.betavariate(*_SCORE[kind]), 4)
        outcome = "served" if score >= CUTOFF else "refused"
        answer = " ".join(c["text"] for c in claims)
        yield {
            "request_id": f"demo-{SLUG}-{seed}-{n:07d}",
            "route": SLUG,
            "occurred_at": (start + timedelta(seconds=rng.uniform(0, days * 86400))).isoformat(),
            "question": f"Summarise the {brief} policy for me",
            "claim": answer,
            "claims": claims,
            "gate": {"name": "support-estimator", "score": score, "cutoff": CUTOFF, "functional": "expected_support"},
            "outcome": outcome,
            "served_answer": answer if outcome == "served" else None,
            "passages": passages,
            "versions": {"model": "gen-2026-11", "retriever": "hybrid-3", "corpus": "briefs-2026-11", "gate": "sup-1"},
            "segments": {"query_type": "policy", "language": "en"},
            "_verdicts": ["supported" if ok else "unsupported" for ok in supported],
        }


def demo_long_route(*, actor: Actor, route: Route, count: int) -> tuple[int, list[dict[str, Any]]]:
    """Ingest `count` long answers on the route; the decisions created and their graded set (claim
    verdicts in the labels API's shape)."""
    records = list(long_records(count))
    graded = [
        {
            "route": SLUG,
            "request_id": r["request_id"],
            "source": "demo-graded-set",
            "claims": [{"index": i, "verdict": v} for i, v in enumerate(r.pop("_verdicts"))],
        }
        for r in records
    ]
    created = 0
    for first in range(0, len(records), 500):
        items, errors = validate_batch(records[first : first + 500])
        assert not errors, errors[:3]
        created += services.decision_ingest(actor=actor, items=items, routes={SLUG: route}).created
    return created, graded
