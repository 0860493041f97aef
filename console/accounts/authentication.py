from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from console.accounts.models import ApiToken, hash_token


class HashedTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <key>`; the key is looked up by its SHA-256."""

    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Token <key>'.")
        try:
            key = header[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Token contains invalid characters.") from None
        token = (
            ApiToken.objects.select_related("user")
            .filter(key_hash=hash_token(key), revoked_at__isnull=True)
            .first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
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
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "API token issued by an administrator (`manage.py issue_token`), sent as "
                               "`Authorization: Token <key>`."}
