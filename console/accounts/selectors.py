"""Reads for the admins' workspace pages: routes, their members, API tokens."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet

from console.accounts import hooks, permissions
from console.accounts.models import ApiToken, Role, RoleGrant, Route
from console.core.errors import Forbidden, NotFound

_ADMINS_ONLY = "Only admins may manage routes, members and API tokens."


def require_workspace_admin(user) -> None:
    if not permissions.can_manage_workspace(user):
        raise Forbidden(_ADMINS_ONLY)


def route_for_admin(user, slug: str):
    return permissions.route_for(
        user,
        slug,
        allowed=lambda user, route=None: permissions.can_manage_workspace(user),
        refused=_ADMINS_ONLY,
        missing="No such route.",
    )


def workspace_routes() -> QuerySet:
    """Every route with how many role grants name it, and the fields the apps above register
    (hooks.register_route_field), in one query."""
    return hooks.with_route_fields(Route.objects.annotate(members=Count("grants")).order_by("slug"))


def route_grants(route) -> QuerySet[RoleGrant]:
    """The grants that let people act on `route`: its own, then those on every route."""
    return (
        RoleGrant.objects.filter(Q(route=route) | Q(route__isnull=True))
        .select_related("user")
        .order_by("route", "user__username", "role")
    )


def grant_on_route(route, pk: int) -> RoleGrant:
    grant = RoleGrant.objects.filter(pk=pk, route=route).select_related("user").first()
    if grant is None:
        raise NotFound("No such role on this route.")
    return grant


def tokens_list() -> QuerySet[ApiToken]:
    return ApiToken.objects.select_related("user").order_by("revoked_at", "-created_at")


def token_get(pk: int) -> ApiToken:
    token = ApiToken.objects.filter(pk=pk).select_related("user").first()
    if token is None:
        raise NotFound("No such token.")
    return token


def admin_addresses() -> list[str]:
    """The e-mail addresses of the console's active admins (superusers and global admin grants)."""
    users = get_user_model().objects.filter(is_active=True).filter(Q(is_superuser=True) | Q(grants__role=Role.ADMIN))
    return sorted({user.email for user in users.distinct()})


def role_grants_all() -> QuerySet[RoleGrant]:
    """Every role grant with its person and route, for the admins' overview (one query)."""
    return RoleGrant.objects.select_related("user", "route").order_by("user__username", "route__slug", "role")
