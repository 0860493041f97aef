"""Reading and verifying the audit trail."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from audit.chain import GENESIS_HASH, event_hash
from audit.models import AuditEvent
from console.accounts import permissions


def readable_events(user, roles=permissions.AUDIT_READERS) -> QuerySet[AuditEvent]:
    """The events a user may read through `roles`: every event with a global grant, else only the
    events of their routes (global events, such as users and tokens, stay with global readers)."""
    slugs = permissions.route_slugs(user, roles)
    events = AuditEvent.objects.all()
    return events if slugs is None else events.filter(route__in=slugs)


def audit_events_for_object(object_type: str, object_id: Any,
                            events: QuerySet[AuditEvent] | None = None) -> QuerySet[AuditEvent]:
    """Events about one object, including batch events that list it in `payload.object_ids`."""
    oid = str(object_id)
    # isdigit() alone accepts "²", which int() refuses; batch events list ids as JSON numbers.
    return (AuditEvent.objects.all() if events is None else events).filter(
        Q(object_type=object_type, object_id=oid)
        | Q(payload__contains={"objects": {object_type: [int(oid)] if oid.isascii() and oid.isdigit() else [oid]}})
    ).order_by("seq")


def audit_chain_verify(*, chunk_size: int = 5000) -> dict[str, Any]:
    """Recompute every link in order; report the first event whose stored hash or link is wrong."""
    prev_hash = GENESIS_HASH
    expected_seq = 1
    count = 0
    fields = ("seq", "at", "actor", "action", "object_type", "object_id", "payload", "prev_hash", "hash", "route")
    for row in AuditEvent.objects.order_by("seq").values_list(*fields).iterator(chunk_size=chunk_size):
        seq, at, actor, action, object_type, object_id, payload, stored_prev, stored_hash, route = row
        problem = None
        if seq != expected_seq:
            problem = f"sequence gap: expected {expected_seq}, found {seq}"
        elif stored_prev != prev_hash:
            problem = "prev_hash does not match the hash of the previous event"
        else:
            recomputed = event_hash(
                seq=seq, at=at, actor=actor, action=action, object_type=object_type,
                object_id=object_id, payload=payload, prev_hash=stored_prev, route=route,
            )
            if recomputed != stored_hash:
                problem = "stored hash does not match the event's content"
        if problem:
            return {"ok": False, "first_bad_seq": expected_seq if seq != expected_seq else seq,
                    "reason": problem, "events_checked": count}
        prev_hash = stored_hash
        expected_seq += 1
        count += 1
    return {"ok": True, "events": count, "head": prev_hash}
