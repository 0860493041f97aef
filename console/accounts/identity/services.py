"""Sign-in through the provider, applied to the console: the person (found by issuer and subject),
their roles from the roles claim, deactivation of people the provider no longer knows, and the end
of sessions the provider ended. Every change is audited in its transaction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts.identity.roles import RoleScope, roles_from_claim
from console.accounts.models import GrantSource, Identity, ProviderSession, RoleGrant, Route, UserSession
from console.accounts.services import role_grant, user_ensure
from console.core.errors import Conflict, InvalidInput

User = get_user_model()


@dataclass(frozen=True)
class SignIn:
    user: Any
    identity: Identity
    granted: list[RoleScope]
    revoked: list[RoleScope]


def username_from_claims(claims: dict[str, Any]) -> str:
    """`preferred_username`, else `email`, else `sub` (README, "Sign-in with your identity provider")."""
    for name in ("preferred_username", "email", "sub"):
        value = claims.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()[:150]
    raise InvalidInput("The provider named nobody: the ID token has no sub.", code="no_subject")


def identity_sign_in(*, issuer: str, claims: dict[str, Any], roles_claim: str) -> SignIn:
    """Apply one sign-in: find the person by (issuer, sub) or link or create their account, then make
    their provider-given roles exactly what the roles claim says now. Grants an admin made by hand
    are never touched; a role the claim no longer carries is revoked (audited as role_revoked)."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise InvalidInput("The provider named nobody: the ID token has no sub.", code="no_subject")
    username = username_from_claims(claims)
    now = timezone.now()
    with transaction.atomic(durable=True):
        identity = (
            Identity.objects.select_for_update().select_related("user").filter(issuer=issuer, subject=subject).first()
        )
        if identity is None:
            identity = _identity_link(issuer=issuer, subject=subject, username=username, claims=claims, now=now)
        user = identity.user
        if not user.is_active:
            raise Conflict(
                f"The account {user.get_username()} is deactivated; an admin can activate it again.",
                code="account_inactive",
            )
        identity.last_sign_in_at = now
        identity.save(update_fields=["last_sign_in_at"])
        granted, revoked = _roles_apply(user=user, claim=claims.get(roles_claim), actor=Actor.system("oidc-sign-in"))
    return SignIn(user=user, identity=identity, granted=granted, revoked=revoked)


def _identity_link(*, issuer: str, subject: str, username: str, claims: dict[str, Any], now) -> Identity:
    """A first sign-in: the account an admin prepared under that username (members page: no password,
    no other identity), or a new one. An account with a local password is never taken over by a
    provider's username: that would let whoever may choose their username at the provider become it."""
    actor = Actor.system("oidc-sign-in")
    user = User.objects.select_for_update().filter(username=username).first()
    if user is not None and (user.has_usable_password() or user.identities.exists()):
        raise Conflict(
            f"The account {username} already signs in another way; an admin must remove its password "
            "or rename it before it can sign in through the provider.",
            code="username_taken",
        )
    if user is None:
        email = claims.get("email") if isinstance(claims.get("email"), str) else ""
        user = user_ensure(actor=actor, username=username, email=email or "")
    identity = Identity(user=user, issuer=issuer, subject=subject, last_sign_in_at=now)
    identity.full_clean(exclude=["user"])
    identity.save()
    audit_record(
        actor=actor,
        action=Action.IDENTITY_LINKED,
        object_type="user",
        object_id=user.pk,
        payload={"username": username, **field_changes(new={"identity": {"issuer": issuer, "subject": subject}})},
    )
    return identity


def _roles_apply(*, user, claim: Any, actor: Actor) -> tuple[list[RoleScope], list[RoleScope]]:
    routes = {route.slug: route for route in Route.objects.all()}
    wanted = roles_from_claim(claim, route_slugs=routes)
    current = {
        (grant.role, grant.route.slug if grant.route_id else None): grant
        for grant in RoleGrant.objects.select_for_update(of=("self",))
        .select_related("route")
        .filter(user=user, source=GrantSource.PROVIDER)
    }
    manual = {
        (role, slug)
        for role, slug in RoleGrant.objects.filter(user=user, source=GrantSource.MANUAL).values_list(
            "role", "route__slug"
        )
    }
    revoked = sorted(set(current) - wanted, key=_scope_key)
    for scope in revoked:
        grant = current[scope]
        grant.delete()
        audit_record(
            actor=actor,
            action=Action.ROLE_REVOKED,
            object_type="user",
            object_id=user.pk,
            route=scope[1] or "",
            payload={
                "role": {"old": scope[0], "new": None},
                "route": scope[1],
                "username": user.get_username(),
                "source": GrantSource.PROVIDER,
            },
        )
    # A role an admin granted by hand is already held: the claim adds nothing there.
    granted = sorted(wanted - set(current) - manual, key=_scope_key)
    for role, slug in granted:
        role_grant(actor=actor, user=user, role=role, route=routes[slug] if slug else None, source=GrantSource.PROVIDER)
    return granted, revoked


