"""Audit jobs: the periodic signed checkpoint of the chain's head."""

import logging

from audit import services
from console.core.errors import Conflict
from console.core.jobs import job

logger = logging.getLogger(__name__)


@job("audit.audit_checkpoint", soft_time_limit=600)
def audit_checkpoint() -> dict:
    """Beat job (AUDIT_CHECKPOINT_SECONDS): sign the head unless the chain since the last checkpoint
    is broken. A break is recorded (the health API reports it) and emailed to the admins the first
    time this job finds it (`chain_break_report`); `audit_verify` names the event and why."""
    try:
        return services.audit_checkpoint_create()
    except Conflict as exc:
        logger.error("audit checkpoint refused: %s", exc.message)
        return {"signed": False, "reason": exc.message}
