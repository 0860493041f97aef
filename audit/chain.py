"""The canonical serialisation and hash of an audit event. Pure functions, no database.

Two hash schemes, recorded per event in `AuditEvent.hash_scheme`:

- **1** (events written before the canonical payload text existed): SHA-256 over Python's
  `json.dumps` of the event with sorted keys, the payload taken as the database gives it back. It
  breaks whenever PostgreSQL's jsonb writes a number back in another form (`1e16` comes back as
  `10000000000000000`, `-0.0` as `0`), so it is only kept to verify the events it already hashed.
- **2** (every new event): the payload is written once as its RFC 8785 (JSON Canonicalization
  Scheme) text, that text is stored beside the jsonb value (`payload_text`), and the hash is
  SHA-256 over the RFC 8785 text of the event whose `payload` member is that stored text, as a
  string. Verifying hashes the stored text itself, so nothing the database does to numbers can
  change the result, and any change to a stored byte does.

RFC 8785 speaks I-JSON: numbers are IEEE doubles. An integer beyond +-(2^53 - 1) has no exact
double, so the payload records it as its decimal string (as RFC 7493 advises) rather than round it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from typing import Any

import rfc8785

GENESIS_HASH = "0" * 64

SCHEME_PYTHON_JSON = 1
SCHEME_JCS = 2
CURRENT_SCHEME = SCHEME_JCS

_SAFE_INTEGER = 2**53 - 1
# jsonb refuses \u0000, and UTF-8 (text columns, RFC 8785) cannot carry a lone surrogate.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class UnstorablePayload(ValueError):
    """A payload the audit trail cannot record exactly. The API refuses such input with a 400
    before any service runs (console/core/parsers.py and each field's validation)."""


def _iso(at: datetime) -> str:
    if at.tzinfo is None:
        raise ValueError("audit times must be timezone-aware")
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def canonical_bytes(
    *,
    seq: int,
    at: datetime,
    actor: str,
    action: str,
    object_type: str,
    object_id: str,
    payload: Any,
    prev_hash: str,
    route: str = "",
) -> bytes:
    """Scheme 1: JSON with sorted keys, no spaces, UTF-8; `at` as ISO 8601 in UTC with microseconds.

    `route` enters the document only when set, so events written before events carried their
    route hash as they always did."""
    document = {
        "seq": seq,
        "at": _iso(at),
        "actor": actor,
        "action": action,
        "object_type": object_type,
        "object_id": object_id,
        "payload": payload,
        "prev_hash": prev_hash,
    }
    if route:
        document["route"] = route
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def event_hash(**fields: Any) -> str:
    """Scheme 1's hash (see the module's docstring)."""
    return hashlib.sha256(canonical_bytes(**fields)).hexdigest()


def _i_json(value: Any) -> Any:
    """The payload as plain I-JSON data: what json.dumps accepts (tuples, non-string keys, float
    subclasses), with integers past the exact range of a double as decimal strings."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        if isinstance(value, str) and _UNSTORABLE.search(value):
            raise UnstorablePayload("a NUL character or a lone surrogate cannot be recorded")
        return value
    if isinstance(value, int):
        return value if -_SAFE_INTEGER <= value <= _SAFE_INTEGER else str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UnstorablePayload(f"{value} is not a JSON number")
        return value
    if isinstance(value, dict):
        return {_i_json(k if isinstance(k, str) else json.dumps(k)): _i_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_i_json(v) for v in value]
    raise UnstorablePayload(f"a {type(value).__name__} is not JSON")


def canonical_payload(payload: Any) -> str:
    """The RFC 8785 text of a payload, as stored in `payload_text` and hashed by scheme 2."""
    try:
        return rfc8785.dumps(_i_json(payload)).decode()
    except rfc8785.CanonicalizationError as exc:  # not reached after _i_json; kept as the last word
        raise UnstorablePayload(str(exc)) from exc
    except RecursionError:
        raise UnstorablePayload("the payload is nested too deeply") from None


def event_hash_jcs(
    *,
    seq: int,
    at: datetime,
    actor: str,
    action: str,
    object_type: str,
    object_id: str,
    payload_text: str,
    prev_hash: str,
    route: str = "",
) -> str:
    """Scheme 2's hash: SHA-256 of the RFC 8785 text of the event, its payload as the stored text."""
    document = {
        "scheme": SCHEME_JCS,
        "seq": seq,
        "at": _iso(at),
        "actor": actor,
        "action": action,
        "object_type": object_type,
        "object_id": object_id,
        "payload": payload_text,
        "prev_hash": prev_hash,
        "route": route,
    }
    return hashlib.sha256(rfc8785.dumps(document)).hexdigest()
