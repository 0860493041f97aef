"""Candidate gates registered per route, trials of them over the graded items, and one row per call."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class CandidateKind(models.TextChoices):
    HTTP = "http", "HTTP endpoint"
    REFERENCE = "reference", "Built-in reference (span support, no model)"


class Candidate(models.Model):
    """A gate to try: an HTTP endpoint, or the built-in reference rule. Registered by name per route;
    registering the same name again replaces its URL, headers and timeout."""

    route = models.ForeignKey("accounts.Route", on_delete=models.PROTECT, related_name="candidates")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=CandidateKind.choices, default=CandidateKind.HTTP)
    url = models.CharField(max_length=2000, blank=True, help_text="Where the console POSTs each item (http kind).")
    headers_encrypted = models.TextField(
        blank=True, help_text="Extra request headers (e.g. Authorization) as a Fernet token keyed from SECRET_KEY."
    )
    headers_env = models.CharField(
        max_length=100,
        blank=True,
        help_text='Name of an environment variable holding one more header as "Name: value", read at call time.',
    )
    timeout_s = models.FloatField(
        default=10.0, help_text="Seconds for one whole call: connecting, sending and every read of the reply."
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["route", "name"], name="candidate_name_per_route"),
            models.CheckConstraint(
                condition=Q(timeout_s__gt=0) & Q(timeout_s__lte=120), name="candidate_timeout_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.route.slug}/{self.name}"


class TrialStatus(models.TextChoices):
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class Trial(models.Model):
    route = models.ForeignKey("accounts.Route", on_delete=models.PROTECT, related_name="trials")
    candidate = models.ForeignKey(Candidate, on_delete=models.PROTECT, related_name="trials")
    repeats = models.PositiveSmallIntegerField(default=3, help_text="Calls per item.")
    subset = models.JSONField(default=dict, blank=True, help_text='{"from", "to", "segment", "model"} as given.')
    gates = models.JSONField(default=dict, help_text="Promotion gate thresholds.")
    cutoff = models.FloatField(
        null=True,
        blank=True,
        help_text="The signed cutoff the current gate is compared at; empty: each decision's logged cutoff.",
    )
    cutoff_source = models.CharField(max_length=100, help_text='"policy vN" or "logged".')
    status = models.CharField(max_length=16, choices=TrialStatus.choices, default=TrialStatus.RUNNING)
    error = models.TextField(blank=True, help_text="Why the trial failed, when it did.")
    items = models.PositiveIntegerField(default=0, help_text="Graded items the trial runs over.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    result_text = models.TextField(blank=True, help_text="The result document as stored JSON text.")
    result_sha256 = models.CharField(max_length=64, blank=True, help_text="SHA-256 of result_text (UTF-8).")
    passed = models.BooleanField(null=True, blank=True, help_text="Every promotion gate passed (when done).")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(repeats__gte=1) & Q(repeats__lte=10), name="trial_repeats_range"),
        ]

    def __str__(self) -> str:
        return f"trial {self.pk} of {self.candidate}"


class CallStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    CALLING = "calling", "Calling"
    DONE = "done", "Done"
    ERROR = "error", "Error"


class CallErrorKind(models.TextChoices):
    NONE = "", "None"
    CALL = "call", "Call failed"
    CITATION = "citation", "Cited a passage not sent"
    WORKER_LOST = "worker_lost", "Worker lost"


class TrialCall(models.Model):
    """One call of the candidate for one (trial, decision, repeat). The unique constraint and the
    claim (queued -> calling, by conditional update) make sure it is made at most once."""

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="calls")
    # Checked on insert by a trigger, not a foreign key: decisions are partitioned (console/ledger/partitions.py).
    decision = models.ForeignKey("ledger.Decision", on_delete=models.PROTECT, related_name="+", db_constraint=False)
    repeat = models.PositiveSmallIntegerField(help_text="1 .. trial.repeats")
    status = models.CharField(max_length=12, choices=CallStatus.choices, default=CallStatus.QUEUED)
    verdict = models.CharField(max_length=20, blank=True)
    score = models.FloatField(null=True, blank=True)
    citations = models.JSONField(default=list, blank=True)
    error_kind = models.CharField(max_length=12, choices=CallErrorKind.choices, blank=True, default="")
    error = models.TextField(blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trial", "decision", "repeat"], name="trial_call_once"),
        ]
        indexes = [models.Index(fields=["trial", "status"], name="trial_call_status_idx")]

    def __str__(self) -> str:
        return f"trial {self.trial_id} decision {self.decision_id} repeat {self.repeat}"
