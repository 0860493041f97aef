"""Reading and verifying the audit trail."""

from __future__ import annotations

from typing import Any

from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL

from audit import checkpoints
from audit.chain import GENESIS_HASH, SCHEME_JCS, SCHEME_PYTHON_JSON, event_hash, event_hash_jcs
from audit.hooks import trail_access
from audit.models import AuditEvent, ChainBreak


def readable_events(user, roles=None) -> QuerySet[AuditEvent]:
    """The events a user may read through `roles` (default: the trail's readers): every event with
    a global grant, else only the events of their routes (global events, such as users and tokens,
    stay with global readers)."""
    access = trail_access()
    slugs = access.route_slugs(user, access.trail_readers if roles is None else roles)
    events = AuditEvent.objects.all()
    return events if slugs is None else events.filter(route__in=slugs)


def audit_events_for_object(
    object_type: str, object_id: Any, events: QuerySet[AuditEvent] | None = None
) -> QuerySet[AuditEvent]:
    """Events about one object, including batch events that list it in `payload.object_ids`."""
    oid = str(object_id)
    # isdigit() alone accepts "²", which int() refuses; batch events list ids as JSON numbers.
    return (
        (AuditEvent.objects.all() if events is None else events)
        .filter(
            Q(object_type=object_type, object_id=oid)
            | Q(payload__contains={"objects": {object_type: [int(oid)] if oid.isascii() and oid.isdigit() else [oid]}})
        )
        .order_by("seq")
    )


def _link_problem(row: dict[str, Any], prev_hash: str) -> dict[str, Any] | None:
    """What is wrong with one event given the hash before it, or None: the link to the previous
    event, then the stored payload against its canonical text, then the stored hash against the
    one its scheme recomputes from exactly what is stored."""
    base = {"first_bad_seq": row["seq"], "action": row["action"], "stored_hash": row["hash"]}
    if row["prev_hash"] != prev_hash:
        return base | {
            "link": "prev_hash",
            "reason": "prev_hash does not match the hash of the previous event",
            "expected_prev_hash": prev_hash,
            "stored_prev_hash": row["prev_hash"],
        }
    fields = {k: row[k] for k in ("seq", "at", "actor", "action", "object_type", "object_id", "prev_hash", "route")}
    if row["hash_scheme"] == SCHEME_JCS:
        if not row["payload_matches_text"]:
            return base | {
                "link": "payload",
                "reason": "the stored payload is not its stored canonical text (payload_text) read as JSON",
            }
        recomputed = event_hash_jcs(payload_text=row["payload_text"], **fields)
    elif row["hash_scheme"] == SCHEME_PYTHON_JSON:
        recomputed = event_hash(payload=row["payload"], **fields)
    else:
        return base | {"link": "hash", "reason": f"unknown hash scheme {row['hash_scheme']}"}
    if recomputed != row["hash"]:
        return base | {
            "link": "hash",
            "reason": "stored hash does not match the event's content",
            "expected_hash": recomputed,
            "hash_scheme": row["hash_scheme"],
        }
    return None


def _chain_walk(
    *,
    after_seq: int = 0,
    after_hash: str = GENESIS_HASH,
    up_to_seq: int | None = None,
    signed: dict[int, dict[str, Any]] | None = None,
    chunk_size: int = 5000,
) -> dict[str, Any]:
    """Recompute every link after `after_seq` in order, comparing the events at checkpointed seqs
    with the hash each checkpoint signed. Stops at the first problem."""
    signed = signed or {}
    prev_hash = after_hash
    expected_seq = after_seq + 1
    last_matching_checkpoint = after_seq
    count = 0
    fields = (
        "seq",
        "at",
        "actor",
        "action",
        "object_type",
        "object_id",
        "payload",
        "payload_text",
        "hash_scheme",
        "prev_hash",
        "hash",
        "route",
    )
    rows = (
        AuditEvent.objects.filter(seq__gt=after_seq)
        # Compared in the database: jsonb equality is what PostgreSQL's own reading of the text gives.
        .annotate(payload_matches_text=RawSQL("payload = payload_text::jsonb", (), output_field=BooleanField()))
        .order_by("seq")
    )
    if up_to_seq is not None:
        rows = rows.filter(seq__lte=up_to_seq)
    for row in rows.values(*fields, "payload_matches_text").iterator(chunk_size=chunk_size):
        seq = row["seq"]
        if seq != expected_seq:
            problem = {
                "first_bad_seq": expected_seq,
                "link": "seq",
                "reason": f"sequence gap: expected {expected_seq}, found {seq}",
            }
        else:
            problem = _link_problem(row, prev_hash)
        if problem:
            return {"ok": False, **problem, "events_checked": count}
        stored_hash = row["hash"]
        checkpoint = signed.get(seq)
        if checkpoint is not None:
            if checkpoint["hash"] != stored_hash:
                # The links hold, so the chain was recomputed after a change: somewhere after the
                # last checkpoint that still matches, and at or before this one.
                return {
                    "ok": False,
                    "first_bad_seq": last_matching_checkpoint + 1,
                    "checkpoint_seq": seq,
                    "link": "checkpoint",
                    "reason": f"rewritten: event {seq} no longer has the hash signed in the checkpoint of "
                    f"{checkpoint['at']}; the chain was recomputed after a change to an event "
                    f"between seq {last_matching_checkpoint + 1} and {seq}",
                    "events_checked": count,
                }
            last_matching_checkpoint = seq
        prev_hash = stored_hash
        expected_seq += 1
        count += 1
    return {"ok": True, "events": count, "last_seq": expected_seq - 1, "head": prev_hash}


