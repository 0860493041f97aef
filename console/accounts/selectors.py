"""Reads for the admins' workspace pages (routes, their members, API tokens) and for each person's
Security page (their own sessions and tokens)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from console.accounts import hooks, permissions
from console.accounts.models import ApiToken, Role, RoleGrant, Route, UserSession
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


# --- the Security page: a person's own sessions and tokens, nobody else's --------------------------


def own_sessions(user) -> list[UserSession]:
    """The person's open browser sessions, the most recently seen first (ended ones are left out)."""
    live = Session.objects.filter(expire_date__gt=timezone.now()).values("session_key")
    return list(UserSession.objects.filter(user=user, session_key__in=live).order_by("-last_seen_at", "-pk"))


def own_session_get(user, pk: int) -> UserSession:
    """One of the person's sessions; 404 for anyone else's, so that their existence is not told."""
    row = UserSession.objects.filter(pk=pk, user=user).first()
    if row is None:
        raise NotFound("No such session of yours.")
    return row


def own_tokens(user) -> list[ApiToken]:
    """The person's API tokens that are not revoked (expired ones too, marked), newest first."""
    return list(ApiToken.objects.filter(user=user, revoked_at__isnull=True).order_by("-created_at", "-pk"))


def own_token_get(user, pk: int) -> ApiToken:
    token = ApiToken.objects.filter(pk=pk, user=user).select_related("user").first()
    if token is None:
        raise NotFound("No such token of yours.")
    return token


def own_grants(user) -> list[RoleGrant]:
    """The roles a person (and so each of their tokens) acts with, by route."""
    return list(RoleGrant.objects.filter(user=user).select_related("route").order_by("route__slug", "role"))
