"""Authentication backends: local passwords, which LOCAL_LOGIN=0 switches off once a provider is
configured, and the people who signed in at the provider (the sign-in itself is
console.accounts.identity.services.identity_sign_in; this backend only loads them again)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.backends import ModelBackend


def local_login_allowed() -> bool:
    """Local passwords stay for the embedded default; LOCAL_LOGIN=0 hides them when a provider is set."""
    return settings.LOCAL_LOGIN or not settings.OIDC_ISSUER


class LocalPasswordBackend(ModelBackend):
    """Django's username and password, while local sign-in is allowed. Turning it off also ends the
    sessions that passwords opened: their user is no longer loaded."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if not local_login_allowed():
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_user(self, user_id):
        if not local_login_allowed():
            return None
        return super().get_user(user_id)


class IdentityProviderBackend(ModelBackend):
    """Loads a person whose session the provider opened (inactive people are not loaded). Takes no
    password: `authenticate` never succeeds here."""

    def authenticate(self, request, **kwargs):
        return None

    def get_user(self, user_id):
        if not settings.OIDC_ISSUER:
            return None
        return super().get_user(user_id)
