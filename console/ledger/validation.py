"""Validation of decision records, shared by the ingest API and `import_decisions`.

Hand-written rather than nested serializers: a batch is 1,000 decisions with up to 100 passages
each and validating it must cost far less than writing it. Every problem is reported with the
item's index and a field path, so a client can fix a whole batch in one go.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from console.core.validation import (
    FLOAT32_MAX,
    INT32_MAX,
    FieldErrors,
    finite_number,
    has_lone_surrogate,
    number_field,
    text_field,
    timestamp_field,
)
from console.ledger.models import MAX_CLAIM_CHARS, MAX_CLAIMS, GateFunctional

MAX_QUESTION = 10_000
MAX_CLAIM = 20_000
MAX_ANSWER = 20_000
MAX_PASSAGE_TEXT = 100_000
MAX_PASSAGES = 100
MAX_ID = 200
MAX_PASSAGE_ID = 500
MAX_LABEL = 200
MAX_URI = 2_000
MAX_SEGMENTS = 50
MAX_EMBEDDING = 4_096
OUTCOMES = ("refused", "served", "served_with_evidence")
MAX_EXPECTED_CLAIMS = 1_000
FUNCTIONALS = tuple(GateFunctional.values)

_TOP_FIELDS = {
    "request_id",
    "route",
    "occurred_at",
    "question",
    "claim",
    "gate",
    "outcome",
    "served_answer",
    "passages",
    "versions",
    "segments",
    "question_embedding",
    "claims",
    "expected_claims",
}
_PASSAGE_FIELDS = {"id", "text", "retrieval_score", "rank", "source", "uri", "embedding"}
_GATE_FIELDS = {"name", "score", "cutoff", "functional"}
_CLAIM_FIELDS = {"text", "citations"}


@dataclass
class PassageInput:
    external_id: str
    text: str
    rank: int
    retrieval_score: float | None
    source: str
    uri: str
    embedding: list[float] | None
    text_sha256: str = ""
    content_key: str = ""


@dataclass
class DecisionInput:
    index: int
    request_id: str
    route: str
    occurred_at: datetime
    question: str
    claim: str
    gate_name: str
    gate_score: float
    cutoff: float
    outcome: str
    served_answer: str | None
    versions: dict[str, str]
    segments: dict[str, Any]
    passages: list[PassageInput] = field(default_factory=list)
    content_hash: str = ""
    # The answering system's own query vector; stored and searched by console/similarity.
    question_embedding: list[float] | None = None
    # A long answer's claims as sent ({"text", "citations"}), its K and its gate's functional.
    claims: list[dict[str, Any]] | None = None
    expected_claims: int | None = None
    gate_functional: str = ""

    @property
    def distinct_served_answer(self) -> str | None:
        """What the decision's column stores: the served answer only when it is not the claim
        (Decision.served_answer gives the claim back). The content hash keeps the answer as sent."""
        return None if self.served_answer == self.claim else self.served_answer


def _string_map(errors: FieldErrors, index: int, path: str, value: Any, *, scalars: bool) -> dict | None:
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.add(index, path, "must be an object")
        return None
    if len(value) > MAX_SEGMENTS:
        errors.add(index, path, f"has more than {MAX_SEGMENTS} keys")
        return None
    clean = {}
    for key, item in value.items():
        if not key or len(key) > 64 or "\x00" in key or has_lone_surrogate(key):
            errors.add(index, f"{path}.{key[:64]}", "keys must be 1 to 64 characters of valid Unicode, without NUL")
            continue
        allowed = (str, int, float, bool) if scalars else (str,)
        if not isinstance(item, allowed) or (
            isinstance(item, str) and (len(item) > MAX_LABEL or "\x00" in item or has_lone_surrogate(item))
        ):
            kind = "a string, number or boolean" if scalars else "a string"
            errors.add(index, f"{path}.{key}", f"must be {kind} of at most {MAX_LABEL} characters")
            continue
        if isinstance(item, int | float) and not isinstance(item, bool) and finite_number(item) is None:
            errors.add(index, f"{path}.{key}", "must be finite")
            continue
        clean[key] = item
    return clean


def _embedding(errors: FieldErrors, index: int, path: str, value: Any) -> list[float] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not 0 < len(value) <= MAX_EMBEDDING
        or not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value)
    ):
        errors.add(index, path, f"must be a list of 1 to {MAX_EMBEDDING} finite numbers")
        return None
    return [float(x) for x in value]


def _or_empty(value: Any) -> Any:
    """Null for an optional text is ""; any other value goes to the text check, so [] or 0 is refused
    rather than stored as "" (as `value or ""` did)."""
    return "" if value is None else value


def _passages(errors: FieldErrors, index: int, value: Any) -> list[PassageInput] | None:
    if value is None:
        return []
    if not isinstance(value, list):
        errors.add(index, "passages", "must be a list")
        return None
    if len(value) > MAX_PASSAGES:
        errors.add(index, "passages", f"has {len(value)} passages; at most {MAX_PASSAGES} are allowed")
        return None
    result: list[PassageInput] = []
    ranks: set[int] = set()
    before = len(errors.items)
    for position, raw in enumerate(value):
        path = f"passages[{position}]"
        if not isinstance(raw, dict):
            errors.add(index, path, "must be an object")
            continue
        for unknown in raw.keys() - _PASSAGE_FIELDS:
            errors.add(index, f"{path}.{unknown}", "is not a known field", "unknown_field")
        external_id = text_field(errors, index, f"{path}.id", raw.get("id"), max_len=MAX_PASSAGE_ID)
        text = text_field(errors, index, f"{path}.text", raw.get("text"), max_len=MAX_PASSAGE_TEXT, allow_empty=True)
        score = number_field(errors, index, f"{path}.retrieval_score", raw.get("retrieval_score"), required=False)
        rank = raw.get("rank", position + 1)
        if isinstance(rank, float) and rank.is_integer():  # 3.0 from a JSON library that writes floats only
            rank = int(rank)
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= INT32_MAX:
            errors.add(index, f"{path}.rank", f"must be a whole number from 1 to {INT32_MAX}")
            rank = None
        elif rank in ranks:
            errors.add(index, f"{path}.rank", f"rank {rank} appears twice")
        else:
            ranks.add(rank)
        source = text_field(
            errors, index, f"{path}.source", _or_empty(raw.get("source")), max_len=MAX_LABEL, allow_empty=True
        )
        uri = text_field(errors, index, f"{path}.uri", _or_empty(raw.get("uri")), max_len=MAX_URI, allow_empty=True)
        embedding = raw.get("embedding")
        if embedding is not None:
            if (
                not isinstance(embedding, list)
                or not 0 < len(embedding) <= MAX_EMBEDDING
                or not all(
                    isinstance(x, int | float)
                    and not isinstance(x, bool)
                    and finite_number(x, limit=FLOAT32_MAX) is not None
                    for x in embedding
                )
            ):
                errors.add(
                    index,
                    f"{path}.embedding",
                    f"must be a list of 1 to {MAX_EMBEDDING} numbers "
                    f"of at most {FLOAT32_MAX:.4g} in size (single precision)",
                )
                embedding = None
            else:
                embedding = [float(x) for x in embedding]
        if external_id is not None and text is not None and rank is not None:
            result.append(PassageInput(external_id, text, rank, score, source or "", uri or "", embedding))
    return result if len(errors.items) == before else None


def _claims(errors: FieldErrors, index: int, value: Any, passage_ids: set[str] | None) -> list[dict] | None:
    """The claims as stored: [{"text", "citations"}], citations [] when absent. Each citation must be
    the id of one of the decision's own passages (`passage_ids`; None when the passages were invalid,
    which are reported already)."""
    if value is None:
        return None
    if not isinstance(value, list):
        errors.add(index, "claims", "must be a list of {text, citations}")
        return None
    if not 0 < len(value) <= MAX_CLAIMS:
        errors.add(index, "claims", f"has {len(value)} claims; 1 to {MAX_CLAIMS} are allowed (or leave it out)")
        return None
    result = []
    for position, raw in enumerate(value):
        path = f"claims[{position}]"
        if not isinstance(raw, dict):
            errors.add(index, path, "must be an object {text, citations}")
            continue
        for unknown in raw.keys() - _CLAIM_FIELDS:
            errors.add(index, f"{path}.{unknown}", "is not a known field", "unknown_field")
        text = text_field(errors, index, f"{path}.text", raw.get("text"), max_len=MAX_CLAIM_CHARS)
        citations = raw.get("citations")
        if citations is None:
            citations = []
        elif not isinstance(citations, list):
            errors.add(index, f"{path}.citations", "must be a list of passage ids")
            citations = []
        cited = []
        for place, passage_id in enumerate(citations):
            cited_path = f"{path}.citations[{place}]"
            passage_id = text_field(errors, index, cited_path, passage_id, max_len=MAX_PASSAGE_ID)
            if passage_id is None:
                continue
            if passage_ids is not None and passage_id not in passage_ids:
                errors.add(index, cited_path, f"names no passage of this decision: {passage_id!r}", "unknown_passage")
                continue
            cited.append(passage_id)
        if text is not None:
            result.append({"text": text, "citations": cited})
    return result


def _expected_claims(errors: FieldErrors, index: int, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():  # 3.0 from a JSON library that writes floats only
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_EXPECTED_CLAIMS:
        errors.add(index, "expected_claims", f"must be a whole number from 1 to {MAX_EXPECTED_CLAIMS}")
        return None
    return value


def validate_decision(index: int, raw: Any, errors: FieldErrors) -> DecisionInput | None:
    if not isinstance(raw, dict):
        errors.add(index, "", "must be an object")
        return None
    before = len(errors.items)
    for unknown in raw.keys() - _TOP_FIELDS:
        errors.add(index, unknown, "is not a known field", "unknown_field")
    request_id = text_field(errors, index, "request_id", raw.get("request_id"), max_len=MAX_ID)
    route = text_field(errors, index, "route", raw.get("route"), max_len=64)
    occurred_at = timestamp_field(errors, index, "occurred_at", raw.get("occurred_at"))
    question = text_field(errors, index, "question", raw.get("question"), max_len=MAX_QUESTION)
    claim = text_field(errors, index, "claim", raw.get("claim"), max_len=MAX_CLAIM)
    gate = raw.get("gate")
    gate_name = gate_score = cutoff = None
    gate_functional = ""
    if not isinstance(gate, dict):
        errors.add(index, "gate", "is required as an object {name, score, cutoff}")
    else:
        for unknown in gate.keys() - _GATE_FIELDS:
            errors.add(index, f"gate.{unknown}", "is not a known field", "unknown_field")
        gate_name = text_field(errors, index, "gate.name", gate.get("name"), max_len=100)
        gate_score = number_field(errors, index, "gate.score", gate.get("score"))
        cutoff = number_field(errors, index, "gate.cutoff", gate.get("cutoff"))
        gate_functional = gate.get("functional")
        if gate_functional is None:
            gate_functional = ""
        elif gate_functional not in FUNCTIONALS:
            errors.add(index, "gate.functional", f"must be one of {', '.join(FUNCTIONALS)}")
    outcome = raw.get("outcome")
    if outcome not in OUTCOMES:
        errors.add(index, "outcome", f"must be one of {', '.join(OUTCOMES)}")
    served_answer = raw.get("served_answer")
    if outcome == "refused":
        if served_answer not in (None, ""):
            errors.add(index, "served_answer", "must be null when the outcome is refused")
        served_answer = None
    elif outcome in OUTCOMES:
        served_answer = text_field(errors, index, "served_answer", served_answer, max_len=MAX_ANSWER)
    passages = _passages(errors, index, raw.get("passages"))
    if "versions" not in raw:
        errors.add(index, "versions", "is required (model, retriever, corpus, gate)", "required")
    versions = _string_map(errors, index, "versions", raw.get("versions"), scalars=False)
    segments = _string_map(errors, index, "segments", raw.get("segments"), scalars=True)
    question_embedding = _embedding(errors, index, "question_embedding", raw.get("question_embedding"))
    passage_ids = None if passages is None else {p.external_id for p in passages}
    claims = _claims(errors, index, raw.get("claims"), passage_ids)
    expected_claims = _expected_claims(errors, index, raw.get("expected_claims"))
    if len(errors.items) != before:
        return None
    item = DecisionInput(
        index=index,
        request_id=request_id,
        route=route,
        occurred_at=occurred_at,
        question=question,
        claim=claim,
        gate_name=gate_name,
        gate_score=gate_score,
        cutoff=cutoff,
        outcome=outcome,
        served_answer=served_answer,
        versions=versions,
        segments=segments,
        passages=passages,
        question_embedding=question_embedding,
        claims=claims,
        expected_claims=expected_claims,
        gate_functional=gate_functional,
    )
    _fill_hashes(item)
    return item


def _sha(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


def _fill_hashes(item: DecisionInput) -> None:
    corpus = item.versions.get("corpus", "")
    for passage in item.passages:
        passage.text_sha256 = _sha(passage.text)
        content = [passage.external_id, corpus, passage.text_sha256, passage.source, passage.uri]
        # A passage belongs to its route: the same chunk logged by two routes is two rows, each with
        # its own id and embedding, so one route's readers never reach the other's through a shared id.
        # The decision's own hash keeps the route-free digest (its route is in it already), so
        # decisions stored before passages were scoped still repeat as unchanged.
        passage.content_key = _sha(json.dumps([item.route, *content]))
    item.passages.sort(key=lambda p: p.rank)
    item.content_hash = content_hash(item, canonical_numbers(item.segments))


def canonical_numbers(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with each number in one form per value: `3` and `3.0` (another JSON library's
    spelling) both become `3`, so a retry that spells a number differently hashes the same.
    Integers beyond 2**53 become floats, as a double-only JSON library would send them."""
    return {key: _canonical_number(value) for key, value in values.items()}


