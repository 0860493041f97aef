"""The ledger's section of the admins' route pages: the route's name; it is also the section that
creates routes (console/accounts/hooks.py). The other sections save their apps' own settings."""

from __future__ import annotations

from typing import Any

from django import forms

from audit.services import Actor
from console.accounts.hooks import RouteSection, register_route_section
from console.accounts.models import Route
from console.accounts.services import route_create
from console.ledger.services import route_update


class RouteBasicsForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        label="Name",
        help_text="How the route is called on every page.",
        error_messages={"required": "Give the route a name."},
    )


def _initial(route: Route | None) -> dict[str, Any]:
    return {"name": route.name if route is not None else ""}


def _save(*, actor: Actor, user, route: Route, data: dict[str, Any]) -> bool:
    return route_update(actor=actor, route=route, name=data["name"])


def _create(*, actor: Actor, slug: str, data: dict[str, Any]) -> Route:
    return route_create(actor=actor, slug=slug, name=data["name"])


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
