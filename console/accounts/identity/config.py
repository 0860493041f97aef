"""Checks of the provider's settings at start-up. Pure: the settings module imports it."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from console.env import ConfigError


def check_provider_settings(*, issuer: str, client_id: str | None, scopes: str, allow_http: bool) -> None:
    """Fail at start-up on a provider the console could not sign in with safely: no client id, no
    `openid` scope, or an issuer over plain HTTP other than on a loopback address with OIDC_ALLOW_HTTP=1
    (tokens and codes would cross the network readable)."""
    parts = urlsplit(issuer)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(
            f"OIDC_ISSUER must be the provider's issuer URL, like https://id.example.org/realm, got {issuer!r}"
        )
    if parts.scheme == "http":
        if not allow_http:
            raise ConfigError("OIDC_ISSUER must use https:// (OIDC_ALLOW_HTTP=1 accepts http:// on a loopback address)")
        if not is_loopback(parts.hostname):
            raise ConfigError(f"OIDC_ISSUER may use http:// only on a loopback address, not {parts.hostname!r}")
    if not client_id:
        raise ConfigError("OIDC_CLIENT_ID must be set when OIDC_ISSUER is")
    if "openid" not in scopes.split():
        raise ConfigError(f"OIDC_SCOPES must include openid, got {scopes!r}")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
