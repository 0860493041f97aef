"""The roles claim: which of the console's roles a person holds, read from the provider at sign-in.

A value is `role` (that role on every route) or `role:route-slug` (on that route only), with `role`
one of the console's roles (console.accounts.models.Role). A leading slash is ignored, so Keycloak's
full group paths (`/reviewer:it-support`) read the same. Values that name no role, a route the
console does not have, or `admin` on one route (admin is a role of the whole console) are ignored:
a provider's groups are mostly about other things."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from console.accounts.models import Role

RoleScope = tuple[str, str | None]  # (role, route slug or None for every route)


def claim_values(claim: Any) -> list[str]:
    """The claim as a list of strings: providers send a list, some a single string."""
    if isinstance(claim, str):
        return [claim]
    if isinstance(claim, list | tuple):
        return [value for value in claim if isinstance(value, str)]
    return []


def roles_from_claim(claim: Any, *, route_slugs: Iterable[str]) -> set[RoleScope]:
    known_routes = set(route_slugs)
    roles: set[RoleScope] = set()
    for value in claim_values(claim):
        role, _, slug = value.strip().lstrip("/").partition(":")
        if role not in Role.values:
            continue
        if not slug:
            roles.add((role, None))
        elif slug in known_routes and role != Role.ADMIN:
            roles.add((role, slug))
    return roles
