from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied

from audit.services import Actor
from console.accounts import permissions, services
from console.accounts.models import ApiToken, RoleGrant
from console.core.admin import ReadOnlyAdmin

# Users, grants and tokens change through `issue_token` and the account services, which audit
# every change; the admin only shows them, and revokes tokens through the audited service.


@admin.register(RoleGrant)
class RoleGrantAdmin(ReadOnlyAdmin):
    list_display = ["user", "role", "route", "created_at"]
    list_filter = ["role", "route"]


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ["prefix", "user", "created_at", "last_used_at", "revoked_at"]
    exclude = ["key_hash"]
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens (audited)")
    def revoke(self, request, queryset) -> None:
        if not permissions.is_admin(request.user):
            raise PermissionDenied("Only admins revoke tokens.")
        token_ids = list(queryset.values_list("pk", flat=True))
        count = services.tokens_revoke(actor=Actor.user(request.user), token_ids=token_ids)
        self.message_user(request, f"{count} token(s) revoked.")


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class ReadOnlyUserAdmin(ReadOnlyAdmin, UserAdmin):
    """Django's user admin, read-only: a user created or made superuser here would skip the audit."""

    def get_readonly_fields(self, request, obj=None):
        return [f for f in super().get_readonly_fields(request, obj) if f != "password"]
