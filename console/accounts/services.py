"""Users, role grants, API tokens and the workspace's routes. Every change is audited in its own
transaction; the manage.py commands and the workspace pages call the same functions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts import hooks
from console.accounts.models import (
    ApiToken,
    GrantSource,
    ProviderSession,
    Role,
    RoleGrant,
    Route,
    UserSession,
    hash_token,
)
from console.core.errors import Conflict, InvalidInput, detail


@dataclass(frozen=True)
class IssuedToken:
    key: str
    token: ApiToken


def route_create(*, actor: Actor, slug: str, name: str) -> Route:
    """Create a route: the tenant every other app's rows hang from. Its settings are the apps'
    own, saved by their own services in the caller's transaction (the route pages' sections,
    `manage.py create_route`'s options); until then each app's defaults apply."""
    route = Route(slug=slug, name=name)
    route.full_clean()
    with transaction.atomic():
        route.save()
        audit_record(
            actor=actor,
            action=Action.ROUTE_CREATED,
            object_type="route",
            object_id=route.pk,
            route=slug,
            payload=field_changes(new={"slug": slug, "name": name}),
        )
    return route


def user_ensure(*, actor: Actor, username: str, password: str | None = None, email: str = ""):
    """Return the user, creating it (audited) if it does not exist yet."""
    User = get_user_model()
    with transaction.atomic():
        user = User.objects.filter(username=username).first()
        if user is not None:
            return user
        user = User(username=username, email=email)
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.full_clean(exclude=["password"])
        user.save()
        audit_record(
            actor=actor,
            action=Action.USER_CREATED,
            object_type="user",
            object_id=user.pk,
            payload=field_changes(new={"username": username}),
        )
    return user


def role_grant(*, actor: Actor, user, role: str, route=None, source: str = GrantSource.MANUAL) -> RoleGrant:
    """Grant `role` on `route` (a ledger Route), or on every route when it is None. `source` says who
    made it: an admin, or the identity provider's roles claim (taken away when the claim drops it)."""
    if role not in Role.values:
        raise InvalidInput(f"Unknown role {role!r}; choose from {', '.join(Role.values)}.")
    with transaction.atomic():
        grant, created = RoleGrant.objects.get_or_create(user=user, role=role, route=route, defaults={"source": source})
        if created:
            audit_record(
                actor=actor,
                action=Action.ROLE_GRANTED,
                object_type="user",
                object_id=user.pk,
                route=route.slug if route else "",
                payload={
                    "role": {"old": None, "new": role},
                    "route": route.slug if route else None,
                    "username": user.get_username(),
                    **({"source": str(source)} if source != GrantSource.MANUAL else {}),
                },
            )
    return grant


def role_revoke(*, actor: Actor, grant: RoleGrant) -> None:
    """Take one role grant away; the person keeps their account, their other grants and their history."""
    with transaction.atomic(durable=True):
        grant = RoleGrant.objects.select_for_update(of=("self",)).select_related("user", "route").get(pk=grant.pk)
        scope = grant.route.slug if grant.route_id else None
        grant.delete()
        audit_record(
            actor=actor,
            action=Action.ROLE_REVOKED,
            object_type="user",
            object_id=grant.user_id,
            route=scope or "",
            payload={"role": {"old": grant.role, "new": None}, "route": scope, "username": grant.user.get_username()},
        )


def member_add(*, actor: Actor, route, username: str, role: str, email: str = "") -> RoleGrant:
    """Give `username` a role on `route`, creating the person (with `email`) when nobody has that
    username yet. A new person has no password: they sign in through the identity provider, or an
    admin sets one with `manage.py changepassword`."""
    User = get_user_model()
    with transaction.atomic(durable=True):
        user = User.objects.filter(username=username).first()
        if user is None:
            if not email:
                raise InvalidInput(
                    f"Nobody is called {username!r} yet: give an email address to add them as a new person.",
                    details=[detail("email", "required", "needed for a new person")],
                )
            user = user_ensure(actor=actor, username=username, email=email)
        if RoleGrant.objects.filter(user=user, role=role, route=route).exists():
            raise Conflict(f"{username} already is {Role(role).label.lower()} on this route.", code="already_granted")
        return role_grant(actor=actor, user=user, role=role, route=route)


