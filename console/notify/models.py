from django.db import models


class Channel(models.TextChoices):
    EMAIL = "email", "Email"
    WEBHOOK = "webhook", "Webhook"


class Status(models.TextChoices):
    QUEUED = "queued", "Queued"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class Notification(models.Model):
    """One message to one recipient, kept with its delivery state so failures stay visible."""

    channel = models.CharField(max_length=10, choices=Channel.choices)
    recipient = models.CharField(max_length=2000, help_text="Email address, or the URL a webhook is POSTed to.")
    subject = models.CharField(max_length=300)
    body = models.TextField()
    route = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="Slug of the route the message is about; empty for global messages.",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Delivery attempts made so far.")
    error = models.TextField(blank=True, help_text="Why the last attempt failed.")
    next_attempt_at = models.DateTimeField(
        null=True, blank=True, help_text="When a queued message is due (after a failed attempt)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notify_due_idx")]

    def __str__(self) -> str:
        return f"{self.channel} to {self.recipient}: {self.subject} ({self.status})"
