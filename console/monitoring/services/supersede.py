"""Rechecks and alarms of a version that a signature takes out of force.

Both are readings of that version: a recheck asks whether *its* evidence covers new versions, an
alarm compares days with *its* signing window at *its* cutoff. Carried over, they would judge the
new version by evidence it was not signed on, so they are closed in the signing transaction, each
with an audit event and a note naming both versions. The new version is watched on its own
evidence from then on: traffic its evidence does not cover opens a recheck of its own, and days
outside its limits an alarm of its own.
"""

from __future__ import annotations

from audit.services import Actor
from console.governance.models import PolicyVersion
from console.monitoring.models import Alarm, AlarmStatus, Recheck, RecheckResolution, RecheckStatus
from console.monitoring.services.alarms import alarm_closed_record
from console.monitoring.services.rechecks import recheck_closed_record

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
    note = _note(superseded, by)
    versions = {"old": superseded.version, "new": by.version}
    for recheck in (
        Recheck.objects.select_for_update().select_related("route").filter(policy=superseded, status=RecheckStatus.OPEN)
    ):
        recheck_closed_record(
            actor=actor,
            user=user,
            recheck=recheck,
            resolution=RecheckResolution.SIGNED,
            note=note,
            new_policy=by,
            context={"reason": SUPERSEDED, "policy_version": versions},
        )
    for alarm in (
        Alarm.objects.select_for_update().select_related("route").filter(policy=superseded, status=AlarmStatus.OPEN)
    ):
        alarm.note = note
        alarm_closed_record(
            actor=actor, alarm=alarm, reason=SUPERSEDED, context={"note": note, "policy_version": versions}
        )
