"""The provider's settings are checked at start-up, so a console never runs half-configured."""

import pytest

from console.env import ConfigError, check_oidc_settings


def test_a_complete_https_provider_is_accepted():
    check_oidc_settings(
        issuer="https://id.example.org/realms/x", client_id="console", scopes="openid email", allow_http=False
    )


@pytest.mark.parametrize(
    ("issuer", "client_id", "scopes", "allow_http"),
    [
        ("http://id.example.org", "console", "openid", False),  # plain HTTP
        ("http://id.example.org", "console", "openid", True),  # plain HTTP off the loopback
        ("https://id.example.org", None, "openid", False),  # no client id
        ("https://id.example.org", "console", "email profile", False),  # no openid scope
        ("id.example.org", "console", "openid", False),  # not a URL
    ],
)
def test_a_provider_the_console_cannot_use_safely_stops_start_up(issuer, client_id, scopes, allow_http):
    with pytest.raises(ConfigError):
        check_oidc_settings(issuer=issuer, client_id=client_id, scopes=scopes, allow_http=allow_http)


def test_http_on_a_loopback_address_is_accepted_when_allowed():
    check_oidc_settings(issuer="http://127.0.0.1:9000", client_id="console", scopes="openid", allow_http=True)
    check_oidc_settings(issuer="http://localhost:9000", client_id="console", scopes="openid", allow_http=True)
