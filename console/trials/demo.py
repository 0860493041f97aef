"""Demo trial, added at the end of `load_demo`: the built-in reference candidate over HR policy's
imported graded set, run in process so the tour opens on a finished trial."""

from __future__ import annotations

from typing import Any

from audit.services import Actor
from console.trials import services
from console.trials.models import Trial
from console.trials.validation import trial_spec


def demo_trial(*, actor: Actor, routes: dict, users: dict, **_: Any) -> Trial | None:
    route, reviewer = routes.get("hr-policy"), users.get("reviewer")
    if route is None or reviewer is None or Trial.objects.filter(route=route).exists():
        return None
    spec = trial_spec({"name": "reference (span support)", "kind": "reference", "repeats": 3})
    trial = services.trial_start(actor=actor, user=reviewer, route=route, spec=spec)
    # The jobs queued by trial_start find nothing left (or the sweeper does when no broker runs).
    services.trial_advance(trial_id=trial.pk, budget_s=600)
    return trial
