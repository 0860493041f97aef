"""The hook points for a route's settings: the admins' route pages (`/routes/new/`,
`/routes/<slug>/settings/`), the lists of routes, and `manage.py create_route`.

The route itself (`models.Route`) lives here, on the ground floor, and `services.route_create`
writes it; its settings belong to the apps above, each in its own one-to-one table: its name to
the ledger (the route's own column), its graders per item and guidelines to grading, its shadow
pipeline to shadow, its monitoring limits to monitoring. Accounts may not import them
(docs/architecture.md), so each app registers from its `AppConfig.ready()`:

- a section of the route pages (`register_route_section`): a form, how to fill it from a route,
  and how to save it through the app's own audited service. The pages show the sections in order
  and save them in one transaction (`services.route_settings_create` / `route_settings_update`);
- a field of the lists of routes (`register_route_field`): a value per route, as an annotation of
  the one query that reads the routes (the workspace's table, `GET /api/v1/routes`);
- options of `manage.py create_route` (`register_create_route_option`): arguments, and how to
  apply them to the route the command created (or to an existing one) in the command's
  transaction, through the app's own audited service.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.db.models import Expression, QuerySet


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


@dataclass(frozen=True)
class RouteField:
    name: str  # the attribute each listed route gets, and its key in `GET /api/v1/routes`
    label: str  # the column's heading on the workspace's list of routes
    # The value as an expression over `Route` rows (a related column with its default, a subquery).
    expression: Callable[[], Expression]


_fields: dict[str, RouteField] = {}


def register_route_field(field: RouteField) -> None:
    _fields[field.name] = field


def route_fields() -> list[RouteField]:
    return list(_fields.values())


def with_route_fields(routes: QuerySet) -> QuerySet:
    """`routes` with every registered field annotated, read in the same query."""
    return routes.annotate(**{field.name: field.expression() for field in _fields.values()})


@dataclass(frozen=True)
class CreateRouteOption:
    key: str  # unique; the app registering the options
    # add_arguments(parser): the app's options of `manage.py create_route`.
    add_arguments: Callable[[Any], None]
    # apply(*, actor, route, created, options) -> a line for the command to print, or None. Called
    # with created=True on the route the command has just made, and with created=False on an existing
    # route when `changes_existing` said so; inside the command's transaction.
    apply: Callable[..., str | None]
    # check(options): refuse bad values (InvalidInput) before anything is written.
    check: Callable[[dict[str, Any]], None] | None = None
    # changes_existing(options) -> True when the options ask to change a route that exists already
    # (the command then applies those apps' options to it instead of creating the route).
    changes_existing: Callable[[dict[str, Any]], bool] | None = None


_create_route_options: dict[str, CreateRouteOption] = {}


def register_create_route_option(option: CreateRouteOption) -> None:
    _create_route_options[option.key] = option


def create_route_options() -> list[CreateRouteOption]:
    return sorted(_create_route_options.values(), key=lambda option: option.key)
