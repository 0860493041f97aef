"""The canonical serialisation and hash of an audit event. Pure functions, no database."""

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

GENESIS_HASH = "0" * 64


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
    """JSON with sorted keys, no spaces, UTF-8; `at` as ISO 8601 in UTC with microseconds.

    `route` enters the document only when set, so events written before events carried their
    route hash as they always did."""
    if at.tzinfo is None:
        raise ValueError("audit times must be timezone-aware")
    document = {
        "seq": seq,
        "at": at.astimezone(UTC).isoformat(timespec="microseconds"),
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
    return hashlib.sha256(canonical_bytes(**fields)).hexdigest()
