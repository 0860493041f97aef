from django.contrib import admin

from console.core.admin import ReadOnlyAdmin
from console.shadow.models import ShadowRun


@admin.register(ShadowRun)
class ShadowRunAdmin(ReadOnlyAdmin):
    """Read-only: runs change through their jobs and the audited retry (refusal page or API)."""

    list_display = ["pk", "decision", "pipeline", "status", "attempts", "created_at", "finished_at"]
    list_filter = ["status", "pipeline"]