def token_issue(
    *, actor: Actor, user, name: str = "", expires_at: datetime | None = None, rate_per_minute: int | None = None
) -> IssuedToken:
    """A new token for `user`, acting with the user's roles. The key is returned here and never again:
    only its SHA-256 is stored. `rate_per_minute` None: the setting's rate (API_TOKEN_RATE_PER_MINUTE)."""
    key = ApiToken.new_key()
    token = ApiToken(
        user=user,
        key_hash=hash_token(key),
        prefix=key[:12],
        name=name,
        expires_at=expires_at,
        rate_per_minute=rate_per_minute,
    )
    token.full_clean()
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidInput("The expiry must lie in the future.", code="expiry_past")
    with transaction.atomic():
        token.save()
        audit_record(
            actor=actor,
            action=Action.TOKEN_ISSUED,
            object_type="user",
            object_id=user.pk,
            payload={
                "token_prefix": token.prefix,
                "token": {
                    "old": None,
                    "new": {
                        "name": name,
                        "owner": user.get_username(),
                        "expires_at": expires_at.isoformat() if expires_at else None,
                        "rate_per_minute": rate_per_minute,
                    },
                },
            },
        )
    return IssuedToken(key=key, token=token)


def tokens_revoke(*, actor: Actor, token_ids: list[int]) -> int:
    """Revoke the tokens that are still live among `token_ids`, one audit event each; returns how many."""
    with transaction.atomic(durable=True):
        live = list(
            ApiToken.objects.select_for_update()
            .filter(pk__in=token_ids, revoked_at__isnull=True)
            .select_related("user")
            .order_by("pk")
        )
        now = timezone.now()
        for token in live:
            token.revoked_at = now
            token.save(update_fields=["revoked_at"])
            audit_record(
                actor=actor,
                action=Action.TOKEN_REVOKED,
                object_type="user",
                object_id=token.user_id,
                payload={
                    "token_prefix": token.prefix,
                    "name": token.name,
                    "revoked_at": {"old": None, "new": now.isoformat()},
                },
            )
    return len(live)


def token_rate_set(*, actor: Actor, token: ApiToken, rate_per_minute: int | None) -> bool:
    """Set the calls a minute the token may make (None: the setting's rate); False when it already had
    that rate (nothing is written). Takes effect on the token's next call, with its count started afresh:
    calls spaced at the old rate say nothing about the new one."""
    with transaction.atomic(durable=True):
        token = ApiToken.objects.select_for_update().select_related("user").get(pk=token.pk)
        old = token.rate_per_minute
        if old == rate_per_minute:
            return False
        token.rate_per_minute = rate_per_minute
        token.rate_allowance_at = None
        token.full_clean()
        token.save(update_fields=["rate_per_minute", "rate_allowance_at"])
        audit_record(
            actor=actor,
            action=Action.TOKEN_RATE_CHANGED,
            object_type="user",
            object_id=token.user_id,
            payload={
                "token_prefix": token.prefix,
                "name": token.name,
                **field_changes(old={"rate_per_minute": old}, new={"rate_per_minute": rate_per_minute}),
            },
        )
    return True


def route_settings_create(*, actor: Actor, user, slug: str, sections: dict[str, dict[str, Any]]):
    """Create a route with its settings: the section that creates routes (the ledger's) makes it, then
    every other registered section saves its part, all in one transaction."""
    creator = hooks.route_creator()
    with transaction.atomic(durable=True):
        route = creator.create(actor=actor, slug=slug, data=sections[creator.key])
        for section in hooks.route_sections():
            if section.create is None:
                section.save(actor=actor, user=user, route=route, data=sections[section.key])
    return route


