"""The hook point for the admins' route pages (`/routes/new/`, `/routes/<slug>/settings/`).

The route itself (`models.Route`) lives here, on the ground floor, and `services.route_create`
writes it; its settings belong to the apps above: its name and graders per item to the ledger,
its grading guidelines to grading, its shadow pipeline to shadow, its monitoring limits to
monitoring. Accounts may not import them (docs/architecture.md), so each app registers a section
from its `AppConfig.ready()`: a form, how to fill it from a route, and how to save it through the
app's own audited service. The pages show the sections in order and save them in one transaction
(`services.route_settings_create` / `route_settings_update`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms


@dataclass(frozen=True)
class RouteSection:
    key: str  # the form prefix; unique
    title: str
    order: int
    form_class: type[forms.Form]
    # The form's initial values for a route; `None` is a route not created yet (the defaults).
    initial: Callable[[Any], dict[str, Any]]
    # save(*, actor, user, route, data) -> True when it changed something (and audited it).
    save: Callable[..., bool]
    # create(*, actor, slug, data) -> the new route; exactly one section (the ledger's) has it.
    create: Callable[..., Any] | None = None


_sections: dict[str, RouteSection] = {}


def register_route_section(section: RouteSection) -> None:
    _sections[section.key] = section


def route_sections() -> list[RouteSection]:
    return sorted(_sections.values(), key=lambda s: (s.order, s.key))


def route_creator() -> RouteSection:
    creators = [s for s in _sections.values() if s.create is not None]
    if len(creators) != 1:
        raise RuntimeError(f"exactly one route section must create routes; found {len(creators)}")
    return creators[0]
