from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from console.accounts import throttle
from console.accounts.models import ApiToken, hash_token


class HashedTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <key>`; the key is looked up by its SHA-256. A client that sent too many
    bad keys (LOGIN_FAILURES_PER_CLIENT in LOGIN_THROTTLE_SECONDS) gets 429 for bad keys until its
    window ends."""

    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        try:
            return self._authenticate_token(header)
        except exceptions.AuthenticationFailed:
            # Only failures touch the throttle: a valid token costs no extra query, and a key of 256
            # random bits cannot be guessed anyway; what this stops is a client hammering with bad keys.
            address = throttle.client_address(request)
            if blocked := throttle.blocked("api-token", username=None, address=address):
                raise exceptions.Throttled(wait=blocked.retry_after, detail=blocked.message) from None
            throttle.record_failure("api-token", username=None, address=address)
            raise

    def _authenticate_token(self, header: list[bytes]):
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Token <key>'.")
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
    whenever the authentication class is loaded)."""

    target_class = HashedTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "API token issued by an administrator (the console's `/tokens/` page or "
            "`manage.py issue_token`), sent as `Authorization: Token <key>`. Expired and revoked tokens "
            "are refused with 401.",
        }
