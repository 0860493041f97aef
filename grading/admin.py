from django.contrib import admin

from console.core.admin import ReadOnlyAdmin
from grading.models import Assignment, FinalLabel, Grade, GradingItem, GradingPlan

# Grading changes through its services (queue, adjudication, label import), which audit each one;
# the admin only shows the rows.


@admin.register(GradingItem)
class GradingItemAdmin(ReadOnlyAdmin):
    list_display = ["pk", "route", "decision", "status", "stratum", "is_gold", "created_at"]
    list_filter = ["route", "status", "is_gold"]


@admin.register(GradingPlan)
class GradingPlanAdmin(ReadOnlyAdmin):
    list_display = ["route", "gold_rate", "window_days", "updated_at"]


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ["item", "grader", "leased_at", "lease_expires_at", "skipped", "graded_at"]


@admin.register(Grade)
class GradeAdmin(ReadOnlyAdmin):
    list_display = ["item", "grader", "verdict", "seconds_spent", "created_at"]


@admin.register(FinalLabel)
class FinalLabelAdmin(ReadOnlyAdmin):
    list_display = ["decision", "correct", "method", "source", "decided_by", "decided_at"]
