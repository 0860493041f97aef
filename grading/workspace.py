"""Grading's section of the admins' route settings page: the grading guidelines
(console/accounts/hooks.py). Saved through the same service as the reviewers' guidelines editor."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from audit.services import Actor
from console.accounts.hooks import RouteSection, register_route_section
from console.accounts.models import Route
from grading.services.pool import guidelines_sha256, route_guidelines_update

MAX_GUIDELINES = 20_000


class RouteGuidelinesForm(forms.Form):
    guidelines = forms.CharField(
        required=False,
        max_length=MAX_GUIDELINES,
        label="Grading guidelines",
        help_text="Markdown, shown to the route's graders beside every item.",
        widget=forms.Textarea(attrs={"rows": 8, "class": "mono"}),
        error_messages={"max_length": f"Keep the guidelines under {MAX_GUIDELINES:,} characters."},
    )
    # The sha256 of the text the form was filled with: a text published meanwhile is not overwritten.
    base = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)

    def clean_guidelines(self) -> str:
        return self.cleaned_data["guidelines"].replace("\r\n", "\n")

    def clean_base(self) -> str:
        base = self.cleaned_data["base"]
        return base if re.fullmatch(r"[0-9a-f]{64}", base) else ""


def _initial(route: Route | None) -> dict[str, Any]:
    text = route.guidelines if route is not None else ""
    return {"guidelines": text, "base": guidelines_sha256(text)}


def _save(*, actor: Actor, user, route: Route, data: dict[str, Any]) -> bool:
    old = route.guidelines
    updated = route_guidelines_update(
        actor=actor, route=route, guidelines=data["guidelines"], base_sha256=data.get("base") or None
    )
    return updated.guidelines != old


def register() -> None:
    register_route_section(
        RouteSection(
            key="grading",
            title="Grading guidelines",
            order=20,
            form_class=RouteGuidelinesForm,
            initial=_initial,
            save=_save,
        )
    )
