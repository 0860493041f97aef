"""Validation of label records for `POST /api/v1/labels`: every problem, by index and field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.core.validation import FieldErrors, text_field
from console.ledger.validation import MAX_ID, MAX_LABEL

LABEL_FIELDS = {"route", "request_id", "verdict", "source"}
LABEL_VERDICTS = ("correct", "incorrect")


@dataclass(frozen=True)
class LabelInput:
    index: int
    route: str
    request_id: str
    verdict: str
    source: str

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"


def validate_labels(records: list[Any]) -> tuple[list[LabelInput], list[dict[str, Any]]]:
    """Parse the batch; return the good items and one error per problem (nothing is dropped silently)."""
    errors = FieldErrors()
    items: list[LabelInput] = []
    for index, raw in enumerate(records):
        if not isinstance(raw, dict):
            errors.add(index, "", "must be an object")
            continue
        for unknown in sorted(raw.keys() - LABEL_FIELDS):
            errors.add(index, unknown, "is not a known field")
        route = text_field(errors, index, "route", raw.get("route"), max_len=64)
        request_id = text_field(errors, index, "request_id", raw.get("request_id"), max_len=MAX_ID)
        source = text_field(errors, index, "source", raw.get("source"), max_len=MAX_LABEL)
        verdict = raw.get("verdict")
        if verdict not in LABEL_VERDICTS:
            errors.add(index, "verdict", "must be 'correct' or 'incorrect'")
            verdict = None
        if None not in (route, request_id, source, verdict) and not raw.keys() - LABEL_FIELDS:
            items.append(LabelInput(index, route, request_id, verdict, source))
    return items, errors.items
