from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from console.accounts import throttle
from console.accounts.models import ApiToken, hash_token


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
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(key)).first()
        if token is None or not token.is_live(now) or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword


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
