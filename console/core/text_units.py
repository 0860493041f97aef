"""Claim units: how a text is split into the sentences that are checked one by one.

Pure and dependency-free, on the ground floor so that every app may split an answer the same way:
the span verifier checks each unit, the ledger offers them as a long answer's claims when the
answering system sent none (`console.ledger.claims.answer_claims`).
"""

import re

_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")


def split_claim_units(claim: str) -> list[str]:
    """Split a long answer into claim units, each verified on its own.

    Rule: a unit ends at every line break (``str.splitlines``) and after ".", "!" or "?" that
    is followed by whitespace; units are stripped and empty ones dropped. Deliberately simple:
    abbreviations are not special-cased ("e.g. this" is two units), a stop without following
    whitespace does not split ("3.5", "example.com"), and neither does a stop followed by a
    closing quote or bracket.
    """
    units = []
    for line in claim.splitlines():
        units.extend(part.strip() for part in _SENTENCE_BREAK.split(line))
    return [unit for unit in units if unit]
