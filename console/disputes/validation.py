"""Reading a dispute from its JSON body or form; InvalidInput (400) with one detail per problem."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from console.core.errors import InvalidInput, detail
from console.core.validation import FieldErrors, text_field
from console.disputes.models import (
    KINDS_WITHOUT_EVIDENCE,
    MAX_NOTE,
    MAX_QUOTE,
    MAX_REASON,
    RESOLUTIONS,
    USER_KINDS,
)


@dataclass(frozen=True)
class DisputeInput:
    kind: str
    reason: str
    passage_id: int | None = None
    source_url: str = ""
    quote: str = ""
    contact: str = ""


def _raise(errors: FieldErrors) -> None:
    if errors.items:
        raise InvalidInput("The dispute is not valid.", details=errors.of_one_body())


def _unset_if_empty(value: Any) -> Any:
    """An empty string is as good as no value; anything else goes to the field's checks, so a list or
    a number is refused rather than read as nothing (as `value or None` did)."""
    return None if value == "" else value


def parse_dispute(data: Any) -> DisputeInput:
    if not isinstance(data, dict):
        raise InvalidInput(
            "The body must be a JSON object.", details=[detail(None, "invalid_body", "must be an object")]
        )
    errors = FieldErrors()
    kind = data.get("kind")
    if kind not in USER_KINDS:
        errors.add(0, "kind", f"must be one of {', '.join(USER_KINDS)}")
    reason = text_field(errors, 0, "reason", data.get("reason"), max_len=MAX_REASON)
    contact = text_field(errors, 0, "contact", _unset_if_empty(data.get("contact")), max_len=300, required=False) or ""
    evidence = data.get("evidence")
    passage_id, url, quote = None, "", ""
    if evidence is None:
        if kind in USER_KINDS and kind not in KINDS_WITHOUT_EVIDENCE:
            errors.add(0, "evidence", "is required for this kind: a quote from a logged passage or an outside source")
    elif not isinstance(evidence, dict):
        errors.add(0, "evidence", 'must be {"passage_id", "quote"}, {"url", "quote"} or null')
    else:
        quote = text_field(errors, 0, "evidence.quote", evidence.get("quote"), max_len=MAX_QUOTE) or ""
        if "passage_id" in evidence and "url" in evidence:
            errors.add(0, "evidence", "give either passage_id or url, not both")
        elif "passage_id" in evidence:
            value = evidence["passage_id"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                errors.add(0, "evidence.passage_id", "must be the id of one of the decision's passages")
            else:
                passage_id = value
        elif "url" in evidence:
            url = text_field(errors, 0, "evidence.url", evidence.get("url"), max_len=2000) or ""
            if url and urlsplit(url).scheme not in ("http", "https"):
                errors.add(0, "evidence.url", "must start with http:// or https://")
        else:
            errors.add(0, "evidence", "needs passage_id or url beside the quote")
    _raise(errors)
    return DisputeInput(kind=kind, reason=reason, passage_id=passage_id, source_url=url, quote=quote, contact=contact)


def parse_resolution(data: Any) -> tuple[str, str]:
    if not isinstance(data, dict):
        raise InvalidInput(
            "The body must be a JSON object.", details=[detail(None, "invalid_body", "must be an object")]
        )
    errors = FieldErrors()
    resolution = data.get("resolution")
    if resolution not in RESOLUTIONS:
        errors.add(0, "resolution", f"must be one of {', '.join(RESOLUTIONS)}")
    # Withdrawing one's own dispute needs no explanation; a decision on it does.
    withdrawn = resolution == "withdrawn"
    note = (
        text_field(errors, 0, "note", _unset_if_empty(data.get("note")), max_len=MAX_NOTE, required=not withdrawn) or ""
    )
    _raise(errors)
    return resolution, note