def _signed_checkpoints() -> tuple[dict[int, dict[str, Any]], list[str]]:
    """The log's checkpoints whose signature holds, by seq, and a problem for each one that does not."""
    entries, problems = checkpoints.log_read()
    if not entries:
        return {}, problems
    try:
        public_key = checkpoints.signing_key(create=False).public_key()
    except checkpoints.SigningKeyMissing as exc:
        return {}, [*problems, f"{len(entries)} checkpoints cannot be checked: {exc}"]
    signed: dict[int, dict[str, Any]] = {}
    for entry in entries:
        if not checkpoints.signature_valid(public_key, entry):
            problems.append(
                f"checkpoint log line {entry['line']} (seq {entry['seq']}): the signature is not valid "
                f"for this console's key"
            )
        elif entry["seq"] in signed and signed[entry["seq"]]["hash"] != entry["hash"]:
            problems.append(
                f"checkpoints of {signed[entry['seq']]['at']} and {entry['at']} sign different hashes "
                f"for seq {entry['seq']}"
            )
        else:
            signed[entry["seq"]] = entry
    return signed, problems


def audit_chain_verify(*, chunk_size: int = 5000) -> dict[str, Any]:
    """Recompute every link in order and check the chain against every signed checkpoint.

    Reports the first event whose stored hash or link is wrong; an event whose hash differs from
    the one a checkpoint signed (an edit followed by recomputed hashes); a checkpoint beyond the
    chain's end (the newest events deleted); and any checkpoint whose signature does not hold.
    """
    signed, problems = _signed_checkpoints()
    result = _chain_walk(signed=signed, chunk_size=chunk_size)
    latest = signed[max(signed)] if signed else None
    summary = {
        "count": len(signed),
        "latest_seq": latest["seq"] if latest else None,
        "latest_at": latest["at"] if latest else None,
    }
    if result["ok"] and latest and latest["seq"] > result["last_seq"]:
        end = result["last_seq"]
        result = {
            "ok": False,
            "first_bad_seq": end + 1,
            "checkpoint_seq": latest["seq"],
            "reason": f"truncated: the chain ends at seq {end} but the checkpoint of {latest['at']} signed "
            f"seq {latest['seq']}; {latest['seq'] - end} or more of the newest events were deleted",
            "events_checked": result["events"],
        }
    if result["ok"] and problems:
        result = {"ok": False, "first_bad_seq": None, "reason": "; ".join(problems), "events_checked": result["events"]}
    result.pop("last_seq", None)
    if problems:
        result["checkpoint_problems"] = problems
    result["checkpoints"] = summary
    return result


def audit_head_verified_since_checkpoint() -> dict[str, Any]:
    """The chain's head, with what the newest matching checkpoint does not already vouch for verified.

    Used before signing a new checkpoint, so that a broken chain is never signed, without
    re-reading the whole history every few minutes. `{"ok": true, "seq", "hash"}` (seq 0 for an
    empty chain), or the problem as `audit_chain_verify` names it."""
    signed, _ = _signed_checkpoints()  # read before the head: every checkpoint here is at or below it
    head_seq, head_hash = AuditEvent.objects.order_by("-seq").values_list("seq", "hash").first() or (0, GENESIS_HASH)
    if signed and max(signed) > head_seq:
        latest = signed[max(signed)]
        return {
            "ok": False,
            "first_bad_seq": head_seq + 1,
            "checkpoint_seq": latest["seq"],
            "reason": f"truncated: the chain ends at seq {head_seq} but the checkpoint of {latest['at']} "
            f"signed seq {latest['seq']}",
        }
    start_seq, start_hash = 0, GENESIS_HASH
    if signed:
        seq = max(signed)
        stored = AuditEvent.objects.filter(seq=seq).values_list("hash", flat=True).first()
        if stored != signed[seq]["hash"]:
            return {
                "ok": False,
                "first_bad_seq": seq,
                "checkpoint_seq": seq,
                "reason": f"rewritten: event {seq} no longer has the hash signed in the checkpoint of "
                f"{signed[seq]['at']}",
            }
        start_seq, start_hash = seq, stored
    result = _chain_walk(after_seq=start_seq, after_hash=start_hash, up_to_seq=head_seq)
    if not result["ok"]:
        return result
    return {
        "ok": True,
        "seq": head_seq,
        "hash": head_hash,
        "checkpointed": head_seq in signed and signed[head_seq]["hash"] == head_hash,
    }


def chain_health() -> tuple[bool, dict[str, Any] | None]:
    """The audit chain's line in /healthz: broken while the checkpoint job's newest break is open."""
    open_break = ChainBreak.objects.filter(resolved_at__isnull=True).first()
    if open_break is None:
        return True, None
    return False, {
        "broken": True,
        "first_bad_seq": open_break.first_bad_seq,
        "reason": open_break.reason,
        "detected_at": open_break.detected_at.isoformat(),
        "admins_notified": open_break.admins_notified,
    }
