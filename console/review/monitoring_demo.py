"""Demo step of monitoring, called at the end of `load_demo`: IT support's policy is signed on its
traffic up to four days ago, then a new model (`gen-2026-12`) takes part of the traffic in the last
three days with lower gate scores. Ingest opens the release recheck (with its planned sample), and
the daily monitor opens the drift alarm(s) of those days."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from audit.services import Actor
from console.governance import services as governance
from console.governance.demo import policy_draft_body
from console.governance.models import IN_FORCE, PolicyVersion
from console.governance.validation import parse_draft
from console.ledger import services as ledger
from console.ledger.validation import validate_batch
from console.monitoring.services.alarms import monitor_run
from console.monitoring.services.rechecks import rechecks_open
from console.review.demo import demo_records

NEW_MODEL = "gen-2026-12"
SCORE_DROP = 0.2


def demo_monitoring(*, actor: Actor, routes: dict, users: dict, decisions: int = 240, **_: Any) -> None:
    lead, reviewer, it = users.get("lead"), users.get("reviewer"), routes.get("it-support")
    if lead is None or reviewer is None or it is None:
        return
    if PolicyVersion.objects.filter(route=it, status__in=IN_FORCE).exists():
        return
    window_end = (datetime.now(UTC) - timedelta(days=4)).date()
    body = policy_draft_body(
        "it-support",
        0.7,
        lead.username,
        "Signed on the traffic up to four days ago, at the cutoff the gate uses.",
        "I can't answer this reliably. The IT service desk will pick it up within 8 hours.",
    )
    draft = governance.policy_draft(
        actor=actor,
        user=reviewer,
        route=it,
        draft=parse_draft(body | {"filters": {"to": window_end.isoformat()}}, route=it),
    )
    governance.policy_sign(actor=actor, user=lead, policy=draft, evidence_sha256=draft.evidence_sha256)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)
    records = []
    for record in demo_records("it-support", decisions, seed=2612, start=start, days=3, prefix="upgrade"):
        record["versions"]["model"] = NEW_MODEL
        score = round(max(0.0, record["gate"]["score"] - SCORE_DROP), 4)
        record["gate"]["score"] = score
        if score < record["gate"]["cutoff"]:
            record["outcome"], record["served_answer"] = "refused", None
        records.append(record)
    items, errors = validate_batch(records)
    assert not errors, errors[:3]
    ids = ledger.decision_ingest(actor=actor, items=items, routes=routes).created_ids
    # The after-ingest job does this in a running system; the demo may have no worker yet.
    rechecks_open(actor=actor, decision_ids=ids)
    monitor_run(actor=actor, route_slug="it-support")
