"""The OpenID provider as the console's client sees it, through Authlib's Django client: discovery
from the issuer, the authorization code flow with PKCE (S256), state and nonce kept in the session
and checked, and the ID token's signature (the provider's JWKS), issuer, audience, expiry and nonce
validated by the library. What Authlib leaves to its caller is done here: the discovery document
must name the configured issuer (RFC 8414, section 3.3), an ID token is required, and claims from
the userinfo endpoint count only for the subject the ID token names (OpenID Connect Core 5.3.2).

Calls to the provider go through Authlib's own HTTP session, not console.core.outbound: the issuer
comes from the operator's environment, never from a user, and is often on a private network that
the egress policy for user-configured URLs refuses."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlencode

from authlib.integrations.base_client import OAuthError
from authlib.integrations.django_client import OAuth
from django.conf import settings
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jws import JWSRegistry

BACKCHANNEL_LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"


class SignInRefused(Exception):
    """The provider's answer did not pass a check: no sign-in happens."""


@dataclass(frozen=True)
class ProviderAnswer:
    claims: dict[str, Any]
    id_token: str


def configured() -> bool:
    return bool(settings.OIDC_ISSUER)


@cache
def _client(issuer: str, client_id: str, client_secret: str | None, scopes: str):
    oauth = OAuth()
    return oauth.register(
        "console",
        client_id=client_id,
        client_secret=client_secret,
        server_metadata_url=issuer.rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs={"scope": scopes, "code_challenge_method": "S256", "timeout": 10},
    )


def client():
    """Authlib's client for the configured provider (one per configuration; its discovery document and
    keys are cached in it, and the keys fetched again when a token names a key it has not seen)."""
    oauth_client = _client(
        settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET, settings.OIDC_SCOPES
    )
    metadata = oauth_client.load_server_metadata()
    if metadata.get("issuer") != settings.OIDC_ISSUER:
        raise SignInRefused(
            f"The provider's discovery document names the issuer {metadata.get('issuer')!r}, not OIDC_ISSUER."
        )
    return oauth_client


def authorize_redirect(request, *, redirect_uri: str, **params):
    """The redirect to the provider's sign-in, with state, nonce and the PKCE verifier kept in the session."""
    return client().authorize_redirect(request, redirect_uri, **params)


def authorize_answer(request) -> ProviderAnswer:
    """The provider's redirect back, checked: the state must be one this session started (and is used up),
    the code is exchanged with the PKCE verifier, and the ID token is validated by Authlib."""
    oauth_client = client()
    try:
        token = oauth_client.authorize_access_token(
            request, claims_options={"iss": {"essential": True, "value": settings.OIDC_ISSUER}}
        )
    except (OAuthError, JoseError, ValueError) as exc:
        raise SignInRefused(str(exc) or type(exc).__name__) from exc
    id_claims = token.get("userinfo")
    if not token.get("id_token") or not id_claims:
        raise SignInRefused("The provider sent no ID token.")
    claims = dict(id_claims)
    if oauth_client.load_server_metadata().get("userinfo_endpoint") and token.get("access_token"):
        try:
            extra = dict(oauth_client.userinfo(token=token))
        except (OSError, ValueError, OAuthError) as exc:
            raise SignInRefused(f"The provider's userinfo endpoint failed: {exc}") from exc
        if extra.get("sub") != claims["sub"]:
            raise SignInRefused("The userinfo endpoint answered for another subject.")
        # The ID token's claims win where both say something: they are the ones that were signed.
        claims = {**extra, **claims}
    return ProviderAnswer(claims=claims, id_token=token["id_token"])


def logout_url(*, id_token: str | None, post_logout_redirect_uri: str) -> str | None:
    """The provider's end-session address (RP-initiated logout), or None when it has none."""
    metadata = client().load_server_metadata()
    endpoint = metadata.get("end_session_endpoint")
    if not endpoint:
        return None
    params = {"post_logout_redirect_uri": post_logout_redirect_uri, "client_id": settings.OIDC_CLIENT_ID}
    if id_token:
        params["id_token_hint"] = id_token
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"


def logout_token_claims(logout_token: str) -> dict[str, Any]:
    """A back-channel logout token, validated as OpenID Connect Back-Channel Logout 1.0, section 2.6
    says: signed by the provider's keys, issuer, audience, issued recently, the logout event, a sub or
    a sid, and no nonce."""
    oauth_client = client()
    metadata = oauth_client.load_server_metadata()
    registry = JWSRegistry(algorithms=metadata.get("id_token_signing_alg_values_supported") or ["RS256"])
    try:
        try:
            token = jwt.decode(logout_token, KeySet.import_key_set(oauth_client.fetch_jwk_set()), registry=registry)
        except JoseError:
            token = jwt.decode(
                logout_token, KeySet.import_key_set(oauth_client.fetch_jwk_set(force=True)), registry=registry
            )
        jwt.JWTClaimsRegistry(
            leeway=120,
            iss={"essential": True, "value": settings.OIDC_ISSUER},
            aud={"essential": True, "value": settings.OIDC_CLIENT_ID},
            iat={"essential": True},
        ).validate(token.claims)
    except (JoseError, ValueError) as exc:
        raise SignInRefused(f"The logout token is not valid: {exc}") from exc
    claims = token.claims
    events = claims.get("events")
    if not isinstance(events, dict) or BACKCHANNEL_LOGOUT_EVENT not in events:
        raise SignInRefused("The logout token carries no back-channel logout event.")
    if "nonce" in claims:
        raise SignInRefused("A logout token must not carry a nonce.")
    if not claims.get("sub") and not claims.get("sid"):
        raise SignInRefused("The logout token names neither a subject nor a session.")
    return claims