def route_settings_update(*, actor: Actor, user, route, sections: dict[str, dict[str, Any]]) -> list[str]:
    """Save every section of a route's settings in one transaction; returns the titles of those changed."""
    changed = []
    with transaction.atomic(durable=True):
        for section in hooks.route_sections():
            if section.save(actor=actor, user=user, route=route, data=sections[section.key]):
                changed.append(section.title)
    return changed


def sign_in_lockout_record(*, username: str, address: str, by: str, failures: int, until: float) -> None:
    """Audit the failure that used up a username's (`by="user"`) or a client's (`by="client"`) wrong
    passwords: from now until `until` (a Unix time) its attempts are refused. The actor is the
    throttle: the person typing may not be who the username names. Called by django-axes' handler
    (console.accounts.throttle) in the transaction that counted the failure."""
    locked_until = datetime.fromtimestamp(until, tz=UTC).isoformat()
    with transaction.atomic():
        audit_record(
            actor=Actor.system("sign-in-throttle"),
            action=Action.SIGN_IN_LOCKED_OUT,
            object_type="sign_in",
            object_id=username if by == "user" else address,
            payload={
                "username": username,
                "client": address,
                "failures": failures,
                **field_changes(old={"locked_until": None}, new={"locked_until": locked_until}),
            },
        )


# --- browser sessions: recorded at sign-in, listed and ended on the Security page -----------------


def user_session_record(*, user, session_key: str, user_agent: str, ip_address: str) -> UserSession:
    """Record the session a sign-in opened. Not audited: a session is not a record of anything (as
    django_session); ending one is. The person's rows of sessions that have ended since are dropped."""
    now = timezone.now()
    row, _created = UserSession.objects.update_or_create(
        session_key=session_key,
        defaults={
            "user": user,
            "created_at": now,
            "last_seen_at": now,
            "user_agent": user_agent[:300],
            "ip_address": ip_address[:64],
        },
    )
    UserSession.objects.filter(user=user).exclude(
        session_key__in=Session.objects.filter(expire_date__gt=now).values("session_key")
    ).exclude(pk=row.pk).delete()
    return row


def user_session_touch(*, user, session_key: str, user_agent: str, ip_address: str) -> None:
    """A request of a signed-in session: its last-seen time and address move on. A session opened
    before sessions were recorded is recorded at its first request."""
    now = timezone.now()
    updated = UserSession.objects.filter(session_key=session_key, user=user).update(
        last_seen_at=now, ip_address=ip_address[:64], user_agent=user_agent[:300]
    )
    if not updated:
        UserSession.objects.filter(session_key=session_key).delete()  # a row of someone else's ended session
        UserSession.objects.create(
            user=user,
            session_key=session_key,
            created_at=now,
            last_seen_at=now,
            user_agent=user_agent[:300],
            ip_address=ip_address[:64],
        )


def user_sessions_end(*, actor: Actor, user, sessions: list[UserSession]) -> int:
    """End these sessions of `user` (signed out wherever they are), one `session_ended` event each;
    returns how many were still open. The session key, a bearer secret, never enters the trail."""
    now = timezone.now()
    ended = 0
    with transaction.atomic(durable=True):
        rows = list(
            UserSession.objects.select_for_update().filter(user=user, pk__in=[s.pk for s in sessions]).order_by("pk")
        )
        for row in rows:
            Session.objects.filter(session_key=row.session_key).delete()
            ProviderSession.objects.filter(session_key=row.session_key).delete()
            row.delete()
            audit_record(
                actor=actor,
                action=Action.SESSION_ENDED,
                object_type="user",
                object_id=user.pk,
                payload={
                    "username": user.get_username(),
                    "session": {
                        "created_at": row.created_at.isoformat(),
                        "user_agent": row.user_agent,
                        "ip_address": row.ip_address,
                    },
                    **field_changes(old={"ended_at": None}, new={"ended_at": now.isoformat()}),
                },
            )
            ended += 1
    return ended