def _canonical_number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT_IN_A_DOUBLE:
        return int(value)
    if isinstance(value, int) and abs(value) >= _EXACT_IN_A_DOUBLE:
        return float(value)
    return value


_EXACT_IN_A_DOUBLE = 2**53


def same_values(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """True when two segment maps hold the same keys with equal values, numbers compared by value
    (`3 == 3.0`) but never a boolean with a number (`true` is not `1`)."""
    if one.keys() != other.keys():
        return False
    return all(
        isinstance(one[key], bool) == isinstance(other[key], bool)
        and isinstance(one[key], str) == isinstance(other[key], str)
        and one[key] == other[key]
        for key in one
    )


def content_hash(item: DecisionInput, segments: dict[str, Any]) -> str:
    """SHA-256 of the decision with `segments` as given. Stored hashes were computed before segment
    numbers were made canonical (console.ledger.services compares with the stored spelling on a
    mismatch), which is why the segments are a parameter. Needs the passages' hashes filled."""
    corpus = item.versions.get("corpus", "")
    passages = [
        [
            _sha(json.dumps([p.external_id, corpus, p.text_sha256, p.source, p.uri])),
            p.rank,
            p.retrieval_score,
            p.embedding,
        ]
        for p in item.passages
    ]
    canonical = [
        item.route,
        item.request_id,
        item.occurred_at.isoformat(timespec="microseconds"),
        item.question,
        item.claim,
        item.gate_name,
        item.gate_score,
        item.cutoff,
        item.outcome,
        item.served_answer,
        item.versions,
        segments,
        passages,
    ]
    if item.question_embedding is not None:
        # Appended only when sent, so decisions stored before the field existed keep their hashes.
        canonical.append(item.question_embedding)
    long_answer = {
        name: value
        for name, value in (
            ("claims", item.claims),
            ("expected_claims", item.expected_claims),
            ("functional", item.gate_functional or None),
        )
        if value is not None
    }
    if long_answer:
        # The same: only when sent (an object, where the embedding is a list, so neither reads as the other).
        canonical.append(long_answer)
    return _sha(json.dumps(canonical, sort_keys=True, separators=(",", ":")))


def validate_batch(records: list[Any], *, start_index: int = 0) -> tuple[list[DecisionInput], list[dict]]:
    """Validate every record; returns the clean items and every problem found."""
    errors = FieldErrors()
    items = []
    for offset, raw in enumerate(records):
        item = validate_decision(start_index + offset, raw, errors)
        if item is not None:
            items.append(item)
    return items, errors.items
