from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from console.accounts import throttle
from console.accounts.models import ApiToken, hash_token
from console.core.replica import bookkeeping_writes


class HashedTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <key>` or `Authorization: Bearer <key>` (the scheme OpenAPI can name, so
    generated clients send it); the key is looked up by its SHA-256. A client that sent too many
    bad keys (LOGIN_FAILURES_PER_CLIENT in LOGIN_THROTTLE_SECONDS) gets 429 for bad keys until its
    window ends."""

    keyword = "Token"
    keywords = (b"token", b"bearer")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() not in self.keywords:
            return None
        try:
            return self._authenticate_token(header)
        except exceptions.AuthenticationFailed:
            # Only failures touch the throttle: a valid token costs no extra query, and a key of 256
            # random bits cannot be guessed anyway; what this stops is a client hammering with bad keys.
            address = throttle.client_address(request)
            with throttle.one_attempt_at_a_time("api-token", username=None, address=address):
                blocked = throttle.blocked("api-token", username=None, address=address)
                if not blocked:
                    throttle.record_failure("api-token", username=None, address=address)
            if blocked:
                raise exceptions.Throttled(wait=blocked.retry_after, detail=blocked.message) from None
            raise

    def _authenticate_token(self, header: list[bytes]):
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Token <key>' or 'Bearer <key>'.")
        try:
            key = header[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Token contains invalid characters.") from None
        now = timezone.now()
        token = _token_counting_the_call(hash_token(key), now)
        if token is None or not token.is_live(now) or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            with bookkeeping_writes():  # as counting the call: no read of the request needs to see it
                ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword


def _token_counting_the_call(key_hash: str, now) -> ApiToken | None:
    """The token with this key hash and its user, with the call counted against the token's rate
    (console.accounts.throttle): one statement, as the lookup alone was. `rate_wait_seconds` on the
    token is how long the caller must wait before this call would fit, 0 when it fits now."""
    user_model = get_user_model()
    token_fields = ApiToken._meta.concrete_fields
    user_fields = user_model._meta.concrete_fields
    tokens, users = ApiToken._meta.db_table, user_model._meta.db_table
    user_pk = connection.ops.quote_name(user_model._meta.pk.column)
    columns = [f"t.{connection.ops.quote_name(f.column)}" for f in token_fields]
    columns += [f"u.{connection.ops.quote_name(f.column)}" for f in user_fields]
    # Counting the call is bookkeeping: the request's reads may still go to the replica after it.
    with bookkeeping_writes(), connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH found AS (
                SELECT id,
                       GREATEST(COALESCE(rate_allowance_at, %(now)s), %(now)s)
                       + make_interval(secs => %(window)s::float8 / NULLIF(COALESCE(rate_per_minute, %(rate)s), 0))
                       AS moved_to
                FROM {tokens} WHERE key_hash = %(key_hash)s FOR UPDATE
            ), spent AS (
                UPDATE {tokens} AS t SET rate_allowance_at = found.moved_to FROM found
                WHERE t.id = found.id AND found.moved_to <= %(now)s + make_interval(secs => %(window)s)
            )
            SELECT {", ".join(columns)}, found.moved_to
            FROM found JOIN {tokens} AS t ON t.id = found.id JOIN {users} AS u ON u.{user_pk} = t.user_id
            """,
            {
                "now": now,
                "rate": settings.API_TOKEN_RATE_PER_MINUTE,
                "key_hash": key_hash,
                "window": throttle.RATE_WINDOW_SECONDS,
            },
        )
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(token_fields)
    token = ApiToken.from_db(connection.alias, [f.attname for f in token_fields], row[:split])
    token.user = user_model.from_db(connection.alias, [f.attname for f in user_fields], row[split:-1])
    moved_to = row[-1]
    ahead = (moved_to - now - timedelta(seconds=throttle.RATE_WINDOW_SECONDS)).total_seconds() if moved_to else 0.0
    token.rate_wait_seconds = max(ahead, 0.0)
    return token


class HashedTokenScheme(OpenApiAuthenticationExtension):
    """Describes HashedTokenAuthentication in the OpenAPI schema (defined here so it registers
    whenever the authentication class is loaded): as an HTTP bearer scheme, which generated clients
    send as `Bearer <key>`, and as the API key header for clients that send `Token <key>`; either
    one authenticates an operation."""

    target_class = HashedTokenAuthentication
    name = ["bearerAuth", "tokenAuth"]

    def get_security_requirement(self, auto_schema):
        return [{name: []} for name in self.name]  # either scheme, not both at once

    def get_security_definition(self, auto_schema):
        issued = "API token issued by an administrator (the console's `/tokens/` page or `manage.py issue_token`)"
        refused = "Expired and revoked tokens are refused with 401."
        return [
            {
                "type": "http",
                "scheme": "bearer",
                "description": f"{issued}, sent as `Authorization: Bearer <key>`. {refused}",
            },
            {
                "type": "apiKey",
                "in": "header",
                "name": "Authorization",
                "description": f"{issued}, sent as `Authorization: Token <key>`. {refused}",
            },
        ]
