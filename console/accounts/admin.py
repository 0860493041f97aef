from django.contrib import admin

from console.accounts.models import ApiToken, RoleGrant


@admin.register(RoleGrant)
class RoleGrantAdmin(admin.ModelAdmin):
    list_display = ["user", "role", "route", "created_at"]
    list_filter = ["role", "route"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["key_hash", "prefix", "created_at", "last_used_at"]
