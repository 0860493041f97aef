"""Writing to the audit trail. Call these inside the transaction of the change they record."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from django.db import connection, transaction
from django.db.models import JSONField, Value
from django.db.models.functions import Cast
from django.utils import timezone

from audit import checkpoints, hooks
from audit.chain import CURRENT_SCHEME, GENESIS_HASH, canonical_payload, event_hash_jcs
from audit.changes import field_changes
from audit.models import Action, AuditEvent, ChainBreak
from audit.selectors import audit_head_verified_since_checkpoint
from console.core.errors import Conflict, detail

# One fixed advisory-lock key serialises appends, so concurrent writers cannot fork the chain.
_CHAIN_LOCK_KEY = 0x41756469  # "Audi"
_BREAK_LOCK_KEY = 0x41756462  # "Audb"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Actor:
    """Who acted. Passed explicitly into every service that changes state."""

    label: str

    @classmethod
    def user(cls, user) -> Actor:
        return cls(f"user:{user.get_username()}")

    @classmethod
    def system(cls, job: str) -> Actor:
        return cls(f"system:{job}")

    @classmethod
    def from_request(cls, request) -> Actor:
        token = getattr(request, "auth", None)
        prefix = getattr(token, "prefix", None)
        if prefix:
            return cls(f"token:{prefix}/{request.user.get_username()}")
        return cls.user(request.user)


@dataclass(frozen=True)
class EventSpec:
    action: Action
    object_type: str
    object_id: str
    payload: dict[str, Any]
    route: str = ""  # slug of the route the event belongs to; "" for global events


def audit_record(
    *,
    actor: Actor,
    action: Action,
    object_type: str,
    object_id: Any,
    payload: dict[str, Any] | None = None,
    route: str = "",
) -> AuditEvent:
    """Append one event; must run inside the transaction that makes the change."""
    return audit_record_many(
        actor=actor, events=[EventSpec(action, object_type, str(object_id), payload or {}, route)]
    )[0]


def audit_record_many(*, actor: Actor, events: list[EventSpec]) -> list[AuditEvent]:
    if not connection.in_atomic_block:
        raise RuntimeError("audit events must be written in the transaction of the change")
    if not events:
        return []
    for spec in events:
        Action(spec.action)  # ValueError for an action the enum does not name
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK_KEY])
    last = AuditEvent.objects.order_by("-seq").values_list("seq", "hash").first()
    seq, prev_hash = last if last else (0, GENESIS_HASH)
    now = timezone.now()
    rows, texts = [], []
    for spec in events:
        seq += 1
        # Canonical once, here: the hash covers this text, the row stores it, and the jsonb
        # `payload` is PostgreSQL's reading of the same text (so its numbers are what the text says).
        text = canonical_payload(spec.payload)
        fields = dict(
            seq=seq,
            at=now,
            actor=actor.label,
            action=str(spec.action),
            object_type=spec.object_type,
            object_id=spec.object_id,
            prev_hash=prev_hash,
            route=spec.route,
        )
        prev_hash = event_hash_jcs(payload_text=text, **fields)
        rows.append(
            AuditEvent(
                hash=prev_hash,
                hash_scheme=CURRENT_SCHEME,
                payload_text=text,
                payload=Cast(Value(text), output_field=JSONField()),
                **fields,
            )
        )
        texts.append(text)
    created = AuditEvent.objects.bulk_create(rows)
    for event, text in zip(created, texts, strict=True):
        event.payload = json.loads(text)  # what a fresh read of the row gives, not the SQL expression
    return created


def console_restored_record(*, actor: Actor, restored: dict[str, Any]) -> AuditEvent:
    """The first event of a console restored from a backup (console/backup.py), once its chain has
    verified: which backup, up to when, and the head it verified. A restore to a moment drops every
    event after it from this console's trail; this event is what says so."""
    with transaction.atomic(durable=True):
        return audit_record(
            actor=actor,
            action=Action.CONSOLE_RESTORED,
            object_type="console",
            object_id="restore",
            payload=field_changes(new=restored),
        )


