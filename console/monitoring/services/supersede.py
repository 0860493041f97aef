"""Rechecks and alarms of a version that a signature takes out of force.

Both are readings of that version: a recheck asks whether *its* evidence covers new versions, an
alarm compares days with *its* signing window at *its* cutoff. Carried over, they would judge the
new version by evidence it was not signed on, so they are closed in the signing transaction, each
with an audit event and a note naming both versions. The new version is watched on its own
evidence from then on: traffic its evidence does not cover opens a recheck of its own, and days
outside its limits an alarm of its own.
"""

from __future__ import annotations

from django.utils import timezone

from audit.models import Action
from audit.services import Actor, audit_record
from console.governance.models import PolicyVersion
from console.monitoring.models import Alarm, AlarmStatus, Recheck, RecheckResolution, RecheckStatus

SUPERSEDED = "superseded"


def _note(superseded: PolicyVersion, by: PolicyVersion) -> str:
    kind = "rolled back to" if by.created_at < (superseded.signed_at or by.created_at) else "replaced by"
    return (
        f"Closed when v{superseded.version} (cutoff {superseded.cutoff:g}) was {kind} v{by.version} "
        f"(cutoff {by.cutoff:g}): it read v{superseded.version}'s evidence; v{by.version} is watched on its own."
    )


def policy_superseded_resolve(*, actor: Actor, user, superseded: PolicyVersion, by: PolicyVersion) -> None:
    """Close the open rechecks and alarms of `superseded` (registered with governance's
    `register_on_supersede`; runs inside the signing transaction)."""
    now, note = timezone.now(), _note(superseded, by)
    versions = {"old": superseded.version, "new": by.version}
    for recheck in Recheck.objects.select_for_update().filter(policy=superseded, status=RecheckStatus.OPEN):
        recheck.status, recheck.resolution, recheck.note = RecheckStatus.CLOSED, RecheckResolution.SIGNED, note
        recheck.closed_at, recheck.closed_by, recheck.new_policy = now, user, by
        recheck.save(update_fields=["status", "resolution", "note", "closed_at", "closed_by", "new_policy"])
        audit_record(
            actor=actor,
            action=Action.RECHECK_CLOSED,
            object_type="recheck",
            object_id=recheck.pk,
            route=by.route.slug,
            payload={
                "status": {"old": RecheckStatus.OPEN, "new": RecheckStatus.CLOSED},
                "resolution": RecheckResolution.SIGNED,
                "reason": SUPERSEDED,
                "note": note,
                "new_policy": by.pk,
                "policy_version": versions,
            },
        )
    for alarm in Alarm.objects.select_for_update().filter(policy=superseded, status=AlarmStatus.OPEN):
        alarm.status, alarm.closed_at, alarm.closed_reason, alarm.note = AlarmStatus.CLOSED, now, SUPERSEDED, note
        alarm.save(update_fields=["status", "closed_at", "closed_reason", "note"])
        audit_record(
            actor=actor,
            action=Action.ALARM_CLOSED,
            object_type="alarm",
            object_id=alarm.pk,
            route=by.route.slug,
            payload={
                "kind": alarm.kind,
                "reason": SUPERSEDED,
                "status": {"old": AlarmStatus.OPEN, "new": AlarmStatus.CLOSED},
                "note": note,
                "policy_version": versions,
            },
        )