def _scope_key(scope: RoleScope) -> tuple[str, str]:
    return scope[0], scope[1] or ""


def provider_session_record(*, identity: Identity, session_key: str, sid: str) -> None:
    """Remember which console session the provider's session opened, for its back-channel logout.
    Not audited: a session is not a record of anything (as django_session)."""
    ProviderSession.objects.update_or_create(session_key=session_key, defaults={"identity": identity, "sid": sid})
    # Sessions that ended by age or sign-out leave their row behind: drop this person's stale ones.
    ProviderSession.objects.filter(identity=identity).exclude(
        session_key__in=Session.objects.filter(expire_date__gt=timezone.now()).values("session_key")
    ).delete()


def provider_sessions_end(*, issuer: str, subject: str | None, sid: str | None) -> int:
    """End the console sessions a provider's logout names: by its session id, else every session of
    the subject (OpenID Connect Back-Channel Logout 1.0, section 2.4). Returns how many ended, each
    audited as `session_ended` (actor `system:oidc-backchannel-logout`), as one its person ends is."""
    rows = ProviderSession.objects.filter(identity__issuer=issuer)
    if sid:
        rows = rows.filter(sid=sid)
        if subject:
            rows = rows.filter(identity__subject=subject)
    elif subject:
        rows = rows.filter(identity__subject=subject)
    else:
        return 0
    now = timezone.now()
    with transaction.atomic():
        ended = list(rows.select_related("identity__user").order_by("pk"))
        keys = [row.session_key for row in ended]
        # Rows of sessions that had already ended (signed out, expired) are dropped without an event.
        open_keys = set(
            Session.objects.filter(session_key__in=keys, expire_date__gt=now).values_list("session_key", flat=True)
        )
        described = {row.session_key: row for row in UserSession.objects.filter(session_key__in=open_keys)}
        Session.objects.filter(session_key__in=keys).delete()
        UserSession.objects.filter(session_key__in=keys).delete()
        ProviderSession.objects.filter(session_key__in=keys).delete()
        for row in ended:
            if row.session_key not in open_keys:
                continue
            user, seen = row.identity.user, described.get(row.session_key)
            audit_record(
                actor=Actor.system("oidc-backchannel-logout"),
                action=Action.SESSION_ENDED,
                object_type="user",
                object_id=user.pk,
                payload={
                    "username": user.get_username(),
                    "reason": "the identity provider's session ended (back-channel logout)",
                    "session": {
                        "created_at": (seen.created_at if seen else row.created_at).isoformat(),
                        "user_agent": seen.user_agent if seen else "",
                        "ip_address": seen.ip_address if seen else "",
                    },
                    **field_changes(old={"ended_at": None}, new={"ended_at": now.isoformat()}),
                },
            )
    return len(open_keys)


def identities_deactivate(
    *, actor: Actor, issuer: str, known_subjects: Iterable[str] | None = None, not_seen_days: int | None = None
) -> list[str]:
    """Deactivate the people who signed in through `issuer` and whom the provider no longer knows:
    those whose subject is not in `known_subjects` (an export of the provider's directory), and/or
    those not seen at a sign-in for `not_seen_days` (for providers without a directory to export).
    Their sessions end and their API tokens stop working with them (both check is_active). Returns
    the usernames deactivated, each audited as user_deactivated."""
    if known_subjects is None and not_seen_days is None:
        raise InvalidInput("Say who is unknown: give the known subjects, a number of days, or both.")
    identities = Identity.objects.filter(issuer=issuer, user__is_active=True)
    if known_subjects is not None:
        known = set(known_subjects)
        stale_ids = [pk for pk, subject in identities.values_list("pk", "subject") if subject not in known]
    else:
        stale_ids = []
    if not_seen_days is not None:
        cutoff = timezone.now() - timedelta(days=not_seen_days)
        stale_ids += list(identities.filter(last_sign_in_at__lt=cutoff).values_list("pk", flat=True))
    deactivated = []
    with transaction.atomic(durable=True):
        user_ids = Identity.objects.filter(pk__in=stale_ids).values("user_id")
        users = User.objects.select_for_update().filter(pk__in=user_ids, is_active=True)
        for user in users.order_by("username"):
            user.is_active = False
            user.save(update_fields=["is_active"])
            keys = list(ProviderSession.objects.filter(identity__user=user).values_list("session_key", flat=True))
            keys += list(UserSession.objects.filter(user=user).values_list("session_key", flat=True))
            Session.objects.filter(session_key__in=keys).delete()
            UserSession.objects.filter(user=user).delete()
            audit_record(
                actor=actor,
                action=Action.USER_DEACTIVATED,
                object_type="user",
                object_id=user.pk,
                payload={
                    "username": user.get_username(),
                    "reason": "unknown to the identity provider",
                    **field_changes(old={"is_active": True}, new={"is_active": False}),
                },
            )
            deactivated.append(user.get_username())
    return deactivated
