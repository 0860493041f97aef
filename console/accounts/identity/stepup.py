"""Step-up at the provider for deliberate acts (signing a policy): the person authenticates there
again (prompt=login, max_age=0), and the evidence of it (auth_time, acr and amr when sent) waits in
their session for the act, which uses it once and only within OIDC_STEP_UP_SECONDS of auth_time."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from console.accounts.identity import provider
from console.accounts.models import Identity

_FRESH_KEY = "oidc_fresh_auth"
STARTED_KEY = "oidc_step_up"


def applies(user) -> bool:
    """Whether `user` proves it is them at the provider (rather than with a local password)."""
    return (
        provider.configured()
        and user.is_authenticated
        and Identity.objects.filter(user=user, issuer=settings.OIDC_ISSUER).exists()
    )


def evidence_record(session, *, claims: dict[str, Any]) -> None:
    evidence = {"issuer": settings.OIDC_ISSUER, "subject": claims["sub"], "auth_time": int(claims["auth_time"])}
    for name in ("acr", "amr"):
        if claims.get(name) is not None:
            evidence[name] = claims[name]
    session[_FRESH_KEY] = evidence


def evidence_fresh(session) -> dict[str, Any] | None:
    """The last step-up's evidence while it is within the window, else None."""
    evidence = session.get(_FRESH_KEY)
    if not evidence or evidence["auth_time"] < time.time() - settings.OIDC_STEP_UP_SECONDS:
        return None
    return evidence


def evidence_use(session) -> None:
    """One authentication, one act."""
    session.pop(_FRESH_KEY, None)
