from django.contrib import admin

from console.core.admin import ReadOnlyAdmin
from console.trials.models import Candidate, Trial


@admin.register(Candidate)
class CandidateAdmin(ReadOnlyAdmin):
    """Read-only, and without the encrypted headers: candidates are registered through the audited API."""

    list_display = ["pk", "route", "name", "kind", "url", "timeout_s", "created_at"]
    exclude = ["headers_encrypted"]


@admin.register(Trial)
class TrialAdmin(ReadOnlyAdmin):
    """Read-only: trials change only through their jobs."""

    list_display = ["pk", "route", "candidate", "status", "passed", "items", "repeats", "created_at"]
    list_filter = ["status", "passed"]
    exclude = ["result_text"]
