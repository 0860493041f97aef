from django.conf import settings
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
    body = models.TextField(help_text="Plain text: the email's text part, the webhook's `body`.")
    html_body = models.TextField(blank=True, help_text="An email's HTML part, beside the text one; empty for webhooks.")
    summary = models.CharField(
        max_length=500, blank=True, help_text="One sentence in plain words of what happened: the webhook's `summary`."
    )
    data = models.JSONField(
        default=dict, blank=True, help_text="Facts a webhook receiver acts on (event, ids, due time, link)."
    )
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


class Digest(models.TextChoices):
    IMMEDIATELY = "immediately", "Each message as it happens"
    DAILY = "daily", "One email a day with everything that waited"


class Preference(models.Model):
    """How a person wants the console's emails; without a row, each message as it happens."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_preference")
    digest = models.CharField(max_length=16, choices=Digest.choices, default=Digest.IMMEDIATELY)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user_id}: {self.digest}"


class DigestItem(models.Model):
    """A message held for a person's daily digest; `notification` is the digest email it went out in."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    route = models.CharField(max_length=64, blank=True, default="")
    subject = models.CharField(max_length=300)
    part = models.JSONField(help_text="The message as an email part (console/notify/emails.py EmailPart).")
    created_at = models.DateTimeField(auto_now_add=True)
    notification = models.ForeignKey(
        Notification,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The digest email it went out in; empty while it waits.",
    )

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["user"], condition=models.Q(notification__isnull=True), name="notify_digest_pending")
        ]

    def __str__(self) -> str:
        return f"digest item for {self.user_id}: {self.subject}"
