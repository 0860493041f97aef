"""Watching a signed cutoff: release rechecks, drift alarms and the per-day aggregates they read."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

VERSION_KEYS = ("model", "retriever", "corpus", "gate")
LABEL_AGE_MAX_DAYS = 3650
SCORE_BINS = 1000  # score counts per 0.001 bin on [0, 1]; scores outside fall into the end bins


class RecheckStatus(models.TextChoices):
    OPEN = "open", "Open"
    CLOSED = "closed", "Closed"


class RecheckResolution(models.TextChoices):
    SIGNED = "signed", "A new version was signed"
    ACCEPTED = "accepted", "Accepted unchanged"


class Recheck(models.Model):
    """A combination of versions the signed evidence did not cover, seen in the route's traffic.

    Opened once per (policy, combination): the unique constraint and an INSERT ... ON CONFLICT DO
    NOTHING make concurrent ingest batches open it exactly once."""

    policy = models.ForeignKey("governance.PolicyVersion", on_delete=models.PROTECT, related_name="rechecks")
    route = models.ForeignKey("accounts.Route", on_delete=models.PROTECT, related_name="rechecks")
    versions = models.JSONField(help_text="The new combination: {model, retriever, corpus, gate} as logged.")
    versions_key = models.CharField(max_length=1000, help_text="Canonical JSON of `versions`, for uniqueness.")
    status = models.CharField(max_length=8, choices=RecheckStatus.choices, default=RecheckStatus.OPEN)
    opened_at = models.DateTimeField(auto_now_add=True)
    plan = models.JSONField(default=dict, blank=True, help_text="The recheck sample planned: bands and targets.")
    resolution = models.CharField(max_length=10, choices=RecheckResolution.choices, blank=True)
    note = models.TextField(blank=True, max_length=4000, help_text="The owner's note when closing.")
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="rechecks_closed"
    )
    new_policy = models.ForeignKey(
        "governance.PolicyVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="rechecks_resolved",
        help_text="The version signed to close it.",
    )

    class Meta:
        ordering = ["-opened_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["policy", "versions_key"], name="recheck_once_per_combination"),
            models.CheckConstraint(
                condition=Q(status="open") | Q(closed_at__isnull=False), name="recheck_closed_has_time"
            ),
        ]

    def __str__(self) -> str:
        return f"recheck {self.pk} of {self.route_id} ({self.status})"


class AlarmKind(models.TextChoices):
    ABSTENTION = "abstention", "Abstention at the signed cutoff"
    SCORES = "scores", "Score distribution"
    SEGMENT_MIX = "segment_mix", "Segment mix"
    NO_SUPPORT = "no_support", "Refusals with no supporting passage"


class AlarmStatus(models.TextChoices):
    OPEN = "open", "Open"
    CLOSED = "closed", "Closed"


class Alarm(models.Model):
    """A drift alarm: at most one open per route and kind."""

    route = models.ForeignKey("accounts.Route", on_delete=models.PROTECT, related_name="alarms")
    policy = models.ForeignKey("governance.PolicyVersion", on_delete=models.PROTECT, related_name="alarms")
    kind = models.CharField(max_length=16, choices=AlarmKind.choices)
    status = models.CharField(max_length=8, choices=AlarmStatus.choices, default=AlarmStatus.OPEN)
    opened_at = models.DateTimeField(auto_now_add=True)
    first_day = models.DateField(help_text="First day outside limits.")
    last_flagged_day = models.DateField(help_text="Latest day outside limits.")
    through_day = models.DateField(help_text="Latest day the monitor read for this alarm.")
    detail = models.JSONField(default=dict, blank=True, help_text="The figures of the latest flagged day.")
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_reason = models.CharField(max_length=16, blank=True, help_text="inside_limits or acknowledged.")
    note = models.TextField(blank=True, max_length=4000)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="alarms_acknowledged"
    )

    class Meta:
        ordering = ["-opened_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["route", "kind"], condition=Q(status="open"), name="alarm_one_open_per_route_kind"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} alarm on {self.route_id} ({self.status})"


class DailyAggregate(models.Model):
    """One route's decisions on one UTC day, folded for the monitor: filled incrementally, so the
    daily run reads these rows and not every decision."""

    route = models.ForeignKey("accounts.Route", on_delete=models.CASCADE, related_name="daily_aggregates")
    day = models.DateField()
    n = models.PositiveIntegerField(help_text="Decisions that day.")
    cutoff = models.FloatField(help_text="The signed cutoff refused_at_cutoff was counted at.")
    refused_at_cutoff = models.PositiveIntegerField(help_text="Decisions with gate score below the signed cutoff.")
    no_support_refused = models.PositiveIntegerField(
        default=0, help_text="Of those, decisions whose span check found no supporting passage."
    )
    not_following = models.PositiveIntegerField(
        default=0, help_text="Decisions whose logged cutoff is not the signed one."
    )
    histogram = models.JSONField(help_text="Decisions per 0.001 score bin on [0, 1] (1000 counts).")
    segments = models.JSONField(default=dict, help_text="Decisions per segment combination (its JSON text).")
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["route", "day"]
        constraints = [models.UniqueConstraint(fields=["route", "day"], name="daily_aggregate_per_route_day")]

    def __str__(self) -> str:
        return f"{self.route_id}/{self.day}: {self.n}"


class RouteMonitoring(models.Model):
    """A route's monitoring settings; a route without a row uses the defaults in settings."""

    route = models.OneToOneField("accounts.Route", on_delete=models.CASCADE, related_name="monitoring")
    evidence_max_label_age_days = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(LABEL_AGE_MAX_DAYS)],
        help_text="The signed evidence is stale once its newest label is older than this many days.",
    )

    def __str__(self) -> str:
        return f"monitoring of {self.route_id}"
