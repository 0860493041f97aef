"""The first event of a restored console says which backup it came from (console/backup.py)."""

from __future__ import annotations

from audit.models import Action, AuditEvent
from audit.selectors import audit_chain_verify
from audit.services import Actor, console_restored_record


def test_a_restore_is_recorded_per_field_with_the_backup_and_the_head_it_verified(db):
    restored = {"backup_taken_at": "2026-12-03T21:29:46+00:00", "until": None, "verified_head": {"seq": 0}}
    event = console_restored_record(actor=Actor.system("restore"), restored=restored)
    stored = AuditEvent.objects.get(seq=event.seq)
    assert stored.action == Action.CONSOLE_RESTORED and stored.actor == "system:restore"
    assert stored.payload["verified_head"] == {"old": None, "new": {"seq": 0}}
    assert "until" not in stored.payload  # a field with no value is no change
    assert audit_chain_verify()["ok"]
