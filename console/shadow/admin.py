from django.contrib import admin

from console.shadow.models import ShadowRun


@admin.register(ShadowRun)
class ShadowRunAdmin(admin.ModelAdmin):
    """Read-only: runs change through their jobs and the audited retry (refusal page or API)."""

    list_display = ["pk", "decision", "pipeline", "status", "attempts", "created_at", "finished_at"]
    list_filter = ["status", "pipeline"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
