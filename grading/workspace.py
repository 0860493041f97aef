"""Grading's section of the admins' route pages (console/accounts/hooks.py): how many graders grade
each item and the grading guidelines, saved through `route_grading_set` (the reviewers' guidelines
editor goes through the same service); its column of the workspace's route list and of
`GET /api/v1/routes` (graders per item); and its options of `manage.py create_route`."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.db.models import OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from audit.services import Actor
from console.accounts.hooks import (
    CreateRouteOption,
    RouteField,
    RouteSection,
    register_create_route_option,
    register_route_field,
    register_route_section,
)
from console.accounts.models import Route
from grading.models import DEFAULT_GRADERS_PER_ITEM, RouteGradingSettings
from grading.selectors import route_grading_settings
from grading.services.pool import guidelines_sha256, route_grading_set

MAX_GUIDELINES = 20_000
MAX_GRADERS_PER_ITEM = 10


class RouteGradingForm(forms.Form):
    graders_per_item = forms.IntegerField(
        min_value=1,
        max_value=MAX_GRADERS_PER_ITEM,
        label="Graders per item",
        help_text="Independent grades each item needs before it gets a final label. New items take a change.",
        error_messages={
            "required": "Say how many graders grade each item.",
            "invalid": "Give a whole number of graders.",
            "min_value": "At least one grader must grade each item.",
            "max_value": f"At most {MAX_GRADERS_PER_ITEM} graders per item.",
        },
    )
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

    def add_prefix(self, field_name: str) -> str:
        # Graders per item sat in the route's own section until grading kept its settings in its own
        # table; the field keeps the name pages and scripts post (`route-graders_per_item`).
        if field_name == "graders_per_item":
            return "route-graders_per_item"
        return super().add_prefix(field_name)

    def clean_guidelines(self) -> str:
        return self.cleaned_data["guidelines"].replace("\r\n", "\n")

    def clean_base(self) -> str:
        base = self.cleaned_data["base"]
        return base if re.fullmatch(r"[0-9a-f]{64}", base) else ""


def _initial(route: Route | None) -> dict[str, Any]:
    if route is None:
        return {"graders_per_item": DEFAULT_GRADERS_PER_ITEM, "guidelines": "", "base": guidelines_sha256("")}
    settings = route_grading_settings(route)
    return {
        "graders_per_item": settings.graders_per_item,
        "guidelines": settings.guidelines,
        "base": guidelines_sha256(settings.guidelines),
    }


def _save(*, actor: Actor, user, route: Route, data: dict[str, Any]) -> bool:
    return route_grading_set(
        actor=actor,
        route=route,
        guidelines=data["guidelines"],
        graders_per_item=data["graders_per_item"],
        base_sha256=data.get("base") or None,
    )


def _graders_per_item():
    own = RouteGradingSettings.objects.filter(route=OuterRef("pk")).values("graders_per_item")[:1]
    return Coalesce(Subquery(own), Value(DEFAULT_GRADERS_PER_ITEM))


def _add_create_route_arguments(parser) -> None:
    parser.add_argument("--graders-per-item", type=int, default=DEFAULT_GRADERS_PER_ITEM)
    parser.add_argument("--guidelines", default="", help="Grading guidelines (Markdown).")


def _apply_create_route_options(*, actor: Actor, route: Route, created: bool, options: dict[str, Any]) -> str | None:
    if not created:
        return None  # on an existing route, the command sets shadow's pipeline alone
    route_grading_set(
        actor=actor, route=route, guidelines=options["guidelines"], graders_per_item=options["graders_per_item"]
    )
    return None


def register() -> None:
    register_route_section(
        RouteSection(
            key="grading",
            title="Grading",
            order=20,
            form_class=RouteGradingForm,
            initial=_initial,
            save=_save,
        )
    )
    register_route_field(RouteField(name="graders_per_item", label="Graders per item", expression=_graders_per_item))
    register_create_route_option(
        CreateRouteOption(key="grading", add_arguments=_add_create_route_arguments, apply=_apply_create_route_options)
    )
