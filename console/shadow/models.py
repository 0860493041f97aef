from django.db import models


class ShadowStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class ShadowRun(models.Model):
    """A refused decision re-run with the gate disabled on exactly the passages logged for it."""

    # Checked on insert by a trigger, not a foreign key: decisions are partitioned (console/ledger/partitions.py).
    decision = models.ForeignKey(
        "ledger.Decision", on_delete=models.PROTECT, related_name="shadow_runs", db_constraint=False
    )
    pipeline = models.CharField(max_length=100, help_text="Pipeline name: 'reference' or 'http'.")
    pipeline_version = models.CharField(max_length=100, blank=True, help_text="Set when the pipeline last ran.")
    status = models.CharField(max_length=12, choices=ShadowStatus.choices, default=ShadowStatus.QUEUED)
    attempts = models.PositiveSmallIntegerField(
        default=0, help_text="Times a job claimed the run (one killed mid-run counts too)."
    )
    error = models.TextField(blank=True, help_text="Why the last attempt failed, as the pipeline reported it.")
    answer = models.TextField(blank=True, help_text="The answer the pipeline gave with the gate disabled.")
    passages_sha256 = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 over the passages handed to the pipeline, in rank order."
    )
    latency_ms = models.FloatField(null=True, blank=True, help_text="How long the pipeline took, retries included.")
    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField(
        null=True, blank=True, help_text="When a job for it was last queued; the sweeper queues it again if lost."
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One answer under review per refusal, whatever pipeline the route names later.
            models.UniqueConstraint(fields=["decision"], name="one_shadow_run_per_decision"),
            # Never a fake answer: only a succeeded run carries one, with the checksum of its input.
            models.CheckConstraint(
                condition=models.Q(status="succeeded", passages_sha256__regex=r"^[0-9a-f]{64}$") & ~models.Q(answer="")
                | ~models.Q(status="succeeded") & models.Q(answer=""),
                name="answer_only_when_succeeded",
            ),
        ]
        indexes = [models.Index(fields=["status", "created_at"], name="shadow_status_idx")]

    def __str__(self) -> str:
        return f"shadow {self.pipeline} for decision {self.decision_id}: {self.status}"


class RouteShadowSettings(models.Model):
    """A route's shadow pipeline. A route without a row has none (`{}`): its refusals are graded
    on the logged claim. The shadow app's own one-to-one table, as monitoring and similarity keep
    theirs; `console.shadow.selectors.route_shadow_config` reads it with that default."""

    route = models.OneToOneField(
        "accounts.Route", on_delete=models.CASCADE, primary_key=True, related_name="shadow_settings"
    )
    config = models.JSONField(
        default=dict,
        blank=True,
        help_text='Shadow pipeline: {} for none, {"kind": "reference"} or {"kind": "http", "url": ...}.',
    )

    class Meta:
        verbose_name = "route shadow settings"
        verbose_name_plural = "route shadow settings"

    def __str__(self) -> str:
        return f"shadow pipeline of route {self.route_id}"