def audit_checkpoint_create(*, now=None) -> dict[str, Any]:
    """Sign the chain's head with the key outside the database and append it to the checkpoint log
    (and post it to the webhook, if one is set). See audit/checkpoints.py for why.

    The part of the chain after the newest checkpoint is verified first: a broken chain is never
    signed (Conflict naming the problem). An empty chain, or a head already signed, signs nothing.
    """
    key = checkpoints.signing_key(create=True)
    head = audit_head_verified_since_checkpoint()
    if not head["ok"]:
        chain_break_report(result=head, now=now)
        raise Conflict(
            f"the audit chain is broken at seq {head['first_bad_seq']} ({head['reason']}); no checkpoint was signed",
            code="audit_chain_broken",
            details=[detail(None, "audit_chain_broken", str(head["reason"]), **head)],
        )
    chain_break_clear(now=now)
    if head["seq"] == 0:
        return {"signed": False, "reason": "the audit trail is empty"}
    if head["checkpointed"]:
        return {"signed": False, "reason": "the head is already checkpointed", "seq": head["seq"]}
    at = (now or timezone.now()).astimezone(UTC).isoformat(timespec="microseconds")
    checkpoint = checkpoints.sign(key, seq=head["seq"], head_hash=head["hash"], at=at)
    checkpoints.log_append(checkpoint)
    posted = checkpoints.webhook_post(checkpoint)
    return {"signed": True, **checkpoint.as_dict(), "webhook": posted}


def _break_key(result: dict[str, Any]) -> str:
    """The same break keeps its key while the console goes on appending events: a truncation's first
    bad seq moves with the head, the checkpoint it contradicts does not."""
    if result.get("checkpoint_seq") is not None:
        return f"checkpoint:{result['checkpoint_seq']}"
    return f"seq:{result.get('first_bad_seq')}"


def chain_break_report(*, result: dict[str, Any], now=None) -> ChainBreak | None:
    """Record a break the checkpoint job found and email every admin, once per break: a break
    already open under the same key returns None and sends nothing. A different break replaces
    the open one (resolved) and is announced as new."""
    now = now or timezone.now()
    key = _break_key(result)
    with transaction.atomic():
        with connection.cursor() as cursor:  # one reporter at a time, so one email per break
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_BREAK_LOCK_KEY])
        open_break = ChainBreak.objects.filter(resolved_at__isnull=True).first()
        if open_break is not None:
            if open_break.key == key:
                return None
            open_break.resolved_at = now
            open_break.save(update_fields=["resolved_at"])
        chain_break = ChainBreak(
            key=key,
            first_bad_seq=result.get("first_bad_seq"),
            reason=result.get("reason", ""),
            details=result,
            detected_at=now,
        )
        chain_break.full_clean()
        addresses = hooks.trail_access().admin_addresses()
        chain_break.admins_notified = len(addresses)
        chain_break.save()
        where = f"at seq {chain_break.first_bad_seq}" if chain_break.first_bad_seq else "in its checkpoints"
        body = (
            f"The audit chain is broken {where}: {chain_break.reason}.\n\n"
            "No checkpoint is signed until it verifies again. Run `manage.py audit_verify` for the first "
            "event that fails and why, and compare it with the checkpoint log and its copies.\n"
        )
        # The notification app sends it (audit/hooks.py); an admin without an address is recorded as a
        # failed notification there.
        hooks.admins_notify(recipients=addresses, subject="Audit chain broken", body=body)
    logger.error("audit chain broken %s: %s", where, chain_break.reason)
    return chain_break


def chain_break_clear(*, now=None) -> int:
    """The chain verified: close the open break, if any. Returns how many were closed."""
    return ChainBreak.objects.filter(resolved_at__isnull=True).update(resolved_at=now or timezone.now())
