"""Users, role grants and API tokens. Every change is audited in its own transaction."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts.models import ApiToken, Role, RoleGrant, hash_token
from console.core.errors import InvalidInput


@dataclass(frozen=True)
class IssuedToken:
    key: str
    token: ApiToken


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
            payload={"new": {"username": username}},
        )
    return user


def role_grant(*, actor: Actor, user, role: str, route=None) -> RoleGrant:
    """Grant `role` on `route` (a ledger Route), or on every route when it is None."""
    if role not in Role.values:
        raise InvalidInput(f"Unknown role {role!r}; choose from {', '.join(Role.values)}.")
    with transaction.atomic():
        grant, created = RoleGrant.objects.get_or_create(user=user, role=role, route=route)
        if created:
            audit_record(
                actor=actor,
                action=Action.ROLE_GRANTED,
                object_type="user",
                object_id=user.pk,
                route=route.slug if route else "",
                payload={"new": {"role": role, "route": route.slug if route else None}},
            )
    return grant


def token_issue(*, actor: Actor, user) -> IssuedToken:
    key = ApiToken.new_key()
    with transaction.atomic():
        token = ApiToken.objects.create(user=user, key_hash=hash_token(key), prefix=key[:12])
        audit_record(
            actor=actor,
            action=Action.TOKEN_ISSUED,
            object_type="user",
            object_id=user.pk,
            payload={"new": {"token_prefix": token.prefix}},
        )
    return IssuedToken(key=key, token=token)


def tokens_revoke(*, actor: Actor, token_ids: list[int]) -> int:
    """Revoke the tokens that are still live among `token_ids`, one audit event each; returns how many."""
    with transaction.atomic():
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
                payload={"old": {"token_prefix": token.prefix}},
            )
    return len(live)
