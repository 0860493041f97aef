"""The ledger's section of the admins' route pages: the route's name and graders per item; it is
also the section that creates routes (console/accounts/hooks.py)."""

from __future__ import annotations

from typing import Any

from django import forms

from audit.services import Actor
from console.accounts.hooks import RouteSection, register_route_section
from console.accounts.models import Route
from console.accounts.services import route_create
from console.ledger.services import route_update

MAX_GRADERS_PER_ITEM = 10


class RouteBasicsForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        label="Name",
        help_text="How the route is called on every page.",
        error_messages={"required": "Give the route a name."},
    )
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


def _initial(route: Route | None) -> dict[str, Any]:
    if route is None:
        return {"name": "", "graders_per_item": Route._meta.get_field("graders_per_item").default}
    return {"name": route.name, "graders_per_item": route.graders_per_item}


def _save(*, actor: Actor, user, route: Route, data: dict[str, Any]) -> bool:
    return route_update(actor=actor, route=route, name=data["name"], graders_per_item=data["graders_per_item"])


def _create(*, actor: Actor, slug: str, data: dict[str, Any]) -> Route:
    return route_create(actor=actor, slug=slug, name=data["name"], graders_per_item=data["graders_per_item"])


def register() -> None:
    register_route_section(
        RouteSection(
            key="route",
            title="Route",
            order=10,
            form_class=RouteBasicsForm,
            initial=_initial,
            save=_save,
            create=_create,
        )
    )
