from django.contrib import admin

from grading.models import Assignment, FinalLabel, Grade, GradingItem, GradingPlan


@admin.register(GradingItem)
class GradingItemAdmin(admin.ModelAdmin):
    list_display = ["pk", "route", "decision", "status", "stratum", "is_gold", "created_at"]
    list_filter = ["route", "status", "is_gold"]
    readonly_fields = ["public_id", "queue_key", "inclusion_probability"]


@admin.register(GradingPlan)
class GradingPlanAdmin(admin.ModelAdmin):
    list_display = ["route", "gold_rate", "window_days", "updated_at"]


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["item", "grader", "leased_at", "lease_expires_at", "skipped", "graded_at"]


@admin.register(Grade)
class GradeAdmin(admin.ModelAdmin):
    list_display = ["item", "grader", "verdict", "seconds_spent", "created_at"]


@admin.register(FinalLabel)
class FinalLabelAdmin(admin.ModelAdmin):
    list_display = ["decision", "correct", "method", "source", "decided_by", "decided_at"]
