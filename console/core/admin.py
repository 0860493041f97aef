"""Admin classes for models whose changes the console audits.

The Django admin writes rows directly, with no audit event, so a superuser could change a final
label or grant a role without a trace. Such models are shown read-only there: they change through
their services (pages, API, management commands), which record the event in the same transaction.
An admin that must edit something routes its save through such a service instead (see the Route
admin).
"""

from __future__ import annotations

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable, never added, changed or deleted through the admin (a POST there is 403)."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_readonly_fields(self, request, obj=None):
        # Every field, so the view page shows values and never an input, whatever the permissions say.
        return [field.name for field in self.model._meta.get_fields() if field.concrete] + list(self.readonly_fields)
