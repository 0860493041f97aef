"""Strict parsers for settings read from the environment.

A bad value stops the process at start-up with a message naming the variable, instead of
surfacing later as a confusing failure.
"""

import os
from pathlib import Path


class ConfigError(RuntimeError):
    pass


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name} must be one of 1/0/true/false/yes/no/on/off, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if minimum is not None and value < minimum or maximum is not None and value > maximum:
        raise ConfigError(f"{name} must be between {minimum} and {maximum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_path(name: str, default: Path) -> Path:
    raw = os.environ.get(name)
    path = Path(raw) if raw else default
    return path.expanduser().resolve()


def email_settings(url: str) -> dict[str, object]:
    """Django's SMTP settings from ``smtp://user:password@host:port`` (``smtp+tls://`` for
    STARTTLS, ``smtps://`` for TLS from the first byte); user and password are percent-decoded."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if parts.scheme not in {"smtp", "smtp+tls", "smtps"} or not parts.hostname:
        raise ConfigError(
            f"EMAIL_URL must look like smtp://user:password@host:port (or smtp+tls://, smtps://), "
            f"got scheme {parts.scheme!r}"
        )
    try:
        port = parts.port
    except ValueError:
        raise ConfigError("EMAIL_URL has a port that is not a number") from None
    return {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": parts.hostname,
        "EMAIL_PORT": port or (465 if parts.scheme == "smtps" else 587 if parts.scheme == "smtp+tls" else 25),
        "EMAIL_HOST_USER": unquote(parts.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
        "EMAIL_USE_TLS": parts.scheme == "smtp+tls",
        "EMAIL_USE_SSL": parts.scheme == "smtps",
    }


def env_float(name: str, default: float, *, minimum: float, maximum: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not minimum <= value <= maximum:  # also refuses nan
        raise ConfigError(f"{name} must be between {minimum} and {maximum}, got {value}")
    return value


def env_console_url(default_host: str = "127.0.0.1", default_port: int = 8000) -> str:
    """CONSOLE_URL: the address people reach the console at, for links in emails and webhooks, which
    leave the site and so cannot be relative. Without it, ``http://HOST:PORT`` as `make run` serves
    (``localhost`` for a wildcard HOST, which no browser can open). No trailing slash."""
    from urllib.parse import urlsplit

    raw = env_str("CONSOLE_URL")
    if raw is None:
        host = env_str("HOST", default_host)
        if host in ("0.0.0.0", "::", "[::]"):  # noqa: S104 -- a bind address, not one to link to
            host = "localhost"
        elif ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{env_int('PORT', default_port, minimum=1, maximum=65535)}"
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(f"CONSOLE_URL must look like https://console.example.org (an optional path), got {raw!r}")
    return raw.strip().rstrip("/")


def env_networks(name: str) -> tuple:
    """A comma-separated list of CIDRs (``10.0.0.0/8, 127.0.0.1/32, ::1/128``; a bare address is its
    own /32 or /128) as ipaddress networks. A network with host bits set (``10.0.0.1/8``) is refused
    rather than widened or narrowed silently: the operator meant one of the two."""
    import ipaddress

    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return ()
    networks = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=True))
        except ValueError as exc:
            raise ConfigError(f"{name} must be comma-separated CIDRs like 10.0.0.0/8; {part!r}: {exc}") from None
    return tuple(networks)


def check_oidc_settings(*, issuer: str, client_id: str | None, scopes: str, allow_http: bool) -> None:
    """Fail at start-up on a provider the console could not sign in with safely: no client id, no
    `openid` scope, or an issuer over plain HTTP other than on a loopback address with OIDC_ALLOW_HTTP=1
    (tokens and codes would cross the network readable)."""
    from urllib.parse import urlsplit

    parts = urlsplit(issuer)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(
            f"OIDC_ISSUER must be the provider's issuer URL, like https://id.example.org/realm, got {issuer!r}"
        )
    if parts.scheme == "http":
        if not allow_http:
            raise ConfigError("OIDC_ISSUER must use https:// (OIDC_ALLOW_HTTP=1 accepts http:// on a loopback address)")
        if not _is_loopback(parts.hostname):
            raise ConfigError(f"OIDC_ISSUER may use http:// only on a loopback address, not {parts.hostname!r}")
    if not client_id:
        raise ConfigError("OIDC_CLIENT_ID must be set when OIDC_ISSUER is")
    if "openid" not in scopes.split():
        raise ConfigError(f"OIDC_SCOPES must include openid, got {scopes!r}")


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
