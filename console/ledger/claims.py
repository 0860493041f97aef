"""A long answer's claims, and the functional its gate score estimates (issue 31).

Pure reads of a decision and its route's answer settings, shared by grading (the claims a grader
marks), verification (the claims it checks) and the statistics.
"""

from __future__ import annotations

from console.core.text_units import split_claim_units
from console.ledger.models import Decision, RouteAnswerSettings


def answer_claims(decision: Decision) -> list[str]:
    """The answer's claims in order: the texts the answering system sent with the decision, else
    the span verifier's claim units of `decision.claim` (one per sentence or line)."""
    return claim_texts(decision.claims, decision.claim)


def claim_texts(claims: list[dict] | None, claim: str) -> list[str]:
    """`answer_claims` of a decision's two columns, for readers of raw rows (the span verifier)."""
    if claims:
        return [item["text"] for item in claims]
    return split_claim_units(claim)


def claim_citations(decision: Decision) -> list[list[str]]:
    """The passage ids each claim cites, in the order of `answer_claims`; empty lists when the
    claims came from the splitter or named no passage."""
    if decision.claims:
        return [list(claim.get("citations") or []) for claim in decision.claims]
    return [[] for _ in split_claim_units(decision.claim)]


def effective_functional(decision: Decision, settings: RouteAnswerSettings) -> str:
    """What the decision's gate score estimates: the decision's own `gate.functional`, else the
    route's setting; "" when neither says (unspecified)."""
    return decision.gate_functional or settings.gate_functional
