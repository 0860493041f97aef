"""Validation of label records for `POST /api/v1/labels`: every problem, by index and field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.core.validation import FieldErrors, text_field
from console.ledger.validation import MAX_ID, MAX_LABEL
from grading.models import ClaimVerdict

LABEL_FIELDS = {"route", "request_id", "verdict", "source", "claims"}
LABEL_VERDICTS = ("correct", "incorrect")
CLAIM_FIELDS = {"index", "verdict"}
CLAIM_VERDICTS = tuple(ClaimVerdict.values)
# A decision carries at most 64 claims (console.ledger.models.MAX_CLAIMS); its claim units when it
# sent none are fewer than its 20,000 characters. The list is bounded before anything is read.
MAX_CLAIM_LABELS = 10_000


@dataclass(frozen=True)
class LabelInput:
    index: int
    route: str
    request_id: str
    verdict: str  # "" for the claims form
    source: str
    # The claims form of a long answer: (claim index, verdict) in index order; None for a verdict.
    claims: tuple[tuple[int, str], ...] | None = None

    @property
    def claims_supported(self) -> int | None:
        return None if self.claims is None else sum(v == ClaimVerdict.SUPPORTED for _, v in self.claims)

    @property
    def claims_verifiable(self) -> int | None:
        return None if self.claims is None else sum(v != ClaimVerdict.UNVERIFIABLE for _, v in self.claims)

    @property
    def correct(self) -> bool:
        """A verdict as sent; for claims, whether the answer is fully supported (every verifiable
        claim supported, and at least one verifiable)."""
        if self.claims is None:
            return self.verdict == "correct"
        return self.claims_verifiable > 0 and self.claims_supported == self.claims_verifiable


def _claim_verdicts(errors: FieldErrors, index: int, value: Any) -> tuple[tuple[int, str], ...] | None:
    if not isinstance(value, list) or not 0 < len(value) <= MAX_CLAIM_LABELS:
        errors.add(index, "claims", f"must be a list of 1 to {MAX_CLAIM_LABELS} {{index, verdict}}")
        return None
    before = len(errors.items)
    verdicts: dict[int, str] = {}
    for position, raw in enumerate(value):
        path = f"claims[{position}]"
        if not isinstance(raw, dict):
            errors.add(index, path, "must be an object {index, verdict}")
            continue
        for unknown in sorted(raw.keys() - CLAIM_FIELDS):
            errors.add(index, f"{path}.{unknown}", "is not a known field", "unknown_field")
        claim_index = raw.get("index")
        if isinstance(claim_index, bool) or not isinstance(claim_index, int) or not 0 <= claim_index < MAX_CLAIM_LABELS:
            errors.add(index, f"{path}.index", "must be a claim's index, a whole number from 0")
            claim_index = None
        elif claim_index in verdicts:
            errors.add(index, f"{path}.index", f"claim {claim_index} has a verdict already", "duplicate_claim")
        verdict = raw.get("verdict")
        if verdict not in CLAIM_VERDICTS:
            errors.add(index, f"{path}.verdict", f"must be one of {', '.join(CLAIM_VERDICTS)}")
        elif claim_index is not None:
            verdicts.setdefault(claim_index, verdict)
    if len(errors.items) != before:
        return None
    return tuple(sorted(verdicts.items()))


def validate_labels(records: list[Any]) -> tuple[list[LabelInput], list[dict[str, Any]]]:
    """Parse the batch; return the good items and one error per problem (nothing is dropped silently)."""
    errors = FieldErrors()
    items: list[LabelInput] = []
    for index, raw in enumerate(records):
        if not isinstance(raw, dict):
            errors.add(index, "", "must be an object")
            continue
        before = len(errors.items)
        for unknown in sorted(raw.keys() - LABEL_FIELDS):
            errors.add(index, unknown, "is not a known field")
        route = text_field(errors, index, "route", raw.get("route"), max_len=64)
        request_id = text_field(errors, index, "request_id", raw.get("request_id"), max_len=MAX_ID)
        source = text_field(errors, index, "source", raw.get("source"), max_len=MAX_LABEL)
        verdict, claims = raw.get("verdict"), None
        if "claims" in raw:
            # A long answer's label: a verdict per claim, from which the answer's verdict follows.
            if verdict is not None:
                errors.add(index, "verdict", "must be left out when claims are given: it follows from them")
            claims = _claim_verdicts(errors, index, raw.get("claims"))
            verdict = ""
        elif verdict not in LABEL_VERDICTS:
            errors.add(index, "verdict", "must be 'correct' or 'incorrect' (or give claims)")
        if len(errors.items) == before:
            items.append(LabelInput(index, route, request_id, verdict, source, claims))
    return items, errors.items
