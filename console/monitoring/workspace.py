"""Monitoring's section of the admins' route pages: how old the signed evidence's newest label may
grow (console/accounts/hooks.py). Saved through `route_monitoring_set`, as the route's
monitoring page does."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from audit.services import Actor
from console.accounts.hooks import RouteSection, register_route_section
from console.accounts.models import Route
from console.monitoring.models import LABEL_AGE_MAX_DAYS
from console.monitoring.selectors import label_age_limit_days
from console.monitoring.services.evidence import route_monitoring_set


class RouteMonitoringForm(forms.Form):
    evidence_max_label_age_days = forms.IntegerField(
        min_value=1,
        max_value=LABEL_AGE_MAX_DAYS,
        label="Evidence goes stale after (days)",
        help_text="A signed cutoff asks for a recheck once the newest label of its evidence is this many days old.",
        error_messages={
            "required": "Say after how many days the evidence goes stale.",
            "invalid": "Give a whole number of days.",
            "min_value": "At least one day.",
            "max_value": f"At most {LABEL_AGE_MAX_DAYS} days.",
        },
    )


def _initial(route: Route | None) -> dict[str, Any]:
    days = label_age_limit_days(route.pk) if route is not None else settings.EVIDENCE_MAX_LABEL_AGE_DAYS
    return {"evidence_max_label_age_days": days}


def _save(*, actor: Actor, user, route: Route, data: dict[str, Any]) -> bool:
    days = data["evidence_max_label_age_days"]
    if days == label_age_limit_days(route.pk):
        return False
    route_monitoring_set(actor=actor, user=user, route=route, evidence_max_label_age_days=days)
    return True


def register() -> None:
    register_route_section(
        RouteSection(
            key="monitoring",
            title="Monitoring",
            order=40,
            form_class=RouteMonitoringForm,
            initial=_initial,
            save=_save,
        )
    )
