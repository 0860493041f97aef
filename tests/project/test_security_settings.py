"""The TLS flags set Django's security settings, strictly; behind a proxy they reach the browser."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
_READ = (
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_SSL_REDIRECT",
    "SECURE_PROXY_SSL_HEADER",
)


def _settings_with(tmp_path, **env) -> subprocess.CompletedProcess:
    """Import the settings in a fresh process with these variables (and an external database and broker,
    so nothing is started)."""
    base = {key: value for key, value in os.environ.items() if not key.startswith(("SECURE_", "HSTS_"))}
    base.update(
        DATABASE_URL="postgresql://nobody@127.0.0.1:1/none",
        CELERY_BROKER_URL="redis://127.0.0.1:1/0",
        SECRET_KEY="x" * 50,
        CONSOLE_DATA_DIR=str(tmp_path),
        **env,
    )
    script = (
        f"import json, console.settings as s; print(json.dumps({{name: getattr(s, name, None) for name in {_READ!r}}}))"
    )
    return subprocess.run(
        [sys.executable, "-c", script], env=base, cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_by_default_nothing_assumes_tls(tmp_path):
    result = _settings_with(tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == dict.fromkeys(_READ, False) | {
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_PROXY_SSL_HEADER": None,
    }


def test_the_tls_flags_set_the_settings(tmp_path):
    result = _settings_with(
        tmp_path,
        SECURE_COOKIES="1",
        HSTS_SECONDS="31536000",
        HSTS_INCLUDE_SUBDOMAINS="yes",
        HSTS_PRELOAD="true",
        SECURE_SSL_REDIRECT="on",
        SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto: https",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == dict.fromkeys(_READ, True) | {
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
    }


@pytest.mark.parametrize(
    "env",
    [
        {"SECURE_COOKIES": "maybe"},
        {"HSTS_SECONDS": "-1"},
        {"HSTS_SECONDS": "a year"},
        {"SECURE_PROXY_SSL_HEADER": "https"},
        {"SECURE_PROXY_SSL_HEADER": "X-Proto: a b"},
    ],
)
def test_a_bad_flag_stops_the_process_naming_it(tmp_path, env):
    result = _settings_with(tmp_path, **env)
    assert result.returncode != 0
    assert "ConfigError" in result.stderr and next(iter(env)) in result.stderr


def test_behind_a_tls_proxy_the_browser_gets_hsts_and_secure_cookies(db, settings):
    from tests.factories import make_user

    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    make_user("tls-user", "reviewer", password="a-long-password")
    client = Client()
    page = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    assert page["Strict-Transport-Security"] == "max-age=3600"
    assert page.cookies["csrftoken"]["secure"]
    signed_in = client.post(
        "/accounts/login/", {"username": "tls-user", "password": "a-long-password"}, HTTP_X_FORWARDED_PROTO="https"
    )
    assert signed_in.status_code == 302 and signed_in.cookies["sessionid"]["secure"]
