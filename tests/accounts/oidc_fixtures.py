"""Helpers for the sign-in tests: a provider configuration with locally made keys (for the token
checks, without network), and the real OpenID provider (oidc-provider on Node.js) as a process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.sessions.middleware import SessionMiddleware
from django.test import RequestFactory
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from console.accounts.identity import provider

ISSUER = "https://id.example.test"
CLIENT_ID = "console"
PROVIDER_DIR = Path(__file__).parent / "oidc_provider"


class LocalProvider:
    """A provider whose discovery document and keys are put straight into Authlib's client, and whose
    token endpoint answers with whatever ID token the test signs."""

    def __init__(self, settings, monkeypatch):
        settings.OIDC_ISSUER = ISSUER
        settings.OIDC_CLIENT_ID = CLIENT_ID
        settings.OIDC_CLIENT_SECRET = "secret"
        settings.OIDC_SCOPES = "openid email profile"
        provider._client.cache_clear()
        self.key = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
        oauth_client = provider._client(ISSUER, CLIENT_ID, "secret", "openid email profile")
        oauth_client.server_metadata.update(
            {
                "issuer": ISSUER,
                "authorization_endpoint": f"{ISSUER}/auth",
                "token_endpoint": f"{ISSUER}/token",
                "jwks": KeySet([self.key]).as_dict(private=False),
                "id_token_signing_alg_values_supported": ["RS256"],
                "_loaded_at": time.time(),
            }
        )
        self.oauth_client = oauth_client
        self.id_token = ""
        monkeypatch.setattr(
            oauth_client,
            "fetch_access_token",
            lambda **params: {"access_token": "at", "token_type": "Bearer", "id_token": self.id_token},
        )
        self.factory = RequestFactory()

    def sign(self, claims: dict, *, key=None) -> str:
        return jwt.encode({"alg": "RS256", "kid": "k1"}, claims, key or self.key)

    def start(self):
        """A sign-in started in a fresh session: the request (with its session) and the state and nonce sent."""
        request = self.factory.get("/accounts/oidc/login/")
        SessionMiddleware(lambda r: None).process_request(request)
        response = provider.authorize_redirect(request, redirect_uri="http://testserver/accounts/oidc/callback/")
        query = parse_qs(urlsplit(response["Location"]).query)
        return request.session, query["state"][0], query["nonce"][0], query

    def answer(self, session, state: str):
        request = self.factory.get("/accounts/oidc/callback/", {"code": "c", "state": state})
        request.session = session
        return provider.authorize_answer(request)

    def claims(self, nonce: str, **overrides) -> dict:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": CLIENT_ID, "sub": "s-1", "iat": now, "exp": now + 300, "nonce": nonce}
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_or_skip() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        message = "Node.js and npm are needed to run the OpenID provider these tests sign in at"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    if not (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=PROVIDER_DIR, check=True, timeout=300
        )
    return node


class RealProvider:
    """oidc-provider, a certified OpenID provider, listening on a loopback port for one test module."""

    def __init__(self, console_url: str, users_file: Path):
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.users_file = users_file
        self.client_id, self.client_secret = "console", "test-secret"
        self.set_users({})
        env = {
            **os.environ,
            "PORT": str(self.port),
            "USERS_FILE": str(users_file),
            "CLIENT_ID": self.client_id,
            "CLIENT_SECRET": self.client_secret,
            "REDIRECT_URI": f"{console_url}/accounts/oidc/callback/",
            "POST_LOGOUT_REDIRECT_URI": f"{console_url}/accounts/login/",
            "BACKCHANNEL_LOGOUT_URI": f"{console_url}/accounts/oidc/backchannel-logout/",
        }
        # Its log goes to a file: a pipe nobody reads would stop the provider once full.
        self.log = users_file.with_name("provider.log")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [node_or_skip(), "provider.mjs"], cwd=PROVIDER_DIR, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 30
        while "ready" not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"the OpenID provider did not start: {self.log.read_text()}")
            time.sleep(0.05)

    def set_users(self, users: dict) -> None:
        self.users_file.write_text(json.dumps(users))

    def configure(self, settings) -> None:
        settings.OIDC_ISSUER = self.issuer
        settings.OIDC_CLIENT_ID = self.client_id
        settings.OIDC_CLIENT_SECRET = self.client_secret
        settings.OIDC_SCOPES = "openid email profile groups"
        settings.OIDC_ROLES_CLAIM = "groups"
        settings.OIDC_ALLOW_HTTP = True
        provider._client.cache_clear()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
